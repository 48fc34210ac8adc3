"""The one planner of whole reads: every row of some columns of files [i0, i1) of a source
(idv._reader.read_source: an IdvFile, a Dataset), for numpy's read (idv._reader.reads), Arrow's
to_arrow and the record batches of small files (idv._interop.arrow) and pandas' frames
(idv._interop.pandas).

One file: its columns decoded by one scan (idv._scan.scan.read_whole), all in the threads at once,
each into its own array; a remote file's blocks fetched first in a few requests; columns the
caller takes without decoding (``Form.mapped``: views of a memory map) left to it; Text into
Arrow chunks on the blocks' UTF-8 (``Form.arrow``) or numpy's StringDType (``Form.strings``),
Boolean scalars into Arrow chunks on the blocks' bits (``Form.arrow``).

Many files: fixed-width columns (numbers, keys, dense vectors; not times, which readers
convert) decoded straight into one array for all the files, the blocks of up to FILES_AT_ONCE
files inflated in one call (idv._store.many_files); Text into Arrow chunks, the blocks of many
files inflated together (idv._store.many_files.text_blocks); every other column read file by file,
column by column, and joined. Every read, of one file or many, is checked against the source's
memory limit as a whole first, all its columns together (check_memory: the one rule of a file's and
a dataset's reads); the store then checks each allocation as it makes it. A stream's batches of a
given size are checked so too (check_batch). """
from __future__ import annotations

import contextlib
import weakref
from typing import Callable, NamedTuple, Optional

import numpy as np

from idv._resources import threads as _threads, work as _work
from idv._store import many_files as batch
from idv._scan import scan
from idv._reader import read_source
from idv._values import ticks, vectors
from idv import types as T

# files whose blocks a whole read inflates in one call (idv._store.many_files), at most; the files
# a stream reads together, at most
FILES_AT_ONCE = 256
# decoded bytes of the small files a stream reads together, in one whole read, at most (a
# larger file is streamed by itself, a window of blocks at a time)
GROUP_BYTES = 16 << 20
# remote files of a run whose blocks are fetched at the same time (_fetched)
FETCHES_AT_ONCE = 16

# source -> {key: whether every file has the same KeyValues of that key column}
_key_values_agree: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class Form(NamedTuple):
    """What a whole read gives besides read()'s forms: ``arrow(col)``, a scan reader whose
    chunks are Arrow arrays of a column (idv._interop.arrow_columns: Text on its UTF-8, a file's
    Boolean scalars on their bits), or None for read()'s forms; ``mapped(col)``, the rows of
    a column the caller takes without decoding (views of a memory map), or None; ``sparse``:
    CSR for numeric vectors; ``strings``: Text as numpy's StringDType."""
    arrow: Optional[Callable] = None
    mapped: Optional[Callable] = None
    sparse: bool = False
    strings: bool = False


def read(source, keys, i0, i1, form=Form()):
    """Every row of columns `keys` of files [i0, i1) of `source`, a value per key: read()'s
    form, or the list of Arrow chunks of a column `form.arrow` reads (of many files: Text)."""
    if i1 - i0 == 1:
        return _one_file(source, keys, i0, form)
    with source.using(i0) as first:
        arrow = [k for k in keys if form.arrow is not None and form.arrow(first[k]) is not None]
        rooms = {k: r for k in keys if not form.sparse and (r := _room(first[k])) is not None}
        text = [k for k in arrow if T.item_type(first[k].type) is T.Text]
    files = source.files
    size = files[i1 - 1].stop - files[i0].start
    shapes = {k: ((size,) + shape[1:], dtype) for k, (shape, dtype) in rooms.items()}
    rest = [k for k in keys if k not in rooms and k not in text]
    check_memory(source, keys, [(i, None) for i in range(i0, i1)], shapes, once=text,
                 arrow=text)
    got = {k: np.empty(*shape) for k, shape in shapes.items()}
    got.update((k, []) for k in text)
    parts = []
    for a in range(i0, i1, _step(source)):        # each file opened once
        with _held(source, a, min(a + _step(source), i1)) as held, \
                _fetched(source, held, keys):
            _in_place(held, got, files, files[i0].start, list(rooms))
            for k in text:
                got[k] += _text_chunks(held, k, form.arrow)
            parts += [_by_column(f, rest, form) for _, f in held if rest]
    for j, k in enumerate(rest):
        got[k] = vectors.concat_reads([p[j] for p in parts])
    return [got[k] for k in keys]


