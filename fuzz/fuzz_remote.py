#!/usr/bin/env python3
"""Differential fuzzing of remote reads: the same bytes read locally and over HTTP from a
Range server on 127.0.0.1 that lies (atheris, libFuzzer's engine).

An input is a script and a file: its first byte says how many of the server's next answers
misbehave (0 to 5), the next bytes which misbehaviour each one is (LIES: a range shifted or
truncated, a wrong Content-Range, another ETag as if the file had changed, a body longer than
announced, a redirect, the whole file for a range, HTTP 416/429/500/502/503), and the rest is
the file. The file is opened and every column read both ways; the remote read must give the
local read's values or fail with an idv error (``idv.IdvFormatError``,
``idv.MemoryLimitError``, ``idv.RemoteError``), never other values nor another exception.
The server runs in this process (tests/http_server.py), retries do not pause
(``idv._storage.remote.BACKOFF = 0``), and the address space is limited as in fuzz_read.py.

    python fuzz/fuzz_remote.py --seeds CORPUS_DIR
    python fuzz/fuzz_remote.py CORPUS_DIR -runs=1000000 -rss_limit_mb=3072 -timeout=30
    python fuzz/fuzz_remote.py --replay CORPUS_DIR_OR_FILE...
"""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

import harness

sys.path.append(str(harness.REPO / "tests"))       # the Range server the tests use
from http_server import RangeServer  # noqa: E402

LIES = (None, "shift", "truncate", "wrong-range", "etag", "long", "redirect", "no-range",
        416, 429, 500, 502, 503)
MAX_LIES = 5
TIMEOUT = 10.0                  # seconds per request: a hang is a finding, not a wait

_server = None
_names = itertools.count()


def server() -> RangeServer:
    """The one Range server of this process, started at the first input."""
    global _server
    if _server is None:
        _server = RangeServer({}).__enter__()
    return _server


def split(data: bytes):
    """(the misbehaviours of the next answers, the file) of an input."""
    n = data[0] % (MAX_LIES + 1) if data else 0
    return [LIES[b % len(LIES)] for b in data[1:1 + n]], data[1 + n:]


def exercise(data: bytes) -> None:
    """Read `data`'s file locally, then through the lying server; compare."""
    import idv
    import idv._storage.remote

    idv._storage.remote.BACKOFF = 0.0
    lies, body = split(data)
    local_errors, errors = harness.file_errors(), harness.remote_errors()
    with harness.quiet():
        try:
            with idv.open(body) as f:
                local = harness.read_all(f, local_errors)
        except local_errors:
            local = None
        srv = server()
        path = f"/{next(_names)}.idv"
        srv.files[path] = body
        srv.statuses[:] = lies            # None: this answer is true
        try:
            with idv.open(srv.url(path), timeout=TIMEOUT) as f:
                got = harness.read_all(f, errors)
        except errors:
            return
        finally:
            del srv.files[path]
            srv.statuses.clear()
    assert local is not None, "the remote file opened, the same bytes in memory did not"
    harness.check_same(local, got, f"served with {lies}")


def write_seeds(folder: Path) -> int:
    """fuzz_read's seed files, each served truthfully and with one misbehaviour at the first
    GET (the first answer is the HEAD asking for the size)."""
    from fuzz_read import seed_files

    seeds = {}
    for name, data in seed_files().items():
        for i, lie in enumerate(LIES):
            if i == 0 or len(data) < 5000:       # the larger ones only truthfully
                seeds[f"{lie}-{name}"] = (bytes([2, 0, i]) if i else b"\0") + data
    return harness.write_files(folder, seeds)


if __name__ == "__main__":
    harness.main(sys.argv, exercise, write_seeds)
