"""pyarrow.dataset and DuckDB: ``arrow_dataset``, .idv files as a ``pyarrow.dataset.Dataset``.

DuckDB scans any instance of ``pyarrow.dataset.Dataset`` by calling its class's ``scanner``
with the columns a query needs and its filter as a pyarrow expression, then reads the
scanner's ``to_reader()``; pyarrow's own helpers call ``to_table``, ``count_rows``, ``head``
and ``take``. So the object returned here subclasses ``pyarrow.dataset.Dataset`` (as Lance's
dataset does) and answers those calls from idv's scan: only the columns asked for are
decoded, blocks whose statistics rule the filter out are neither fetched nor decoded, and the
rows of the others are filtered by pyarrow itself, so results follow Arrow's rules exactly
whatever the file's statistics. ``count_rows(filter=)`` counts a block whose statistics say
every row matches without decoding it (its CRC-32 checked, as a ruled-out block's). Methods
of pyarrow's Dataset that need Arrow's own C++ dataset (fragments, joins, sorting) raise
NotImplementedError instead.

pyarrow is imported only when ``arrow_dataset`` is called: the class it returns is
idv._engines.arrow_dataset_class's, its scans idv._engines.arrow_scanner's.
"""
from __future__ import annotations

from idv import _docs
from idv._values.arrow_types import import_pyarrow
from idv._reader.dataset import as_dataset

__all__ = ["arrow_dataset"]


@_docs.fill
def arrow_dataset(source, *, datetime: str = "auto-us", safe: bool = True, **dataset_options):
    """.idv files as a ``pyarrow.dataset.Dataset``, for DuckDB (``duckdb.sql("select a from
    ds where ts >= ...")`` pushes the projection and the filter into idv) and pyarrow.

    The object has ``schema``, ``scanner(columns=, filter=, batch_size=)`` (with
    ``to_reader``, ``to_table``, ``to_batches``, ``count_rows``, ``head``, ``take``,
    ``projected_schema``), ``to_table``, ``to_batches``, ``count_rows(filter=)``,
    ``head(n, columns=, filter=)`` and ``take(indices, columns=)``. Filters are pyarrow
    compute expressions; blocks are skipped where idv's filters understand the expression
    and the statistics allow, and the rows are tested by idv where every comparison of it
    means to idv what it means to Arrow, else by pyarrow.

    Parameters
    ----------
    {dataset_source}
    {datetime}
        Default ``'auto-us'``: microseconds, DuckDB's own unit (it pushes filters into a scan
        only on microsecond timestamps, and it holds every date .NET has), each column as
        the type it was written from within them (a zoned column a zoned timestamp, as
        to_arrow gives it), 100-ns ticks floored with a warning. ``'us'`` gives .NET's
        types and refuses such ticks unless ``safe=False``.
    {safe}
    {dataset_options}

    Returns
    -------
    pyarrow.dataset.Dataset
    """
    import_pyarrow()
    ds, owned = as_dataset(source, dataset_options)
    try:
        unit, safe = ds.time_unit(ds.column_names, datetime, safe)
        from idv._engines.arrow_dataset_class import IdvArrowDataset
        return IdvArrowDataset(ds, unit, safe)
    except BaseException:
        if owned:
            ds.close()
        raise