def _one_file(source, keys, i, form):
    """read() of the one file i, checked first against the source's limit (check_memory) for
    the columns it decodes (those mapped allocate nothing)."""
    with source.using(i) as f:
        cols = [f[k] for k in keys]
        got = [None if form.mapped is None else form.mapped(c) for c in cols]
        arrows = [None if form.arrow is None else form.arrow(c) for c in cols]
        check_memory(source, [k for k, v in zip(keys, got) if v is None], [(i, None)],
                     arrow=[k for k, a in zip(keys, arrows) if a is not None])
        readers, at = [], []
        for j, (c, arrow) in enumerate(zip(cols, arrows)):
            if got[j] is not None or (form.strings and T.item_type(c.type) is T.Text):
                continue
            readers.append(scan.Chunks(arrow) if arrow is not None else
                           scan.WholeColumn(f.store, c, form.sparse and vectors.csr_type(c.type)))
            at.append(j)
        with f.prefetch([c for c, v in zip(cols, got) if v is None]):
            for j, v in zip(at, scan.read_whole(f, readers) if readers else ()):
                got[j] = v
            for j, c in enumerate(cols):
                if got[j] is None:
                    got[j] = c.read_strings()
        return got


def _by_column(f, keys, form):
    """read() of columns `keys` of open file `f`, one by one: a file among many, its columns
    that are neither decoded in place nor Arrow text (a scan's windows cost more than they
    share on the small files of a dataset)."""
    out = []
    for k in keys:
        c = f[k]
        out.append(c.read_strings() if form.strings and T.item_type(c.type) is T.Text
                   else c.read(form.sparse and vectors.csr_type(c.type)))
    return out


def _room(col):
    """(shape, dtype) of a column's rows when every file's decode straight into one array:
    fixed-width items stored as they are (numbers, keys, dense vectors; not times, which
    readers convert); else None."""
    if T.item_type(col.type) in ticks.TIME_ITEMS:
        return None
    return scan.fixed_room(col, 0, col.num_blocks)


@contextlib.contextmanager
def _held(source, a, b):
    """Files [a, b) of `source`, open for the block: [(i, file)]."""
    with contextlib.ExitStack() as stack:
        yield [(i, stack.enter_context(source.using(i))) for i in range(a, b)]


@contextlib.contextmanager
def _fetched(source, held, keys):
    """The blocks of columns `keys` of the `held` files ([(i, file)]) of a remote `source` (a
    dataset in an fsspec filesystem) fetched all at once, each file's prefetch entered in a
    thread of its own, and read from memory in the block: a run of small files over a URL
    costs about one request's time, not one a file. Local files, or more bytes than the
    source's memory limit together, are read as ever."""
    if getattr(source, "filesystem", None) is None or len(held) < 2 or \
            sum(f[k].nbytes_disk for _, f in held for k in keys) > source.memory_limit:
        yield
        return
    fetches = [cm for _, f in held
               if not isinstance(cm := f.prefetch(keys), contextlib.nullcontext)]
    if len(fetches) < 2:
        yield
        return
    with contextlib.ExitStack() as stack:
        pool, work = _threads.pool("fetch", FETCHES_AT_ONCE), _work.Work(_work.current())
        entered = [work.submit(pool, cm.__enter__) for cm in fetches]
        try:
            work.wait(entered)
        finally:
            for cm, done in zip(fetches, entered):      # every fetch that began is ended
                if done.done() and not done.cancelled() and done.exception() is None:
                    stack.push(cm.__exit__)
            work.release()
        for done in entered:
            if done.exception() is not None:
                raise done.exception()
        yield


def _step(source):
    """The files held open at once by a read of many."""
    return max(1, min(source.max_open_files, FILES_AT_ONCE))


