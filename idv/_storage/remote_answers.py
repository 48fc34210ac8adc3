"""What a remote request's answer says, or its failure: the body read within what was asked,
the range a Content-Range names, the error that names the URL (FileNotFoundError,
PermissionError, idv.RemoteError and its kinds) for what fsspec or its backend raised, and
whether a failure may pass when the request is repeated (idv._storage.remote retries those).
"""
from __future__ import annotations

import sys

from idv.errors import RangeNotSupportedError, RemoteError, RemoteTimeoutError

TRANSIENT = frozenset((429, 500, 502, 503, 504))


async def read_at_most(stream, n):
    """The body of an answer, `n` bytes at most (a server may send more than it announced)."""
    parts = []
    while n > 0:
        chunk = await stream.read(n)
        if not chunk:
            break
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


async def ranged_body(r, url, s, e, total):
    """The body of answer `r` to a GET of bytes [s, e) of the file at `url` (`total` bytes),
    checked to be that range: its status 206, its Content-Range, its length."""
    r.raise_for_status()
    if r.status != 206:
        raise ValueError("the server does not support range requests")
    got = content_range(r.headers.get("Content-Range", ""))
    if got != (s, e, total):
        shown = "none" if got is None else f"bytes {got[0]}-{got[1] - 1}/{got[2]}"
        raise RemoteError(f"{url}: asked for bytes {s}-{e - 1} of {total}, the server "
                          f"answered with another range (Content-Range: {shown})", url=url)
    length = r.headers.get("Content-Length")
    if length is not None and int(length) > e - s:
        raise RemoteError(f"{url}: asked for {e - s} bytes, the server announces {length}",
                          url=url)
    return await read_at_most(r.content, e - s + 1)


def check_length(data, n, url, what):
    """`data`, the body of an answer to a range of `n` bytes, or RemoteError unless it holds
    exactly them (a server may close early, or send more than the range)."""
    if len(data) != n:
        raise RemoteError(f"{url}: {what}: the answer was truncated ({len(data)} of {n} bytes)"
                          if len(data) < n else f"{url}: {what}: the server sent {len(data)} "
                          f"bytes (it ignores Range requests?)", url=url)
    return data


def range_refused(url):
    """The error of a server that answers a range request with the whole file."""
    return RangeNotSupportedError(f"{url}: the server ignores HTTP Range requests (it sends "
                                  f"the whole file)", url)


def content_range(value):
    """(start, stop, total) of a Content-Range header 'bytes a-b/n' (None if not one)."""
    parts = value.replace("bytes", "", 1).strip().replace("/", "-").split("-")
    try:
        a, b, n = (int(x) for x in parts)
    except ValueError:
        return None
    return a, b + 1, n


def no_size(encoding):
    """Why a server gave no size for a file: the `encoding` (gzip...) it stores or sends the
    file with (fsspec then drops the size: it and the ranges are of the encoded bytes), else
    no Content-Length."""
    if not encoding or encoding == "identity":
        return "the server does not say the file's size (no Content-Length)"
    return (f"the server sends the file {encoding}-encoded (Content-Encoding: {encoding}), "
            f"so its size and byte ranges are those of the encoded bytes, not of the .idv; "
            f"store or serve it without Content-Encoding (idv compresses its blocks itself)")


def refused_option(exc):
    """The TypeError behind what fsspec raised (fsspec's HTTP filesystem says "not found" for
    every failure of its size request): an option of `storage_options` the filesystem or its
    session refused, to be told as such; else None."""
    return next((e for e in _chain(exc) if isinstance(e, TypeError)), None)


def remote_error(exc, url, what, timeout):
    """An exception naming `url` for what fsspec or its backend raised while `what` (a
    request of `timeout` seconds at most)."""
    refused = refused_option(exc)
    if refused is not None:
        return TypeError(f"{url}: {what}: the filesystem refused an option: {refused}")
    asyncio = sys.modules.get("asyncio")      # imported by whatever raised its timeout
    timeouts = (TimeoutError,) if asyncio is None else (asyncio.TimeoutError, TimeoutError)
    if isinstance(exc, timeouts) or type(exc).__name__ == "FSTimeoutError":
        return RemoteTimeoutError(f"{url}: no answer within {timeout:g} s while "
                                  f"{what} (idv.open(..., timeout=) sets the limit)", url)
    status = _status(exc)
    if status in (404, 410) or (status is None and isinstance(exc, FileNotFoundError)
                                and _connection_error(exc) is None):
        # as the OS says it of a local path: "[Errno 2] no such file (HTTP 404): 'URL'"
        return FileNotFoundError(2, "no such file" + (f" (HTTP {status})" if status else ""),
                                 url)
    if status in (401, 403) or isinstance(exc, PermissionError):
        return PermissionError(13, "access denied" + (f" (HTTP {status})" if status else ""),
                               url)
    if any(type(e).__name__ == "TooManyRedirects" for e in _chain(exc)):
        return RemoteError(f"{url}: {what} failed: the server redirects without end", url)
    cause = _connection_error(exc) or exc
    if "support range requests" in str(exc):
        return range_refused(url)
    if "payload" in type(cause).__name__.lower():
        return RemoteError(f"{url}: {what}: the answer was truncated ({cause})", url)
    if status and isinstance(cause, FileNotFoundError):   # fsspec's for any error answer
        import http
        phrase = http.HTTPStatus(status).phrase if status in iter(http.HTTPStatus) else ""
        return RemoteError(f"{url}: {what} failed: HTTP {status} {phrase}".rstrip(), url)
    detail = f"HTTP {status}: " if status else ""
    return RemoteError(f"{url}: {what} failed: {detail}{type(cause).__name__}: {cause}",
                       url)


def transient(exc):
    """Whether a failed request may succeed when repeated."""
    if isinstance(exc, RemoteError):
        return False
    if _status(exc) in TRANSIENT:
        return True
    names = {type(e).__name__ for e in _chain(exc)}
    return bool(names & {"ServerDisconnectedError", "ClientOSError",
                         "ClientPayloadError", "ConnectionResetError"})


def _chain(exc):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _status(exc):
    """The HTTP status of an error (aiohttp's ClientResponseError, botocore's ClientError)."""
    for e in _chain(exc):
        status = getattr(e, "status", None)
        if isinstance(status, int):
            return status
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            code = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if isinstance(code, int):
                return code
    return None


def _connection_error(exc):
    """The connection failure under `exc`, if that is what it is (fsspec's HTTP reports an
    unreachable server as FileNotFoundError)."""
    for e in _chain(exc):
        if e is not exc and isinstance(e, OSError) and not isinstance(e, FileNotFoundError):
            return e
        if "connect" in type(e).__name__.lower() or "payload" in type(e).__name__.lower():
            return e
    return None
