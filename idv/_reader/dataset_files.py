"""The files of a dataset: opening them as they are listed (remote ones a few at a time),
what each shows (its columns by name, rows, rows per block; whether they agree:
dataset_schema), whether a file reopened is still the one listed, and which stay open (OpenFiles).
"""
from __future__ import annotations

import collections
import contextlib
import errno
import functools
import itertools
import threading
import weakref
from typing import NamedTuple

from idv import types as T
from idv._resources import threads as _threads, work as _work
from idv._resources.budget import MemoryLimitError
from idv._store.block_runs import decoded_size
from idv.errors import IdvFormatError
from idv._storage.source import identity_of
from idv._reader.reader import IdvFile, open as idv_open
from idv._values.metadata import usable_key_values

# remote files opened at once while a dataset lists them: an open waits on its first round (two
# requests). At 30 ms a request, 64 small files opened in 90 ms at 64, 120 at 32, 300 at 8; more
# gains nothing (128 requests already fill aiohttp's pool of 100 connections) and holds a thread
# and an open's bytes (its 64 KiB tail) per file opened ahead
OPEN_AHEAD = 64
# a file of at most this many columns keeps what reading each column allocates when the
# dataset closes it (Dataset.decoded_bytes); a wider one is reopened to check a read
REMEMBERED_COLUMNS = 256
# what opening the files read (IdvFile.layout) kept, once the dataset closes them, for their
# reopening, at most (layout_bytes each); a reopening then costs a third of an opening, and
# files beyond it are read and checked again when reopened
LAYOUT_BYTES = 64 << 20

def layout_bytes(num_columns):
    """About the memory that a file's layout holds (measured: 5 KiB for 4 columns, 11 KiB
    for 11, 130 KiB for 256)."""
    return 2048 + 768 * num_columns


class DatasetFile:
    """One file of a Dataset: its ``path`` (a local path, or the path inside the dataset's
    fsspec filesystem), ``num_rows``, ``start`` / ``stop``: its rows' numbers in the
    dataset, and ``constants``: its hive partition keys' values ({} unpartitioned)."""

    __slots__ = ("path", "num_rows", "start", "rows_per_block", "identity", "decoded",
                 "layout", "constants")

    def __init__(self, path, num_rows, start, rows_per_block, identity=None):
        self.path = path
        self.identity = identity               # IdvFile.identity when it was listed
        self.num_rows = num_rows
        self.start = start
        self.rows_per_block = rows_per_block   # name -> rows per block, of the dataset's columns
        # name -> what reading all of the column allocates (Column.decoded_bytes: into numpy,
        # into Arrow), kept when the dataset closes the file, so that checking a read of it
        # needs no reopening
        self.decoded = None
        self.layout = None      # IdvFile.layout, kept when the dataset closes the file
        self.constants = {}

    def closing(self, f, names, layouts):
        """Keep what file `f` (this one, about to be closed) tells of columns `names`: what
        reading each allocates (told by its layout: no Column is built), and its layout while
        `layouts` (a Budget) has room. Package-internal: the dataset calls it."""
        if self.decoded is None:
            self.decoded = decoded(f.layout, names)
        if self.layout is None and layouts.take(layout_bytes(len(f.layout.described))):
            self.layout = f.layout

    @property
    def stop(self):
        """The number, in the dataset, of the row after this file's last."""
        return self.start + self.num_rows

    def __repr__(self):
        return f"DatasetFile({self.path!r}, {self.num_rows} rows, rows {self.start}-{self.stop})"


class Budget:
    """Bytes to spend, taken until none are left; threads may share it."""

    def __init__(self, size):
        self.left = size
        self._lock = threading.Lock()

    def take(self, size):
        """Whether `size` more bytes fit (they are taken) or not (nothing is)."""
        with self._lock:
            if size > self.left:
                return False
            self.left -= size
            return True


