"""Hugging Face ``datasets`` over .idv files: ``load``.

Imported on use (``import idv.huggingface``); it needs ``pip install 'idv[huggingface]'``
(datasets, pyarrow). The rows go through Arrow, never through Python objects per row: each
partition of whole blocks (idv._scan.scan.partitions) is read by idv._interop.arrow's record batch
reader, and the Arrow batches become the dataset's table (``datasets.Dataset``) or its stream
(``datasets.IterableDataset``, one shard per partition, so that DataLoader workers and
``datasets.distributed.split_dataset_by_node`` share the partitions out).

The Features follow the ML.NET types: numbers and Booleans as ``Value`` of their dtype, text as
``Value('string')``, fixed-size vectors as ``List(..., length=N)`` (``Sequence`` in older
datasets; a Vector<Single, 3, 4> as a flat list of 12), variable-size vectors as ``List``,
DateTime and TimeSpan as ``timestamp`` and ``duration`` (one unit for every file, as
idv.Dataset.time_unit chooses), DateTimeOffset and RowId as dicts of their parts. A key with
usable KeyValues is a ``ClassLabel`` over them (its values: key - 1, -1 for a missing key;
files whose KeyValues differ are refused, since it holds one set of names); any other key
holds the stored key values (0: missing). Each Arrow field keeps idv's ``idv.type`` and
``idv.metadata`` field metadata, except the ClassLabel columns (whose values are no longer the
stored keys).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from idv import _docs
from idv._resources import budget
from idv._scan import filters, scan
from idv._interop.arrow import record_batch_reader
from idv._values.arrow_types import METADATA_KEY, TYPE_KEY, import_pyarrow
from idv.errors import require
from idv._engines.reopen import Reopenable
from idv._values.arguments import ensure_count

if TYPE_CHECKING:
    import datasets

__all__ = ["load"]


def _datasets():
    return require("datasets", "idv.huggingface", "idv[huggingface]")


class _Tables:
    """The Arrow tables of partitions of a Reopenable source, key columns with KeyValues as
    class numbers; picklable, so that a stream's shards are read in DataLoader workers. Called
    with ``parts`` (a list of idv._scan.scan.Partition) it yields (key, pyarrow.Table)."""

    def __init__(self, source, unit, safe, filter_=None):
        self.source = source
        self.unit = unit
        self.safe = safe
        self.filter = filter_      # the rows that match: tested as every reader tests them
        self.schema = None          # the tables' schema, set by load once Features are known

    def batches(self, file, rows):
        """idv._interop.arrow's record batches of rows `rows` (a slice) of file number `file`,
        which the dataset keeps open until the last is read."""
        with self.source.dataset().using(file) as f:
            yield from record_batch_reader(f, self.source.names, datetime=self.unit,
                                           safe=self.safe, rows=rows, filter=self.filter)

    def arrow_schema(self):
        """The record batches' schema."""
        with self.source.dataset().using(0) as f:
            return record_batch_reader(f, self.source.names, datetime=self.unit,
                                       safe=self.safe, rows=slice(0, 0)).schema

    def labelled(self, batch):
        """The arrays of a record batch, its ClassLabel columns as int64 class numbers (-1:
        missing)."""
        pa = import_pyarrow()
        import pyarrow.compute as pc
        arrays = []
        for name, array in zip(batch.schema.names, batch.columns):
            if name in self.source.key_values:
                array = pc.fill_null(array.indices.cast(pa.int64()), -1)
            arrays.append(array)
        return arrays

    def __call__(self, parts):
        pa = import_pyarrow()
        for part in parts:
            for i, batch in enumerate(self.batches(part.part, slice(part.start, part.stop))):
                yield (f"{part.part}:{part.b0}:{i}",
                       pa.Table.from_arrays(self.labelled(batch), schema=self.schema))


def _features(hf, pa, schema, key_labels):
    """(Features, the Arrow schema of the tables) for the idv Arrow schema `schema`."""
    features, fields = {}, []
    for field in schema:
        labels = key_labels.get(field.name)
        if labels is not None:
            features[field.name] = hf.ClassLabel(names=labels)
            fields.append(pa.field(field.name, pa.int64()))
            continue
        features[field.name] = hf.Features.from_arrow_schema(pa.schema([field]))[field.name]
        keep = {k: v for k, v in (field.metadata or {}).items() if k in (TYPE_KEY, METADATA_KEY)}
        fields.append(field.with_metadata(keep))
    features = hf.Features(features)
    arrow = features.arrow_schema
    fields = [f.with_type(arrow.field(f.name).type) for f in fields]
    return features, pa.schema(fields, metadata=arrow.metadata)


@_docs.fill
def load(source, columns: Sequence[str | int] | None = None, streaming: bool = False, *,
         datetime: str = "auto", safe: bool = True, blocks_per_shard: int | None = None,
         filter=None, filesystem=None, storage_options: dict | None = None,  # noqa: A002
         **open_kwargs) -> datasets.Dataset | datasets.IterableDataset:
    """A ``datasets.Dataset`` of .idv files (``streaming=True``: a ``datasets.IterableDataset``,
    read as it is iterated), with Features from the ML.NET types (see the module's docstring).

    Parameters
    ----------
    {dataset_source}
        An IdvFile opened from a path too.
    {columns}
    streaming : bool, default False
        A ``datasets.IterableDataset``, read as it is iterated.
    {datetime}
        Default ``'auto'``; one unit for every file.
    {safe}
    blocks_per_shard : int, optional
        A stream's shards (default: one block each; the shards are what DataLoader workers
        and split_dataset_by_node deal out, and what ``shuffle`` reorders).
    {filter}
    {filesystem}
    {storage_options}
    **open_kwargs
        Passed to idv.dataset (``schema``, ``threads``...).

    Returns
    -------
    datasets.Dataset or datasets.IterableDataset
    """
    hf = _datasets()
    pa = import_pyarrow()
    src = Reopenable(source, columns, filesystem=filesystem, storage_options=storage_options,
                     **open_kwargs)
    twice = sorted({n for n in src.names if src.names.count(n) > 1})
    if twice:       # Features are keyed by name: pyarrow's error, or a cast's, otherwise
        raise ValueError(f"a Hugging Face dataset holds one column of each name: "
                         f"{', '.join(map(repr, twice))} asked twice")
    src.check_key_values("a ClassLabel holds one set of names")
    ds = src.dataset()
    unit, safe = ds.time_unit(src.names, datetime, safe)
    tables = _Tables(src, unit, safe, filter)
    blocks_per_shard = ensure_count(blocks_per_shard, "blocks_per_shard", "blocks", none=True)
    parts = scan.partitions(ds, src.names, blocks_per_shard or (1 if streaming else None),
                            block_filter=filters.blocks_of(filter))
    idv_schema = tables.arrow_schema()
    features, tables.schema = _features(hf, pa, idv_schema, src.key_labels)
    info = hf.DatasetInfo(features=features)
    if streaming:
        from datasets.iterable_dataset import ArrowExamplesIterable
        return hf.IterableDataset(ArrowExamplesIterable(tables, {"parts": parts}), info=info)
    # the table holds every partition's: the whole of them within the dataset's memory limit
    kept = budget.kept(tables(parts), ds.memory_limit,
                       lambda: f"{budget.name_of(ds)}: the table of a datasets.Dataset",
                       nbytes=lambda keyed: keyed[1].nbytes)
    table = pa.concat_tables([t for _key, t in kept]) if parts else tables.schema.empty_table()
    return hf.Dataset(table, info=info)
