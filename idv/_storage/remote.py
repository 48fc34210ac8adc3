"""Remote .idv files through fsspec: ``s3://``, ``gs://``, ``az://``, ``https://``,
``memory://`` URLs, or a path inside an fsspec filesystem object.

A remote file is read by byte range, never whole. Opening fetches the file's size, then the
header and the last 1/512 of the file (4 to 64 KiB, ``tail_guess``: the table of contents, and
usually the lookup and metadata tables before it) in one round; over HTTP the size comes with
them (idv._storage.remote_first). The tables that missed come in one more batch. After that
only the blocks a read asks for are fetched: ``read_ranges`` merges the ranges into few
requests (idv._storage.remote_requests) and sends them concurrently (at most ``CONCURRENCY`` at
a time per call); a scan sends each window's requests ahead of its decoding (``fetch_ahead``),
and the bytes fetched for a whole read or a window are held until they are decoded
(idv._storage.remote_held).

What was opened is what is read: every answer must carry the range asked (HTTP's
``Content-Range``) of the version opened (idv._storage.remote_version); an object replaced
between requests is a RemoteError "changed while reading", never bytes of two versions. A
server that ignores Range gets the file fetched whole, once (idv._storage.remote_whole). A
transient failure (HTTP 429, 500, 502, 503, 504, a dropped connection) is
retried ``RETRIES`` times with a growing pause (``BACKOFF`` seconds, doubled each time); no
single fetch asks for more than the file's memory limit (``memory_limit``, set by the reader).

fsspec (the ``remote`` extra) is imported only when a URL or a filesystem is given. Every
request of an asynchronous filesystem (HTTP, S3, GCS, Azure) has a deadline (``timeout``
seconds, default ``DEFAULT_TIMEOUT``); a failure is an error naming the URL: FileNotFoundError,
PermissionError, or idv.RemoteError (idv.RemoteTimeoutError for a timeout).
"""
from __future__ import annotations

import contextlib
import os
import threading

import numpy as np

from idv._storage import archive, remote_first, remote_process, remote_whole, source as local
from idv._resources import budget, work as _work
from idv._header import HEADER_SIZE
from idv.errors import MissingDependencyError, RangeNotSupportedError, RemoteError
from idv._storage.remote_answers import (check_length, no_size, ranged_body, remote_error,
                                         transient)
from idv._storage.remote_held import Ahead, Held
from idv._storage.remote_requests import coalesce
from idv._storage.remote_options import DEFAULT_TIMEOUT, deadline, refuse_storage_options
from idv._storage.remote_version import Version

TAIL_GUESS = (4 << 10, 64 << 10)   # bytes read from the end at open: 1/512 of the file, within
TAIL_FRACTION = 512                # these bounds (see tail_guess)
# requests in flight per read_ranges call (a column's read is a request per block): at 30 ms
# a request, 123 blocks took 380 ms at 16, 190 at 64 (docs/remote.md; aiohttp's pool: 100)
CONCURRENCY = 64
RETRIES = 3                 # transient failures retried per request ...
BACKOFF = 0.2               # ... after this many seconds, doubled each time
_INSTALL = "pip install 'idv[remote]'"


def is_remote(source, filesystem=None):
    """Whether `source` is read through fsspec: a filesystem is given, or it is a URL (a
    string with ``://`` or fsspec's ``::`` chaining that is not an existing local path, nor
    an entry of a local zip: ``model.zip:run::1.idv`` is one)."""
    if filesystem is not None:
        return True
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    return isinstance(source, str) and ("://" in source or "::" in source) \
        and not os.path.exists(source) and archive.split_zip(source) is None


def open_any(source, filesystem=None, storage_options=None, timeout=None, memory_limit=None):
    """The source of `source` (idv._storage.source's interface): a remote one for a URL or a path
    in `filesystem`, else idv._storage.source.open_source's (local paths keep their memory map);
    `memory_limit`, idv.open's, bounds a zip entry's inflating and a file fetched whole."""
    timeout = deadline(timeout)
    if not is_remote(source, filesystem):
        refuse_storage_options(source, storage_options)
        return local.open_source(source, memory_limit)
    if filesystem is not None and type(filesystem).__module__.startswith("pyarrow"):
        if storage_options:
            raise TypeError("give either filesystem= or storage_options=, not both")
        # pyarrow's own random-access file, read by seeks (fsspec's filesystems coalesce)
        src = local.FileSource(filesystem.open_input_file(os.fspath(source)))
        src.name = f"{filesystem.type_name}://{os.fspath(source).lstrip('/')}"
        return src
    fs, path, url = resolve(source, filesystem, storage_options)
    if _is_local(fs):      # file:// and fsspec's LocalFileSystem: the local memory map
        src = local.open_source(path, memory_limit)
        src.name = url
        return src
    try:
        return _ranged(fs, path, url, timeout, memory_limit=memory_limit)
    except (FileNotFoundError, PermissionError):
        zipped = _zip_entry(fs, path, timeout)     # https://host/model.zip:Entry/Schema.idv
        if zipped is None:
            raise
    z, entry, version = zipped
    src = local.open_source(archive.entry_in(z, entry, memory_limit))
    src.name = url
    src.identity = None if version is None else version + (entry,)     # the archive's
    return src