def opened(paths, filesystem, open_kwargs):
    """(path, its IdvFile or the IdvFormatError / OSError of opening it), in order: remote
    files OPEN_AHEAD at a time in threads (an open waits on round trips), local ones in turn
    (an open is CPU work under the GIL). Closing it closes the files opened ahead. No file
    descriptor left (EMFILE) is the process's trouble, not a bad file's: raised."""
    def one(path):
        try:
            return idv_open(path, filesystem=filesystem, **open_kwargs)
        except (IdvFormatError, OSError) as e:
            if getattr(e, "errno", None) == errno.EMFILE:
                raise
            return e
    if filesystem is None:
        yield from ((path, one(path)) for path in paths)
        return
    work = _work.Work(_work.current())
    submit = functools.partial(work.submit, _threads.pool("open", OPEN_AHEAD), one)
    ahead = collections.deque((path, submit(path)) for path in paths[:OPEN_AHEAD])
    rest = iter(paths[OPEN_AHEAD:])
    try:
        while ahead:
            path, opening = ahead.popleft()
            for following in itertools.islice(rest, 1):
                ahead.append((following, submit(following)))
            yield path, opening.result()
    finally:
        if ahead:
            work.end()          # the opens running end their requests at once
        for _, opening in ahead:
            if not opening.cancelled() and opening.exception() is None \
                    and isinstance(opening.result(), IdvFile):
                opening.result().close()
        work.release()


def decoded(layout, names):
    """{name: what reading all of column `name` allocates (Column.decoded_bytes: into numpy,
    into Arrow)} of a file
    the dataset closes (`layout`: what opening it read), or None when wide."""
    if len(names) > REMEMBERED_COLUMNS:
        return None
    out = {}
    for n in names:
        e, codec, _ = layout.described[layout.shown[n]]
        try:
            raw, rows = layout.tables.raw_total(e.index), layout.header.row_count
        except IdvFormatError:   # a damaged lookup table: the reads of the column reopen the
            continue             # file, and its Column says where (not a read of another file)
        out[n] = (decoded_size(codec, raw, rows), decoded_size(codec, raw, rows, arrow=True))
    return out


def _shown(layout):
    """(TocEntry, codec or None, why it cannot be read or None) of the columns a file shows by
    name (the last of each), of `layout`: what opening it read (idv._reader.opening.Opened)."""
    described = layout.described
    return [described[i] for i in sorted(layout.shown.values())]


def visible(layout):
    """[(name, type, or why it cannot be read as text)] of the columns a file shows by name
    (the last of each), of `layout`: what opening it read (IdvFile.layout). A column is
    unreadable as Column.readable says: an unknown codec or compression."""
    return [(e.name, codec.type if dead is None else f"<unreadable: {dead}>")
            for e, codec, dead in _shown(layout)]


def hiding(path, layout):
    """`path` where its file (`layout`: what opening it read) has hidden columns (a name given
    to several), else None."""
    return path if len(layout.shown) < len(layout.described) else None


def rows_per_block(layout):
    """{name: rows per block} of the columns a file shows by name, as visible."""
    return {e.name: e.rows_per_block for e, _, _ in _shown(layout)}


class Labelled(NamedTuple):
    """A key column's type as readers take it: `type`, and `labels`, the item type of the
    KeyValues that label its keys (usable_key_values: a dictionary of them in Arrow, a
    Categorical in pandas), None without usable ones (none, repeated...: raw numbers). Files
    whose key columns differ in it would give the dataset's column two forms."""
    type: object
    labels: object

    def __str__(self):
        if self.labels is None:
            return f"{self.type} without usable KeyValues (raw keys)"
        return f"{self.type} labelled by {self.labels} KeyValues"


def key_forms(f, cols):
    """{name: stored form of its KeyValues (Column.annotation_form; None without)} of file
    `f`'s key columns (those of `cols`, its visible columns, whose items are keys)."""
    return {n: f[n].annotation_form("KeyValues") for n, t in cols
            if isinstance(T.item_type(t), T.Key)}


def key_labels(col):
    """The item type of the KeyValues that label key column `col`'s keys (Labelled), None
    without usable ones; None too when they cannot be decoded (unusable: the file's own
    reads say why)."""
    try:
        kv = usable_key_values(T.item_type(col.type), col)
    except (IdvFormatError, MemoryLimitError):
        return None
    return None if kv is None else T.item_type(col.metadata_types["KeyValues"])


def other_labels(f, cols, first_forms):
    """{name: key_labels} of file `f`'s key columns whose KeyValues are stored otherwise
    than in the first file (`first_forms`: its key_forms): only those may label otherwise."""
    mine = key_forms(f, cols)
    return {n: key_labels(f[n]) for n, form in mine.items()
            if n in first_forms and form != first_forms[n]}


