"""What every format of idv.convert shares: the options of one conversion, the source and
sink shapes, the read-ahead thread, the atomic output file and the compression check.

The format modules (idv, parquet, ipc, text) and the registry (idv.formats) import this one;
it imports none of them.
"""
from __future__ import annotations

from typing import NamedTuple

from idv._reader import selection
from idv._values.arrow_types import import_pyarrow
from idv.compression import NONE, kind as compression_kind
from idv._storage.sink import AtomicPath

# batches read ahead of the one being written, in a thread of their own
READ_AHEAD = 1


class Options(NamedTuple):
    """One conversion's settings, as idv.convert took them (checked there), handed to a
    format's source and sink: each reads the ones that concern it."""

    format: str             # the destination format's name (its error messages say it)
    columns: object         # None, or names (and for .idv sources indices)
    datetime: str
    safe: bool
    types: object           # {column: idv type} for a non-.idv source, or None
    compression: object
    rows_per_block: object  # an .idv output's block size, or None
    deflate: dict           # an .idv output's level=, backend= and threads= (its Writer's)
    batch_rows: int         # rows per batch read from a Parquet / IPC source
    legacy_keys: object = None   # "shift": ML.NET 0.x keys with a min written from min 0
    missing_text: object = None  # what null text of a non-.idv source becomes, or None
    keep_blocks: bool = False    # .idv -> .idv: copy blocks stored as the output stores them
    opening: dict = {}           # idv.open's threads= and memory_limit= of an .idv source


def import_pa():
    """pyarrow, or an ImportError that says how to install it."""
    return import_pyarrow()


def is_dataset(src):
    """Whether `src` is an idv.Dataset (read as .idv, file after file): files laid end to end
    that it opens on demand, as idv._scan.scan takes them (no import of the engines above)."""
    return hasattr(src, "open_file") and hasattr(src, "files")


# ---------------------------------------------------------------------------------------------
# sources: (schema, batches, total rows) + dictionary pre-scan
# ---------------------------------------------------------------------------------------------

class Source:
    """Arrow record batches of one input: `schema`, `total` rows (None when unknown) and
    `batches()`. `read_ahead`: how many batches convert reads in a thread of its own ahead of
    the one being written."""

    schema = None
    total = None
    read_ahead = READ_AHEAD
    types = None        # {column: idv type} the source itself tells, under those of types=

    def batches(self):
        raise NotImplementedError

    def column_batches(self, name):
        """Batches of one column only (to collect a dictionary's values before writing)."""
        for b in self.batches():
            yield b.column(b.schema.get_field_index(name))

    def close(self):
        pass


def column_names(schema, columns):
    """The names of the Arrow `schema`'s columns that `columns` (names or indices) choose;
    None for all (idv._reader.selection's rule)."""
    return selection.names_of(list(schema.names), columns)


def selected_schema(pa, schema, names):
    """`schema` with only the columns `names` (None: all), keeping its metadata."""
    if names is None:
        return schema
    return pa.schema([schema.field(n) for n in names], metadata=schema.metadata)


def read_ahead(batches, prepare, depth=READ_AHEAD):
    """(rows, prepare(batch, row0)) of each batch of an iterator, read and prepared in a thread
    up to `depth` batches ahead, so that reading (pyarrow's readers and idv's decoders release
    the GIL) overlaps with writing. An error there comes out here, where its batch would have;
    closing the generator stops the thread. `depth` 0: read and prepared here, in turn."""
    if depth == 0:
        row0 = 0
        for b in batches:
            yield b.num_rows, prepare(b, row0)
            row0 += b.num_rows
        return
    import queue
    import threading
    q = queue.Queue(depth)
    stop = threading.Event()
    end = object()

    def put(item):
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                pass
        return False

    def run():
        try:
            row0 = 0
            for b in batches:
                if not put(((b.num_rows, prepare(b, row0)), None)):
                    return
                row0 += b.num_rows
            put((end, None))
        except BaseException as e:      # handed to the consumer, raised there
            put((end, e))

    thread = threading.Thread(target=run, name="idv-convert-read", daemon=True)
    thread.start()
    try:
        while True:
            b, error = q.get()
            if b is end:
                if error is not None:
                    raise error
                return
            yield b
    finally:
        stop.set()
        thread.join()


# ---------------------------------------------------------------------------------------------
# sinks
# ---------------------------------------------------------------------------------------------

class FileSink:
    """A pyarrow writer on a temporary file that close() renames into place and abort()
    removes; `_handles()` are what must be closed first, in order."""

    writer = None

    def prepare(self, batch, row0):
        return batch

    def _create(self, dest, open_writer):
        """The temporary file beside `dest`, and `open_writer(its path)`; if that fails, the
        temporary file is removed."""
        self.out = AtomicPath(dest)
        try:
            open_writer(self.out.tmp)
        except BaseException:
            self.abort()
            raise

    def _handles(self):
        return [self.writer]

    def close(self):
        for h in self._handles():
            h.close()
        self.out.commit()

    def abort(self):
        for h in self._handles():
            try:
                if h is not None:
                    h.close()
            except Exception:
                pass
        self.out.abort()


def refuse_rows_without_columns(fmt, rows):
    """ValueError for `rows` rows of no column (ML.NET's no-column file) written to a format
    that holds no row without a column (Parquet, CSV, TSV): rather than a file of none, and
    a count of rows converted that it does not hold."""
    if rows:
        raise ValueError(f"{fmt.upper() if fmt != 'parquet' else 'Parquet'} holds no row "
                         f"without a column: {rows} rows of no column cannot be written "
                         f"(.idv, Feather and JSON Lines keep them)")


def check_codecs(fmt, codecs, compression):
    """The codec name for an output of the format named `fmt` whose writer takes `codecs`
    besides 'deflate' (its default) and 'none' (None: an output never compressed):
    'deflate' for the format's default, 'none', or one of `codecs` that this pyarrow has;
    ValueError naming the choices before any file is made."""
    kind = compression_kind(compression, strict=False)
    text = codecs is None
    if kind is not None and (not text or kind == NONE or compression == "deflate"):
        return compression
    if codecs:
        pa = import_pa()
        codecs = tuple(c for c in codecs if pa.Codec.is_available(c))
    name = str(compression).lower()
    if codecs and name in codecs:
        return name
    if text:
        raise ValueError(f"{fmt.upper()} output is not compressed; leave compression at its "
                         f"default, not {compression!r}")
    raise ValueError(f"compression {compression!r} for {fmt} output: one of "
                     f"{', '.join(('deflate', 'none') + tuple(codecs))}")