def _in_place(held, out, files, base, keys):
    """The rows of the `held` files ([(i, file)]) of columns `keys` decoded into their
    places in `out` (key -> one array for all the files, whose first row is row `base` of the
    source), the blocks of them all inflated in one call per kind (idv._store.many_files)."""
    pieces = []
    for i, f in held:
        at = files[i].start - base
        for k in keys:
            col = f[k]
            piece = (f.store, col.blocks, out[k], at)
            if col.num_rows and batch.batchable(*piece):
                pieces.append(piece)
            else:
                col.read_blocks(0, col.num_blocks, out=out[k][at:at + files[i].num_rows])
    if pieces:
        batch.inflate_files(pieces, pieces[0][0].threads)


def _text_chunks(held, key, make):
    """The rows of Text column `key` of the `held` files ([(i, file)]) as Arrow arrays
    (``make(col)``: its reader, idv._interop.arrow_columns.text_reader) on the blocks' UTF-8: the
    blocks of the files in memory inflated together (idv._store.many_files.text_blocks), the
    others' each in turn."""
    pieces = [(f.store, f[key]) for _, f in held]
    together = [batch.text_batchable(*p) for p in pieces]
    spans = iter(batch.text_blocks([p for p, ok in zip(pieces, together) if ok],
                                   pieces[0][0].threads) if any(together) else ())
    chunks, conv = [], make(pieces[0][1])       # Arrow arrays of blocks: of any file's column
    for (_, col), ok in zip(pieces, together):
        chunks.extend(map(conv.text_block_array, next(spans)) if ok
                      else make(col).text_arrays(0, col.num_blocks))
    return chunks


def same_key_values(source, key):
    """Whether every file of `source` has the same KeyValues of key column `key` (or none):
    then its keys name the same values in all. Asked of each file once."""
    known = _key_values_agree.setdefault(source, {})
    if key not in known:
        known[key] = same_annotation(_columns_of(source, key), "KeyValues")
    return known[key]


def same_annotation(columns, kind):
    """Whether the columns (an iterable of one a file, each read in turn) all have the same
    `kind` annotation, or none: told by its stored form (Column.annotation_form), its values
    decoded and compared only where the forms differ (one file stored uncompressed)."""
    columns = iter(columns)
    first = next(columns)
    form, value = first.annotation_form(kind), first.annotation(kind)
    for col in columns:
        if col.annotation_form(kind) == form:
            continue
        other = col.annotation(kind)
        if (other is None) != (value is None) or other is not None and not (
                np.asarray(other).dtype == np.asarray(value).dtype
                and np.array_equal(other, value)):
            return False
    return True


def check_slot_names(source, names):
    """ValueError naming the file and column where a vector column of `names` (those expanded
    into a column per slot, named by their SlotNames) has other SlotNames than the first file:
    one frame's slot columns hold one set of names (as idv.convert refuses such files)."""
    for n in names:
        i = other_annotation(source, n, "SlotNames")
        if i is not None:
            raise ValueError(f"{source.files[i].path}: column {n!r} has other SlotNames than "
                             f"{source.files[0].path}, and a frame's slot columns hold one set "
                             f"of names: read such files apart, or with vectors='object'")


def other_annotation(source, key, kind):
    """The first file of `source` whose `kind` annotation of column `key` is not the first
    file's (same_annotation), None where every file's is the same (asked of all at once)."""
    if len(source.files) < 2 or same_annotation(_columns_of(source, key), kind):
        return None
    with source.using(0) as first:
        for i in range(1, len(source.files)):
            with source.using(i) as f:
                if not same_annotation([first[key], f[key]], kind):
                    return i
    return None


def _columns_of(source, key):
    """Column `key` of each file of `source` in turn, the files opened a few at a time."""
    for a in range(0, len(source.files), _step(source)):
        with _held(source, a, min(a + _step(source), len(source.files))) as held:
            yield from (f[key] for _, f in held)