class KeyLabels:
    """What the key columns' KeyValues make of their keys in each file a dataset lists (add
    each, in order, while open): the first file's stored forms, and per file, other_labels
    (the first file's {}); its first file stays open until agree has checked them."""

    def __init__(self):
        self.first = self.first_forms = None
        self.others = []

    def add(self, f, cols):
        """File `f` (its visible columns `cols`), listed next."""
        if self.first is None:
            self.first, self.first_forms = f, key_forms(f, cols)
            self.others.append({})
        else:
            self.others.append(other_labels(f, cols, self.first_forms))

    def as_read(self, listed):
        """`listed` (per file added, (path, its visible columns, ...)) with each key column
        whose KeyValues some file stores otherwise as Labelled, for agree: files whose keys
        are labels in one and raw numbers (or labels of another item type) in the other
        differ in that column."""
        differ = {n for o in self.others for n in o}
        if not differ:
            return listed
        ref = {n: key_labels(self.first[n]) for n in differ}
        return [(path, [(n, Labelled(t, o.get(n, ref[n]))
                         if n in differ and isinstance(T.item_type(t), T.Key) else t)
                        for n, t in cols])
                for (path, cols, *_), o in zip(listed, self.others)]


# why a file reopened is not the one listed, its rows and types alike: its identity differs
REPLACED = ("another file is in its place (a local file's size, inode or modification time, a "
            "URL's ETag, VersionId or Last-Modified differ)")


@contextlib.contextmanager
def reopening(entry):
    """Around the open of file `entry` (a DatasetFile, or a Listed) again by its path: an
    IdvFormatError from a local file that is no longer the one listed (truncated since, say)
    is raised as the file having changed since the dataset listed it, as changed() says of a
    file that opens."""
    try:
        yield
    except IdvFormatError as e:
        if entry.identity is None or isinstance(entry.identity[0], str):
            raise
        try:
            now = identity_of(entry.path)
        except OSError:
            raise e from None
        if now == tuple(entry.identity):
            raise
        raise IdvFormatError(f"the file changed since the dataset listed it: {REPLACED} (it "
                             f"no longer opens: {e}); open the dataset again",
                             path=entry.path) from e


def changed(entry, f, columns, names):
    """IdvFormatError when file `f`, reopened, is not the one listed as `entry` (a
    DatasetFile): another file in its place, other rows, other types of the columns `names`
    than `columns` (name -> type when listed); a dataset reads the files as they were."""
    cols = dict(visible(f.layout))
    why = None
    if f.num_rows != entry.num_rows:
        why = f"it has {f.num_rows} rows, {entry.num_rows} when listed"
    elif any(cols.get(n) != columns[n] for n in names):
        n = next(n for n in names if cols.get(n) != columns[n])
        why = f"column {n!r} is {cols.get(n)}, {columns[n]} when listed"
    elif entry.identity is not None and f.identity != entry.identity:
        why = REPLACED
    if why is not None:
        raise IdvFormatError(f"the file changed since the dataset listed it: {why}; open "
                             f"the dataset again", path=entry.path)


def check_relisted(listed, files):
    """IdvFormatError when the files of a dataset listed again (`files`, DatasetFiles) are
    not those listed first (`listed`: (path, rows, identity) each): a plan made from the
    first listing (a training loader's partitions and length) would read other rows."""
    now = [(f.path, f.num_rows, f.identity) for f in files]
    if now == listed:
        return
    for (path, rows, ident), (p2, r2, i2) in zip(listed, now):
        if (path, rows) != (p2, r2) or (ident is not None and ident != i2):
            why = f"it has {r2} rows, {rows} when listed" if rows != r2 else REPLACED
            raise IdvFormatError(f"the file changed since the dataset was made: {why}; make "
                                 f"the dataset again", path=path)
    raise IdvFormatError(f"the dataset's files changed since it was made: {len(listed)} "
                         f"listed then, {len(now)} now; make the dataset again",
                         path=listed[0][0] if listed else None)


# what an open file's objects hold beyond its layout (its IdvFile, block store and cache)
OPEN_FILE_BYTES = 2560


def whole_bytes(f):
    """What open file `f` holds when it was read whole (a small local file, or a small remote
    one that the requests opening it brought whole): its bytes, its layout and its objects
    (measured: 12.4 KiB for a 4.8 KiB file of 4 columns); 0 for a mapped or ranged file."""
    return f.read_whole and \
        f.read_whole + layout_bytes(len(f.layout.described)) + OPEN_FILE_BYTES


