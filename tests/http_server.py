"""A real HTTP server on 127.0.0.1 for remote reads: files from memory, Range requests
(single ranges, as fsspec sends them), and counters of the requests and body bytes it served.

    with RangeServer({"/a.idv": data}) as srv:
        idv.open(srv.url("/a.idv"))
        srv.bytes_served, srv.requests

Every answer carries the file's ETag (a CRC-32 of its bytes) and Last-Modified (given per
path in ``srv.modified``, else a fixed date), and a GET with ``If-Match`` or
``If-Unmodified-Since`` that the file no longer matches answers 412, as real servers do. A file
may be a ``Sparse`` one: a declared size of zeros with a few parts set (a file of 64 GiB that
takes no memory); bodies go out 1 MiB at a time. A path's Content-Type is sent where
``srv.content_types`` gives one (an HTML page of links: a directory to fsspec).

Misbehaviours, switched on per server (``srv.mode``): ``"no-range"`` (ignores Range and sends
the whole file, status 200), ``"truncate"`` (announces the range's length, sends half of it,
closes), ``"stall"`` (waits ``srv.stall_seconds`` before answering GETs), ``"shift"`` (answers
a range ``srv.shift`` bytes further on, with its true Content-Range), ``"no-conditions"``
(ignores If-Match and If-Unmodified-Since, still sends the new ETag), ``"redirect-loop"``
(every request redirects to itself), and per request only (see ``srv.statuses``):
``"redirect"`` (one redirect to the same file), ``"wrong-range"`` (the range asked, under a
Content-Range one byte further on), ``"etag"`` (another ETag, as if the file had changed),
``"long"`` (one byte more than the range asked, announced), ``"long-unannounced"`` (the
range's Content-Range, one byte more, no Content-Length), ``"no-range-cut"`` (ignores
Range, sends half the file without a Content-Length and closes), ``"no-range-long"`` (ignores
Range, sends the file and one byte more). ``srv.statuses`` is a list of what
the next requests answer with instead, one each: an HTTP status (``[503, 503]``: two transient
failures) or a misbehaviour's name (``["shift", 500]``), or None (a true answer);
``srv.failing`` the same per path (``{"/d/_idv_files.json": [503, 503]}``). Paths in
``srv.forbidden`` answer 403, unknown paths 404. ``srv.validators`` says which validators the
answers carry: ``"both"`` (the default: the ETag and Last-Modified), ``"weak"`` (a weak ETag,
``W/"..."``, alone), ``"modified"`` (the Last-Modified alone) or ``"none"``;
``srv.encodings`` gives a path's Content-Encoding (a file stored gzip-encoded). ``srv.delay``
delays every GET (to see requests overlap: ``srv.max_in_flight``); ``srv.on_request`` sees
each GET's headers.

Run as a script (``python tests/http_server.py [--delay SECONDS] FILE...``, each served as
``/NAME``, each GET answered after the delay), it serves
from its own process, prints its port, and answers ``/__stats__`` (the counters as JSON) and
``/__reset__`` (the same, then zeroes them): benchmarks/bench_remote.py uses it so that the
server does not share the reader's interpreter.
"""
from __future__ import annotations

import json
import re
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")
_DATE = "Wed, 21 Oct 2015 07:28:00 GMT"
_CHUNK = 1 << 20


class Sparse:
    """A file of `size` bytes, zeros except `parts` ({offset: bytes}); slices are bytes."""

    def __init__(self, size, parts):
        self.size, self.parts = size, dict(parts)

    def __len__(self):
        return self.size

    def __getitem__(self, key):
        start, stop, _ = key.indices(self.size)
        out = bytearray(max(0, stop - start))
        for off, data in self.parts.items():
            lo, hi = max(start, off), min(stop, off + len(data))
            if lo < hi:
                out[lo - start:hi - start] = data[lo - off:hi - off]
        return bytes(out)


def etag(data):
    """The ETag the server sends for `data`."""
    if isinstance(data, Sparse):
        return f'"sparse-{data.size}"'
    return f'"{zlib.crc32(data):08x}-{len(data)}"'


