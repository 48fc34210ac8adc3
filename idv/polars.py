"""polars: ``scan_idv``, a LazyFrame over .idv files through polars' IO plugins.

polars hands the plugin the columns a query needs, its predicate, a row limit and a batch
size. The columns and the limit are honoured as they come. Where idv._engines.engine_filters
takes the whole predicate (comparisons that mean the same to polars and to idv, joined by ``&``
and ``|``), idv tests the rows, on the blocks the statistics do not rule out; otherwise it skips
the blocks the part it takes rules out, and polars tests every row of the frames by its own
rules. Since DuckDB queries a polars LazyFrame with its filters pushed into it,
``duckdb.sql("select ... from lf where ...")`` skips them too. The frames hold whole blocks, the
batch size's rows or more up to FRAME_BYTES, Text as Arrow string views, polars' own layout.
A zone of part of an hour (``+05:30``), which polars cannot name, comes as UTC instants. """
from __future__ import annotations

import json
import os
import re
import threading

from idv import _docs
from idv._interop import arrow
from idv._interop.arrow_columns import as_views
from idv._resources import budget
from idv._engines import engine_filters
from idv._scan import filters
from idv._reader import whole_read
from idv._engines.arrow_scanner import BATCH_BYTES, BATCH_ROWS, grouped, rows_within
from idv._values.arrow_types import empty_table
from idv.errors import require

# bytes of Arrow data a frame handed to polars may hold beyond the batch size it asks for
FRAME_BYTES = BATCH_BYTES
# under an address-space limit, the room a frame must leave polars besides a copy of it (its
# threads' stacks, its allocator's arenas): polars aborts the process when it runs out
POLARS_ROOM = 64 << 20


@_docs.fill
def scan_idv(source, *, datetime="auto", safe=True, **dataset_options):
    """A polars LazyFrame over .idv files, which must agree on their columns as idv.dataset
    checks. Each file is opened once. Projection, predicate (statistics skip blocks where it
    translates; idv tests the rows where it translates whole, else polars does), ``n_rows``
    and the batch size (frames of that many rows, or more up to 16 MiB) pass into the read.

    Parameters
    ----------
    {dataset_source}
    {datetime}
        Default ``'auto'``.
    {safe}
    {dataset_options}

    Returns
    -------
    polars.LazyFrame

    Examples
    --------
    >>> import idv.polars, polars as pl
    >>> lf = idv.polars.scan_idv(idv.sample_path())
    >>> lf.filter(pl.col("Price") > 800000).select("Id").collect().height
    34
    """
    pl = require("polars", "idv.polars.scan_idv", "idv[polars]")
    from polars.io.plugins import register_io_source
    from idv._reader.dataset import as_dataset
    _small_reservations()
    ds, _ = as_dataset(source, dataset_options)
    names = ds.column_names
    unit, safe = ds.time_unit(names, datetime, safe)
    schema = arrow.arrow_schema(ds, names, datetime=unit)
    types = {n: ds.schema[n].type for n in names}
    floored = engine_filters.floored(types, unit, safe)
    labels = engine_filters.label_columns(schema)
    pl_schema = _polars_schema(pl, schema)
    pa = arrow.import_pyarrow()

    def io_source(with_columns, predicate, n_rows, batch_size):
        wanted = list(with_columns) if with_columns is not None else list(names)
        node, exact, wanted = _pushed(predicate, types, wanted, floored, labels, pl_schema)
        # a select of the columns a frame has already would still cost a query
        narrow = with_columns is not None and list(with_columns) != wanted
        spare = 0 if budget.address_space_room() is None else POLARS_ROOM
        least, room = _frame_size(ds, wanted, batch_size, spare)
        if predicate is None and n_rows is None:    # every row kept: refused before reading
            whole_read.check_table(ds, wanted)

        def frames():
            # the scan's batches (whole blocks of about the rows of a frame: the batch size
            # polars asks for, or more up to FRAME_BYTES) grouped into frames: its filter and
            # select once a frame (each a query of its own), not once a block; a row limit
            # without a predicate reads only the blocks that hold those rows
            blocks = arrow.window_reader(ds, wanted, datetime=unit, safe=safe, filter=node,
                                         batch_rows=rows_within(ds, wanted, least, room),
                                         text_views=True, rows=None if n_rows is None or
                                         predicate is not None else slice(0, n_rows))
            for group in grouped(blocks, least, room):
                table = pa.Table.from_batches(group, blocks.schema)
                # polars aborts the process when an allocation fails: the frame leaves it room
                # for a copy and its own, within the limit (its bytes before Text's views)
                budget.check(table.nbytes + spare, ds.memory_limit,
                             lambda: f"{budget.name_of(ds)}: a frame for polars")
                yield _frame(pl, pa, table, None if exact else predicate,
                             with_columns if narrow else None)

        left = n_rows
        # polars keeps every frame of a collect: each charged to the limit before polars has it
        for df, _ in budget.kept(frames(), ds.memory_limit,
                                 lambda: f"{budget.name_of(ds)}: frames for polars",
                                 nbytes=lambda frame: frame[1]):
            if left is not None:
                df = df.head(left)
                left -= df.height
            yield df
            if left is not None and left <= 0:
                return

    return register_io_source(io_source, schema=pl_schema)