class OpenFiles:
    """The files of a dataset open at once: at most `limit`, the least recently used closed
    first, but never one in use (hold and release, or using): a stream still reading it,
    another thread's read, which may keep more than `limit` open for a while. With
    `whole_limit`, files read whole (small local ones: no descriptor, no map) are counted
    apart, by what they hold (whole_bytes()), up to that many bytes in all. `reopen(i)`
    opens file i again; `closing(i, f)` is told of each file closed for room: methods of the
    dataset, held weakly (no reference cycle: a dataset let go is freed at once, with all it
    keeps of its files). One lock guards them: threads may share a dataset."""

    def __init__(self, limit, reopen, closing, whole_limit=0):
        self.limit = limit
        self.whole_limit = whole_limit
        self._owner_reopen = weakref.WeakMethod(reopen)
        self._owner_closing = weakref.WeakMethod(closing)
        self._handles = collections.OrderedDict()      # file index -> open IdvFile (LRU)
        self._whole = {}            # file index -> whole_bytes, of the files counted apart
        self._whole_held = 0
        self._in_use = collections.Counter()           # file index -> holds not released
        self._lock = threading.RLock()

    def _weight(self, f):
        """What file `f` counts against whole_limit; 0: it counts against `limit`."""
        return whole_bytes(f) if self.whole_limit else 0

    def _put(self, i, f):
        self._handles[i] = f
        w = self._weight(f)
        if w:
            self._whole[i] = w
            self._whole_held += w

    def _over(self):
        """(files beyond `limit`, bytes beyond whole_limit)."""
        return (len(self._handles) - len(self._whole) - self.limit,
                self._whole_held - self.whole_limit if self._whole else 0)

    def admit(self, i, f):
        """File i, opened when listed, kept open if it fits (the first ones listed are
        kept); False: it does not, and stays the caller's to close."""
        self._put(i, f)
        if max(self._over()) <= 0:
            return True
        self._drop(i)
        return False

    def is_open(self, i):
        f = self._handles.get(i)
        return f is not None and not f.closed

    @property
    def count(self):
        """How many are open."""
        return sum(1 for f in list(self._handles.values()) if not f.closed)

    def get(self, i):
        """File i, open (reopened when it was closed)."""
        with self._lock:
            f = self._handles.get(i)
            if f is not None and not f.closed:
                self._handles.move_to_end(i)
                return f
            f = self._owner_reopen()(i)
            self._put(i, f)
            self._close_beyond(keep=i)
            return f

    def hold(self, i):
        """get(i), in use until release."""
        with self._lock:
            f = self.get(i)
            self._in_use[i] += 1
            return f

    def release(self, held):
        """The files `held` (indices, each once per hold) no longer in use; those beyond the
        limit closed."""
        with self._lock:
            for i in held:
                self._in_use[i] -= 1
                if not self._in_use[i]:
                    del self._in_use[i]
            self._close_beyond()

    def using(self, i):
        """File i, held for the block (a plain context manager: a read of many files enters
        one a file)."""
        return _Using(self, i)

    def _drop(self, j):
        """File j no longer held open here (its IdvFile returned, not closed)."""
        self._whole_held -= self._whole.pop(j, 0)
        return self._handles.pop(j)

    def _close_beyond(self, keep=None):
        """Close the least recently used files beyond the limits, but those in use and file
        `keep` (just opened)."""
        files, nbytes = self._over()
        if files <= 0 and nbytes <= 0:
            return
        idle = []       # the first ones beyond, in LRU order (a scan of all is quadratic)
        for j in self._handles:
            if j == keep or j in self._in_use:
                continue
            w = self._whole.get(j)
            if w is None and files > 0:
                idle.append(j)
                files -= 1
            elif w is not None and nbytes > 0:
                idle.append(j)
                nbytes -= w
            if files <= 0 and nbytes <= 0:
                break
        for j in idle:
            old = self._drop(j)
            self._owner_closing()(j, old)
            old.close()

    def close(self):
        """Close every file."""
        with self._lock:
            while self._handles:
                _, f = self._handles.popitem()
                f.close()
            self._whole.clear()
            self._whole_held = 0


class _Using:
    """OpenFiles.using(i): file i held from __enter__ to __exit__."""

    __slots__ = ("files", "i")

    def __init__(self, files, i):
        self.files, self.i = files, i

    def __enter__(self):
        return self.files.hold(self.i)

    def __exit__(self, *exc):
        self.files.release([self.i])
