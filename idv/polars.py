"""polars: ``scan_idv``, a LazyFrame over .idv files through polars' IO plugins.

polars hands the plugin the columns a query needs, its predicate, a row limit and a batch
size. The columns and the limit are honoured as they come; the predicate is applied to every
batch by polars' own rules, and where idv.engine_filters takes it (comparisons that mean the
same to polars and to idv, joined by ``&`` and ``|``), the blocks whose statistics rule it
out are not decoded either. Since DuckDB queries a polars LazyFrame with
its filters pushed into it, ``duckdb.sql("select ... from lf where ...")`` skips them too.
"""
from __future__ import annotations

import json
import os

from idv import arrow, engine_filters, filters
from idv.errors import require
from idv.reader import open as idv_open

def _files(source):
    """The .idv files of `source`: a file or URL, a directory, a glob, or a list of them."""
    if isinstance(source, (list, tuple)):
        return [p for s in source for p in _files(s)]
    s = os.fspath(source)
    if "://" not in s and (os.path.isdir(s) or any(ch in s for ch in "*?[")):
        from idv.dataset import dataset
        return [f.path for f in dataset(s).files]
    return [s]


def scan_idv(source, *, datetime="us", **open_options):
    """A polars LazyFrame over an .idv (a path or URL), a directory, a glob or a list of
    them: projection, predicate (statistics skip blocks where it translates; polars always
    tests the rows), ``n_rows`` and the batch size pass into the read. ``datetime``: the unit
    of DateTime and TimeSpan columns, as in idv.to_arrow (default ``"us"``, polars' and
    exact for every date .NET has; a tick below a microsecond raises ValueError; ``"auto"``
    reads the time columns first to choose). `open_options` go to idv.open."""
    pl = require("polars", "idv.polars.scan_idv", "polars")
    from polars.io.plugins import register_io_source
    files = _files(source)
    with idv_open(files[0], **open_options) as f:
        schema = arrow.arrow_schema(f, datetime=datetime)
        types = {c.name: c.type for c in f.columns}
    pl_schema = pl.from_arrow(schema.empty_table()).schema

    def io_source(with_columns, predicate, n_rows, batch_size):
        names = list(with_columns) if with_columns is not None else list(schema.names)
        node = None
        if predicate is not None:
            for c in predicate.meta.root_names():
                if c not in names:
                    names.append(c)
            tree = engine_filters.from_polars(
                json.loads(predicate.meta.serialize(format="json")), types)
            node = None if tree is None else filters.BlocksOnly(tree)
        left = n_rows
        for path in files:
            with idv_open(path, **open_options) as f:
                reader = arrow.record_batch_reader(f, names, batch_size=batch_size,
                                                   filter=node, datetime=datetime)
                for rb in reader:
                    df = pl.from_arrow(rb)
                    if predicate is not None:
                        df = df.filter(predicate)
                    if with_columns is not None:
                        df = df.select(with_columns)
                    if left is not None:
                        df = df.head(left)
                        left -= df.height
                    yield df
                    if left is not None and left <= 0:
                        return

    return register_io_source(io_source, schema=pl_schema)
