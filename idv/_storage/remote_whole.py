"""A remote file fetched whole, once, from a server that ignores Range requests (Python's own
http.server, many simple ones): by one GET of the version opened, retried as every request
of idv._storage.remote is, into memory within the memory limit, else into a temporary file
that is mapped (and removed at once: the map keeps it). Either way the body must be the size
the server announced: one cut short or longer is an idv.RemoteError, never a file read as
corrupt.
"""
from __future__ import annotations

import io
import mmap
import tempfile

from idv._resources import budget
from idv._storage import source as local
from idv.errors import RemoteError, warn

CHUNK = 8 << 20         # bytes read from the answer at a time


def fetched(src, refused=None, memory_limit=None):
    """The file of RemoteSource `src` (opened over HTTP: its size and version known) fetched
    whole, as a MemorySource with `src`'s identity (a dataset counts it by its bytes, as a
    file read whole), in memory within `memory_limit` (idv.open's; None: the limit in force),
    else spilled; with an IdvWarning saying why where `refused`
    (the RangeNotSupportedError its server caused) is given."""
    size = src.size_announced
    if refused is not None:
        if src.http_url is None:
            raise refused
        warn(f"{refused}; the whole file ({size:,} bytes) is fetched once instead of "
             f"the ranges a read needs")
    what = "fetching the whole file"
    if size <= budget.limit_for(size, memory_limit):
        sink = io.BytesIO()
        src.call(lambda: _download(src, sink, size), None, what, deadline=False)
        out = local.MemorySource(sink.getvalue(), name=src.name, identity=src.identity)
    else:
        with tempfile.TemporaryFile(prefix="idv-") as spill:
            src.call(lambda: _download(src, spill, size), None, what, deadline=False)
            spill.flush()
            mm = mmap.mmap(spill.fileno(), 0, access=mmap.ACCESS_READ)
        out = local.MemorySource(mm, owner=mm, name=src.name, shareable=True,
                                 identity=src.identity)
    return out


async def _download(src, sink, size):
    """The body of one GET of the whole file into `sink` (emptied first: a retry starts
    again), checked to be `size` bytes of the version `src` opened."""
    import asyncio
    sink.seek(0)
    sink.truncate()
    session, url, kwargs = await src.request_args({})
    got = 0
    # the whole body takes what it takes, but each wait for its next bytes (the answer's
    # headers first) is bounded by the source's timeout, as a request is
    r = await asyncio.wait_for(session.get(url, **kwargs), src.timeout)
    async with r:
        src.version.check(r.status, r.headers)
        r.raise_for_status()
        while got <= size:
            chunk = await asyncio.wait_for(r.content.read(min(CHUNK, size + 1 - got)),
                                           src.timeout)
            if not chunk:
                break
            sink.write(chunk)
            got += len(chunk)
    if got != size:
        raise RemoteError(f"{src.name}: fetching the whole file: "
                          + (f"{got} bytes of {size}: the answer was truncated" if got < size
                             else f"the server sent more than the {size} bytes it announced"),
                          url=src.name)