def _bind(schema, predicate):
    """Bind polars' `predicate` to `schema` (polars') once, as over a frame in memory: a
    comparison polars refuses (a Categorical with a float) raises whatever the rows (none, or
    all ruled out by the statistics)."""
    import polars as pl
    pl.LazyFrame(schema={c: schema[c] for c in predicate.meta.root_names()}) \
        .filter(predicate).collect()       # through the optimizer, as _frame filters


def _frame_size(ds, wanted, batch_size, spare):
    """(rows, bytes) of a frame of columns `wanted`: the batch size polars asks for, or more
    up to FRAME_BYTES; within half the memory limit less `spare`, as every stream's pieces (a
    limit under two frames of FRAME_BYTES cuts them, to fewer rows than polars asks for)."""
    room = budget.halved(FRAME_BYTES, max(ds.memory_limit - spare, 2))
    least = batch_size or BATCH_ROWS
    if room < FRAME_BYTES:
        least = min(least, rows_within(ds, wanted, 1, room))
    return least, room


def _frame(pl, pa, table, predicate, columns):
    """(polars frame, its bytes) of a group of blocks (`table`) in polars' layout, filtered
    by polars' `predicate` and narrowed to `columns` (None: neither); its bytes its Arrow
    buffers', but for a frame polars filters (polars' estimated_size, which walks every
    string view: 1.2 ms a frame of 950,000 strings)."""
    table = _polars_table(pa, table)
    df = pl.from_arrow(table, rechunk=False)
    if predicate is not None:
        # through polars' optimizer, as a query over a frame in memory: what polars pushed
        # may hold parts it folds away there (``false & (k >= 2)``), which an eager filter
        # evaluates, raising where the query answers
        df = df.lazy().filter(predicate).collect()
        df = df if columns is None else df.select(columns)
        return df, df.estimated_size()
    if columns is None:
        return df, table.nbytes
    return df.select(columns), table.select(list(columns)).nbytes


def _pushed(predicate, types, wanted, floored=frozenset(), labels=frozenset(), schema=None):
    """(the filter idv applies, whether it is the whole predicate, the columns to read) for
    polars' `predicate` (None: none) over columns `wanted` (`types`: each column's;
    `floored`: the time columns polars gets floored to microseconds; `labels`: the keys it
    gets as Categoricals of their labels); a predicate polars tests bound to polars'
    `schema` first (_bind)."""
    if predicate is None:
        return None, False, wanted
    tree, exact = engine_filters.from_polars(
        json.loads(predicate.meta.serialize(format="json")), types, floored, labels)
    if not exact and schema is not None:
        _bind(schema, predicate)
    if exact or tree is None:
        return tree, exact, wanted
    # else polars tests the rows, on frames that hold the predicate's columns too; idv's part
    # skips blocks only
    return filters.BlocksOnly(tree), False, wanted + [
        c for c in predicate.meta.root_names() if c not in wanted]


def _polars_table(pa, table):
    """A group of blocks (`table`, a chunk per block) in polars' own layout: Text as Arrow
    string views, which polars takes as they are (a string array it converts value by value,
    in one thread). The scan makes them as it decodes the blocks; the strings it leaves
    (the matches of a column idv tests, a partition key's) become views here. The chunks stay
    as they are: joining views would copy them."""
    for i, field in enumerate(table.schema):
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            table = table.set_column(i, field.with_type(pa.string_view()), pa.chunked_array(
                [as_views(pa, c) for c in table.column(i).chunks], pa.string_view()))
        elif (zoned := _polars_type(pa, field.type)) != field.type:
            table = table.set_column(i, field.with_type(zoned), table.column(i).cast(zoned))
    return table


# a fixed-offset zone of part of an hour (+05:30), which polars cannot parse (it names whole
# hours itself, +05:00 as Etc/GMT-5, and panics on the rest)
_PART_HOUR = re.compile(r"^[+-]\d\d:(?!00)\d\d$")


def _polars_type(pa, at):
    """Arrow type `at` as polars takes it: a timestamp in a zone _PART_HOUR in UTC (the same
    instants: the column was written from that zone, in which polars cannot give it)."""
    if pa.types.is_timestamp(at) and at.tz is not None and _PART_HOUR.match(at.tz):
        return pa.timestamp(at.unit, tz="UTC")
    return at


# the polars schema of each Arrow schema's (names, types) met, at most SCHEMAS of them: polars
# converts an empty table of it, a quarter of a millisecond a scan when made each time
SCHEMAS = 64
_schemas: dict = {}
_schemas_lock = threading.Lock()      # scans made in several threads evict one at a time


def _polars_schema(pl, schema):
    key = tuple((f.name, f.type) for f in schema)
    found = _schemas.get(key)
    if found is None:
        pa = arrow.import_pyarrow()
        schema = pa.schema([f.with_type(_polars_type(pa, f.type)) for f in schema])
        found = pl.from_arrow(empty_table(pa, schema)).schema
        with _schemas_lock:
            while _schemas and len(_schemas) >= SCHEMAS:    # the oldest first
                _schemas.pop(next(iter(_schemas)))
            _schemas[key] = found
    return found


def _small_reservations():
    """Under an address-space limit (RLIMIT_AS), pyarrow allocates through the system's
    allocator unless told otherwise (ARROW_DEFAULT_MEMORY_POOL): its default, mimalloc,
    reserves a gigabyte of address space at its first allocation, which with polars' own
    reservations leaves polars no room, and polars aborts the process when an allocation
    fails."""
    if budget.address_space_room() is not None and "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        pa = arrow.import_pyarrow()
        pa.set_memory_pool(pa.system_memory_pool())