def _ranged(fs, path, url, timeout, idv=True, memory_limit=None):
    """RemoteSource(...) opened, or the file fetched whole for a server that ignores Range."""
    src = RemoteSource(fs, path, url, timeout, first=True)
    try:
        src.open_round(idv)
        return src
    except RangeNotSupportedError as e:
        refused = e
    return remote_whole.fetched(src, refused, memory_limit)


def read_file(fs, path, timeout=DEFAULT_TIMEOUT):
    """The bytes of the small file at `path` in `fs` (a directory's manifest), fetched as a
    remote .idv is: retried, checked, its failures idv's errors (FileNotFoundError only for a
    file that is not there); over HTTP by one request, whether the server honours Range."""
    src = RemoteSource(fs, path, fs.unstrip_protocol(path), timeout)
    if src.http_url is not None:
        return bytes(remote_whole.fetched(src).view(0, src.size_announced))
    src.open_round(idv=False)
    return bytes(src.view(0, src.size))


def _zip_entry(fs, path, timeout):
    """(the zip, the entry, the zip's identity: its version) that `path` names as
    ``ARCHIVE:ENTRY``, the zip read by ranges; None when no such archive is a zip."""
    for name, entry in archive.url_splits(path):
        try:
            src = _ranged(fs, name, fs.unstrip_protocol(name), timeout, idv=False)
        except (FileNotFoundError, PermissionError, IsADirectoryError):
            continue
        if archive.starts_as_zip(src.view(0, min(4, src.size))):
            return archive.open_ranged(src), entry, src.identity
        src.close()
    return None


def open_zip(fs, path, timeout=DEFAULT_TIMEOUT):
    """The zip archive at `path` in `fs`, read by ranges as a remote .idv is (each request
    with the deadline, retried, checked; its failures idv's errors)."""
    return archive.open_ranged(_ranged(fs, path, fs.unstrip_protocol(path), timeout,
                                       idv=False))


async def retrying(request):
    """await request(), again after a pause while it fails in a way that may pass."""
    import asyncio
    for attempt in range(RETRIES + 1):
        try:
            return await request()
        except Exception as exc:      # noqa: BLE001 - re-raised unless transient
            if attempt == RETRIES or not transient(exc):
                raise
        await asyncio.sleep(BACKOFF * 2 ** attempt)


def ask(fs, request, url, what, timeout=None, bounded=True, retry=True):
    """await request() on the asynchronous filesystem `fs` (made in this process: own) as
    every request is made: retried while it fails in a way that may pass (unless `retry` is
    False: it retries each of its requests itself), within `timeout` (None: DEFAULT_TIMEOUT)
    unless not `bounded`, its failure an error naming `url`."""
    import asyncio
    timeout = deadline(timeout)

    async def run():
        work = retrying(request) if retry else request()
        return await (asyncio.wait_for(work, timeout) if bounded else work)
    try:
        return remote_process.run(fs, run)
    except RemoteError:                # says what failed already
        raise
    except Exception as exc:           # noqa: BLE001 - translated, with its cause
        raise remote_error(exc, url, what, timeout) from exc


def _fsspec():
    try:
        import fsspec
    except ImportError:
        raise MissingDependencyError(f"reading URLs and fsspec filesystems needs fsspec: "
                                     f"{_INSTALL}") from None
    return fsspec