class _Quiet(ThreadingHTTPServer):
    """A client that goes away mid-answer (an error, a timeout) is not the server's error.
    Its listen backlog is a real server's (nginx: 511), not socketserver's 5: a read sends up
    to 64 requests at once, and connections beyond the backlog wait for TCP's retransmits
    (1 s, 3 s, ... up to the read's 60 s deadline)."""

    request_queue_size = 512

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class RangeServer:
    """Serves `files` ({path: bytes}) on 127.0.0.1 at a free port, in a daemon thread."""

    def __init__(self, files):
        self.files = dict(files)
        self.forbidden = set()
        self.mode = None
        self.shift = 1
        self.statuses = []         # statuses the next requests answer with, one each
        self.modified = {}         # path: Last-Modified
        self.content_types = {}    # path: Content-Type (else none is sent)
        self.encodings = {}        # path: Content-Encoding (else none is sent)
        self.failing = {}          # path: statuses its next requests answer with, one each
        self.validators = "both"   # or "weak" (a weak ETag alone) or "none"
        self.stall_seconds = 5.0
        self.delay = 0.0           # seconds each GET waits before answering
        self.on_request = None     # called with each request's headers (a dict)
        self.in_flight = 0         # GETs being answered now, and the most at once
        self.max_in_flight = 0
        self.requests = 0          # GET requests (HEAD ones are in self.heads)
        self.heads = 0
        self.bytes_served = 0      # body bytes sent by GETs
        self.ranges = []           # (start, stop) of each GET's body, in arrival order
        self._lock = threading.Lock()
        self._etags = {}           # path: (the bytes served, their ETag)
        self._stop = threading.Event()
        self._httpd = _Quiet(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        # a short poll: shutdown() waits for the loop to see it (0.5 s by default, every test)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,),
                                        daemon=True)

    def etag(self, path, data):
        """etag(data), found once for each bytes object a path serves (a CRC-32 of a large
        file at every request would cost the server milliseconds a request); other buffers,
        which may change in place, each time."""
        if type(data) is not bytes:
            return etag(data)
        with self._lock:
            kept = self._etags.get(path)
        if kept is None or kept[0] is not data:
            kept = (data, etag(data))
            with self._lock:
                self._etags[path] = kept
        return kept[1]

    @property
    def port(self):
        return self._httpd.server_address[1]

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def reset_counts(self):
        with self._lock:
            self.requests = self.heads = self.bytes_served = 0
            self.ranges = []

    def _count(self, head, start=0, stop=0):
        with self._lock:
            if head:
                self.heads += 1
            else:
                self.requests += 1
                self.bytes_served += stop - start
                self.ranges.append((start, stop))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler(server):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True     # headers and body are two writes: no 40 ms stalls

        def log_message(self, *args):     # quiet
            pass

        def _answer(self, head):
            if self.path in ("/__stats__", "/__reset__"):     # for a server in a child process
                if self.path == "/__reset__":
                    server.reset_counts()
                body = json.dumps({"requests": server.requests, "heads": server.heads,
                                   "bytes_served": server.bytes_served}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            path = self.path.split("?")[0]
            data = server.files.get(path)
            mode = server.mode
            with server._lock:
                status = server.statuses.pop(0) if server.statuses else None
                failing = server.failing.get(path)
                if status is None and failing:
                    status = failing.pop(0)
            if isinstance(status, str):
                mode = status
            elif status is not None:
                return self._empty(status, head)
            if mode == "redirect-loop" or (mode == "redirect" and path == self.path):
                server._count(head)
                self.send_response(302)
                self.send_header("Location", path if mode == "redirect-loop" else path + "?")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if path in server.forbidden:
                return self._empty(403, head)
            if data is None:
                return self._empty(404, head)
            tag, modified = server.etag(path, data), server.modified.get(path, _DATE)
            sent_tag = '"other"' if mode == "etag" else tag
            if head:
                server._count(True)
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Accept-Ranges", "bytes")
                self._version(sent_tag, modified)
                self.end_headers()
                return
            if mode != "no-conditions" and (
                    self.headers.get("If-Match", tag) not in (tag, None) or
                    self.headers.get("If-Unmodified-Since", modified) != modified):
                return self._empty(412, head)
            if mode == "stall":
                server._stop.wait(server.stall_seconds)
            start, stop, status = 0, len(data), 200
            m = _RANGE.match(self.headers.get("Range", ""))
            if m and not (mode or "").startswith("no-range"):
                a, b = m.groups()
                if a == "":              # a suffix: the last b bytes
                    start = max(0, len(data) - int(b))
                else:
                    start, stop = int(a), min(len(data), int(b) + 1 if b else len(data))
                if mode == "shift":
                    start, stop = start + server.shift, min(len(data), stop + server.shift)
                if start >= len(data):
                    return self._empty(416, head)
                status = 206
            told, told_stop = start + (mode == "wrong-range"), stop
            if mode in ("long", "long-unannounced"):
                stop = min(len(data), stop + 1)
                told_stop = told_stop if mode == "long-unannounced" else stop
            self.send_response(status)
            if mode == "no-range-long":
                data = bytes(data) + b"\0"
                stop = len(data)
            if mode not in ("no-range-cut", "long-unannounced"):
                self.send_header("Content-Length", str(stop - start))
            else:                   # the body ends where the connection does
                self.send_header("Connection", "close")
                self.close_connection = True
            if status == 206:
                self.send_header("Content-Range", f"bytes {told}-{told_stop - 1}/{len(data)}")
            self._version(sent_tag, modified)
            self.end_headers()
            if mode in ("truncate", "no-range-cut"):
                stop = start + (stop - start) // 2
                self.close_connection = True
            server._count(False, start, stop)   # before the client has it
            try:
                for a in range(start, stop, _CHUNK):
                    self.wfile.write(data[a:min(stop, a + _CHUNK)])
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _version(self, tag, modified):
            if tag is not None and server.validators not in ("none", "modified"):
                self.send_header("ETag", ("W/" if server.validators == "weak" else "") + tag)
            if server.validators in ("both", "modified"):
                self.send_header("Last-Modified", modified)
            path = self.path.split("?")[0]
            for header, values in (("Content-Type", server.content_types),
                                   ("Content-Encoding", server.encodings)):
                if path in values:
                    self.send_header(header, values[path])

        def _empty(self, status, head):
            server._count(head)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):  # noqa: N802 - http.server's naming
            if server.on_request is not None:
                server.on_request(dict(self.headers))
            with server._lock:
                server.in_flight += 1
                server.max_in_flight = max(server.max_in_flight, server.in_flight)
            try:
                if server.delay:
                    server._stop.wait(server.delay)
                self._answer(False)
            finally:
                with server._lock:
                    server.in_flight -= 1

        def do_HEAD(self):  # noqa: N802
            self._answer(True)

    return Handler



def main(args):
    files, delay = {}, 0.0
    if args[:1] == ["--delay"]:     # seconds each GET waits (object storage's latency)
        delay, args = float(args[1]), args[2:]
    for p in args:
        with open(p, "rb") as f:
            files["/" + p.replace("\\", "/").rsplit("/", 1)[-1]] = f.read()
    with RangeServer(files) as srv:
        srv.delay = delay
        print(srv.port, flush=True)
        sys.stdin.read()          # serve until stdin closes


if __name__ == "__main__":
    main(sys.argv[1:])