def joinable(source, key, arrow):
    """Whether column `key` of every file of `source` converts to Arrow (`arrow`) or pandas
    the same from the rows of all files joined as from each file's: not keys whose KeyValues
    differ between files (each file's names its own keys); for Arrow only Text and the columns
    _room decodes in place (the others are converted file by file, as each file's stream)."""
    with source.using(0) as first:
        col = first[key]
    item = T.item_type(col.type)
    if item is T.Text:
        return True
    if item is None or (arrow and _room(col) is None):
        return False
    return not isinstance(item, T.Key) or len(source.files) == 1 or same_key_values(source, key)


def check_memory(source, keys, parts, in_place=None, once=(), arrow=()):
    """MemoryLimitError when reading `parts` ([(file, its rows: None for all)]) of columns
    `keys` and joining them needs more than the source's limit: each file's share
    (decoded_bytes; of the columns `arrow`, in Arrow's form), twice over when there are
    several (read, then joined) but for the columns `once` (kept as each file's pieces), and
    the one array every file decodes into of each column of `in_place` (key -> (shape,
    dtype))."""
    in_place = in_place or {}
    twice = 2 if len(parts) > 1 else 1
    total = sum(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
                for shape, dtype in in_place.values())
    total += sum(source.decoded_bytes(i, k, local, k in arrow) * (1 if k in once else twice)
                 for i, local in parts for k in keys if k not in in_place)
    cols = set(keys) | set(in_place)
    source.need(total, lambda: f"{_named(source, parts, cols)}reading {len(cols)} "
                               f"column{'s' * (len(cols) != 1)} of {len(parts)} "
                               f"file{'s' * (len(parts) != 1)}")


def _named(source, parts, cols):
    """``column 'x': `` naming the one column of a read, for its memory limit's message."""
    if len(cols) != 1 or not parts:
        return ""
    with source.using(parts[0][0]) as f:
        return f"column {f[next(iter(cols))].name!r}: "


def check_rows(source, keys, rows=None):
    """check_memory of a read of rows `rows` (read_source.row_parts'; None: all) of
    columns `keys` (constant ones need nothing) of the files that hold some."""
    check_memory(source, read_source.split(source, keys)[0],
                 read_source.row_parts(source, rows)[0])


def check_table(source, keys):
    """check_memory of every row of columns `keys` (constant ones need nothing) in Arrow's
    form, kept as the batches that bring them (an engine's table: nothing joined)."""
    keys = read_source.split(source, keys)[0]
    check_memory(source, keys, [(i, None) for i in range(len(source.files))], once=keys,
                 arrow=keys)


def check_batch(source, keys, size, arrow):
    """MemoryLimitError, before a stream reads anything, when its batches of `size` rows
    (batch_size: a size asked for is given, not cut) of columns `keys` need more than the
    source's limit: a batch's rows at the columns' bytes a row in the first file that has rows
    (decoded_bytes; `arrow`: in Arrow's form; not a pass over every file of a dataset), twice
    over (the windows' pieces it is joined from, and the batch)."""
    keys = read_source.split(source, keys)[0]
    rows = min(int(size), source.num_rows)
    first = next((i for i, e in enumerate(source.files) if e.num_rows), None)
    if not rows or not keys or first is None:
        return
    total = sum(source.decoded_bytes(first, k, None, arrow) for k in keys)
    source.need(2 * total * rows // source.files[first].num_rows,
                lambda: f"a batch of batch_size={size} rows of {len(keys)} "
                        f"column{'s' * (len(keys) != 1)}")


def groups(source, keys, first_alone=False):
    """(first, stop) of each run of files an Arrow stream reads together (decoding at most
    GROUP_BYTES of columns `keys` in Arrow's form and FILES_AT_ONCE files), (i, None) for a
    file streamed by itself; `first_alone`: the first file a run of its own (a consumer that
    may stop after its first batch gets it without the others being read)."""
    i0, total = 0, 0
    for i, e in enumerate(source.files):
        size = sum(source.decoded_bytes(i, k, slice(0, e.num_rows), True) for k in keys)
        if i > i0 and (total + size > GROUP_BYTES or i - i0 == FILES_AT_ONCE or
                       (first_alone and i == 1)):
            yield i0, i
            i0, total = i, 0
        if size > GROUP_BYTES:
            yield i, None
            i0 = i + 1
            continue
        total += size
    if i0 < len(source.files):
        yield i0, len(source.files)