def resolve(source, filesystem=None, storage_options=None):
    """(filesystem, path within it, URL to name in errors) for a URL or a path in an fsspec
    filesystem."""
    fsspec = _fsspec()
    source = os.fspath(source)
    if filesystem is None:
        try:
            fs, path = fsspec.core.url_to_fs(source, **(storage_options or {}))
        except ImportError as e:       # the protocol's backend (aiohttp, s3fs, gcsfs...)
            raise MissingDependencyError(f"reading {source.split('://')[0]}:// URLs needs "
                                         f"fsspec's backend for them: {e} ({_INSTALL} installs "
                                         f"those of http, https and s3)") from None
        url = source
    elif storage_options:
        raise TypeError("give either filesystem= or storage_options= (the options of a "
                        "filesystem made from a URL), not both")
    elif not isinstance(filesystem, fsspec.AbstractFileSystem):
        raise TypeError(f"filesystem= takes an fsspec filesystem (or a pyarrow.fs.FileSystem), "
                        f"not {type(filesystem).__name__}")
    else:
        fs, path = filesystem, filesystem._strip_protocol(source)
        url = fs.unstrip_protocol(path)
    remote_process.track(fs)
    return fs, path, url


def _is_local(fs):
    from fsspec.implementations.local import LocalFileSystem
    return type(fs) is LocalFileSystem


def _is_http(fs):
    return "http" in _protocols(fs) and hasattr(fs, "set_session")


def _protocols(fs):
    p = fs.protocol
    return (p,) if isinstance(p, str) else tuple(p)


def tail_guess(size):
    """The bytes read from the end of a file of `size` bytes when it opens, with its header:
    ML.NET puts the table of contents last, the lookup tables and metadata tables before it.
    In ML.NET's files these take about 0.1% of the file (43 KB of the 43 MB 2M x 11 numeric
    file, 8192 rows per block); 1/512 of the file, at least 4 KiB and at most 64 KiB, usually
    holds them all, and what it misses takes one more round of requests. What it reads beyond
    them is the open's only waste: 64 KiB at most (over HTTP that, asked before the size)."""
    lo, hi = TAIL_GUESS
    return min(max(size // TAIL_FRACTION, lo), hi)


class RemoteSource:
    """A file read through fsspec by byte ranges (see the module's docstring): an .idv (other
    formats refused, a length prefix skipped), or with `idv` False any file (a zip).

    ``requests`` and ``bytes_fetched`` count what it asked for (package-internal: tests and
    benchmarks)."""

    buffer = None
    read_whole = 0

    def __init__(self, fs, path, url, timeout=DEFAULT_TIMEOUT, first=False):
        """The file's size and version, then open_round reads its header and tail; over HTTP
        with `first`, all three from one round of two GETs (idv._storage.remote_first)."""
        self._fs = fs
        self._path = path
        self.name = url
        self.timeout = timeout
        self.requests = 0
        self.bytes_fetched = 0
        self._count = threading.Lock()    # reads run in several threads at once
        self._async = bool(getattr(fs, "async_impl", False))
        self._held = Held()              # fetched at open (the tables), or ahead of reads
        self.memory_limit = None         # bytes one fetch may bring at most (None: no limit)
        self.http_url = fs.encode_url(path) if _is_http(fs) else None
        self.version = Version(url, {}, None, False, False)      # none pinned before an answer
        self.refused = None              # the error of a server that ignores Range
        info = first and self.http_url is not None and remote_first.info(
            self, HEADER_SIZE + 8, TAIL_GUESS[1]) or self.call(
            (lambda: self._fs._info(path)) if self._async else None, lambda: fs.info(path),
            "asking for the file's size")
        if info.get("type") == "directory":
            raise IsADirectoryError(f"{url} is a directory, not an .idv file")
        size = self.size_announced = None if info.get("size") is None else int(info["size"])
        self.version = Version(url, info, size, self.http_url is not None,
                               getattr(fs, "version_aware", False))
        self.identity = self.version.identity      # see idv._storage.source.MemorySource
        if size is None:
            raise RemoteError(f"{url}: {self._no_size()}; idv reads remote files by range",
                              url=url)

    def open_round(self, idv=True):
        """Fetch the header (and a possible length prefix) and the tail, in one round: an
        .idv (other formats refused), or with `idv` False any file (a zip)."""
        size = self.size_announced
        head_n = min(size, HEADER_SIZE + 8)
        if self.refused is not None:
            raise self.refused
        if not self._held:          # else the first round fetched them
            tail = max(head_n, size - tail_guess(size))
            runs = [(0, head_n)] + ([(tail, size)] if tail < size else [])
            self.hold(zip((s for s, _ in runs), self._fetch(runs)))
        if self.http_url is not None and self._held.last_start() > head_n:   # more to read
            self.version.warn_unpinned()
        head = bytes(self._held.first()[1][:12])
        self.base, self.size = local.prefixed_extent(head, size) if idv else (0, size)
        # a small file is whole in its first round: a dataset counts it by its bytes, as a
        # small local file read whole (idv._reader.dataset_files.whole_bytes), not as a handle
        self.read_whole = size if idv and self._held.find(0, size) is not None else 0
        if idv:      # else the bytes of another kind (a zip of .idv streams)
            local.refuse_other_formats(head[:8], self.name, lambda: archive.ranged_file(self))

    def hold(self, pieces):
        """Keep these (start, bytes) of the container, for the views of them."""
        self._held.replace(pieces)

    def _no_size(self):
        """Why the server gave no size (idv._storage.remote_answers.no_size)."""
        enc = None
        with contextlib.suppress(Exception):     # the size's error is the one to tell
            enc = self.http_url and self.call(self._encoding, None, "asking its encoding")
        return no_size(enc)

    async def _encoding(self):         # fsspec drops the size of an encoded answer
        session, url, kwargs = await self.request_args({})
        async with session.head(url, allow_redirects=True, **kwargs) as r:
            return r.headers.get("Content-Encoding")

    # ---- the source interface
    def view(self, offset: int, size: int):
        return self.read_ranges([offset], [size])[0]

    def read_ranges(self, offsets, sizes, keep=False):
        """The bytes of each range (offset, size): those held from memory, the others by
        coalesced, concurrent range requests. `keep`: hold what this call fetches for later
        views (True: the tables at open; a list: given them, until the caller drops them)."""
        out, todo, s, e = self._unheld(offsets, sizes)
        if len(todo):
            runs = self._runs(s, e)
            got = self._fetch(runs)
            if keep is not False:
                held = [(r0, data) for (r0, _), data in zip(runs, got)]
                if keep is not True:
                    keep += held
                self._held.add(held)
            run_starts = np.array([r[0] for r in runs], np.int64)
            which = np.searchsorted(run_starts, s, side="right") - 1
            for i, a, b, r in zip(todo.tolist(), s.tolist(), e.tolist(), which.tolist()):
                if r < 0 or b > runs[r][1]:     # a range split over two requests
                    out[i] = memoryview(b"".join(self._slices(runs, got, a, b)))
                else:
                    out[i] = memoryview(got[r])[a - runs[r][0]:b - runs[r][0]]
                if len(out[i]) != b - a:
                    raise RemoteError(f"{self.name}: bytes {a}-{b - 1} came back as "
                                      f"{len(out[i])} bytes", url=self.name)
        return out

    def _unheld(self, offsets, sizes):
        """(a view of each range held, else None; the indices of the others; their starts and
        ends in the container), the ranges checked against the file's size."""
        n = len(offsets)
        starts = np.fromiter((int(o) for o in offsets), np.int64, n)
        lengths = np.fromiter((int(s) for s in sizes), np.int64, n)
        for o, k in zip(starts.tolist(), lengths.tolist()):
            local.check_range(o, k, self.size)
        starts += self.base
        out = [self._held.find(s, k) for s, k in zip(starts.tolist(), lengths.tolist())]
        todo = np.array([i for i, v in enumerate(out) if v is None], np.int64)
        return out, todo, starts[todo], starts[todo] + lengths[todo]

    def _runs(self, starts, ends):
        """The requests (coalesce) for these ranges, within the memory limit."""
        runs = coalesce(starts, ends)
        if self.memory_limit is not None:
            budget.check(sum(b - a for a, b in runs), self.memory_limit,
                         lambda: f"{self.name}: fetching {len(runs)} range(s)")
        return runs

    def fetch_ahead(self, offsets, sizes, work, users):
        """An Ahead (idv._storage.remote_held) of the ranges (offset, size) not held already,
        their requests sent now as part of `work` (coalesced, as read_ranges sends them), for
        `users` pieces of a scan that read them; None where all are held, or where the
        filesystem is not asynchronous (its requests would be made here, now)."""
        if not self._async:
            return None
        _, todo, s, e = self._unheld(offsets, sizes)
        if not len(todo):
            return None
        runs = self._runs(s, e)
        done = self._begin(runs, work)
        return Ahead(self._held, lambda: zip((r0 for r0, _ in runs),
                                             self._checked(runs, remote_process.wait(done))),
                     done.cancel, users)

    def check_intact(self):
        """Nothing to check here: every answer is of the version opened (see
        idv._storage.remote_version)."""

    @contextlib.contextmanager
    def prefetch(self, offsets, sizes):
        """Fetch these ranges now, coalesced (a whole read's blocks: a few large requests
        instead of some per column), and serve reads from them until the with-block ends."""
        mine = []
        self.read_ranges(offsets, sizes, keep=mine)
        try:
            yield
        finally:        # these, not those of another prefetch begun since (another thread's)
            self._held.drop(mine)

    def close(self):
        self._held.replace(())

    # ---- fetching
    @staticmethod
    def _slices(runs, got, a, b):
        """The pieces of [a, b) in the requests, each byte once (requests may overlap)."""
        for (r0, r1), data in zip(runs, got):
            lo, hi = max(a, r0), min(b, r1)
            if lo < hi:
                yield memoryview(data)[lo - r0:hi - r0]
                a = hi

    def _fetch(self, runs):
        """The bytes of each (start, stop) of the container, all requested at once."""
        if not runs:
            return []
        if self._async:
            return self._checked(runs, remote_process.wait(
                self._begin(runs, _work.current())))
        with self._count:
            self.requests += len(runs)
        results = []
        for s, e in runs:
            try:
                results.append(self._fs.cat_file(self._path, start=s, end=e))
            except Exception as exc:   # noqa: BLE001 - translated, with its cause
                results.append(exc)
        return self._checked(runs, results)

    def _begin(self, runs, work):
        """A Future (idv._storage.remote_process.start) of the answers to the requests
        `runs` of an asynchronous filesystem, sent now as part of `work`."""
        with self._count:
            self.requests += len(runs)
        self._fs = remote_process.own(self._fs, self.name)
        return remote_process.start(self._fs, work, self._gather, runs)

    def _checked(self, runs, results):
        """`results`, the answers to the requests `runs`, checked: an error raised as idv's,
        a body of another length than asked refused."""
        for (s, e), data in zip(runs, results):
            what = f"reading bytes {s}-{e - 1}"
            if isinstance(data, RemoteError):
                raise data
            if isinstance(data, BaseException):
                raise remote_error(data, self.name, what, self.timeout) from data
            with self._count:
                self.bytes_fetched += len(data)
            check_length(data, e - s, self.name, what)
        return results

    async def _gather(self, runs):
        import asyncio          # here: only remote reads pay its import (and ssl's)
        sem = asyncio.Semaphore(CONCURRENCY)

        async def one(s, e):
            async with sem:
                try:
                    return await asyncio.wait_for(retrying(lambda: self._get(s, e)),
                                                  self.timeout)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:        # noqa: BLE001 - reported per range
                    return exc
        return await asyncio.gather(*(one(s, e) for s, e in runs))

    def _get(self, s, e):
        if self.http_url is not None:
            return self._http_get(s, e)
        if self.version.version_id is not None:
            return self._fs._cat_file(self._path, start=s, end=e,
                                      version_id=self.version.version_id)
        return self._fs._cat_file(self._path, start=s, end=e)

    async def request_args(self, headers):
        """(session, URL, keyword arguments) of an HTTP request for the version opened, with
        `headers`, the filesystem's own and no encoding (an encoded body's range is no file's)."""
        kwargs = dict(self._fs.kwargs)
        kwargs["headers"] = {**(kwargs.get("headers") or {}), **headers,
                             "Accept-Encoding": "identity", **self.version.headers}
        return await self._fs.set_session(), self.http_url, kwargs

    async def _http_get(self, s, e):
        """Bytes [s, e) by one GET, checked: the range asked, of the version opened."""
        session, url, kwargs = await self.request_args({"Range": f"bytes={s}-{e - 1}"})
        async with session.get(url, **kwargs) as r:
            self.version.check(r.status, r.headers)
            return await ranged_body(r, self.name, s, e, self.size_announced)

    @staticmethod
    def retried(request):
        """await request() as every request is: again while it fails in a way that may pass."""
        return retrying(request)

    def call(self, coro, fn, what, deadline=True, retry=True):
        """fn() (sync filesystems) or await coro() (async ones: as `ask` makes a request,
        within the timeout unless `deadline` is False); errors translated."""
        if coro is not None:
            self._fs = remote_process.own(self._fs, self.name)
            return ask(self._fs, coro, self.name, what, self.timeout, deadline, retry)
        try:
            return fn()
        except RemoteError:                # says what failed already
            raise
        except Exception as exc:           # noqa: BLE001 - translated, with its cause
            raise remote_error(exc, self.name, what, self.timeout) from exc
