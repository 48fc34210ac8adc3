"""Hostile files: crafted to crash the reader or to make it spend memory and time out of all
proportion to their size (issue 9, items 1-4). Each is refused with ``idv.IdvFormatError``
naming the place, in a child process with a memory limit (RLIMIT_AS), a 1 MiB stack and a
wall-clock limit, both through the API and through ``python -m idv verify``.

* codec parameters nested without end (``Key2<Key2<...>>``, ``VBuffer<VBuffer<...>>``): the
  recursion used to overflow the C stack, and every level copied the rest of the parameters
  (quadratic memory);
* vector dimensions whose product overflows ML.NET's int32 size;
* parts of the file shared by several columns, lookup tables or metadata kinds, so that limits
  meant for one part add up: ML.NET never writes two parts into the same bytes, and the reader
  refuses such a file at open (idv.layout).

Every file is built here, from idv's own packing helpers; no binary is committed.
"""
from __future__ import annotations

import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

import idv
from idv import _header, _lookup, _toc
from idv._cursor import encode_leb128, encode_string

REPO = Path(__file__).resolve().parent.parent

# ============================================================================ child processes
# A reusable runner: open and read a file in a fresh interpreter under resource limits, and
# report what was raised. (Candidate for tests/conftest.py.)

MEMORY_LIMIT = 1 << 30          # RLIMIT_AS of the child: 1 GiB of address space
STACK_LIMIT = 1 << 20           # the stack the work runs on: 1 MiB
TIME_LIMIT = 60                 # seconds before the child is killed
WORK_SECONDS = 5                # what a refusal may take inside the child

_CHILD = r"""
import json, resource, sys, threading, time, warnings
path, memory, stack = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
import idv

result = {}
kept = []      # values stay alive, as in a user's f.read()

def work():
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with idv.open(path) as f:
                str(f.schema)
                for c in f.columns:
                    kept.append(c.metadata)
                    if c.readable:
                        kept.append(c.read())
        result["outcome"] = "ok"
    except BaseException as e:
        result["outcome"] = type(e).__name__
        result["message"] = str(e)[:4000]
    result["seconds"] = time.perf_counter() - t0

threading.stack_size(stack)      # the worker and every thread it starts
t = threading.Thread(target=work)
t.start()
t.join()
result["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(result), flush=True)
"""


def _child_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONIOENCODING"] = "utf-8"
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"          # BLAS thread pools reserve address space we want to measure
    env.pop("PYTHONWARNINGS", None)
    return env


def _died(returncode):
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exit code {returncode}"


def read_limited(path, *, memory=MEMORY_LIMIT, stack=STACK_LIMIT, timeout=TIME_LIMIT) -> dict:
    """Open `path` and read everything (schema, metadata, every column) in a child process
    whose address space is limited to `memory`, on a thread with a `stack`-byte stack. Returns
    {"outcome": exception name or "ok", "message", "seconds", "peak_rss"}; a crash or a
    timeout fails the test."""
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(memory), str(stack)],
                           capture_output=True, text=True, env=_child_env(), timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no answer in {timeout} s")
    assert r.returncode == 0, f"child {_died(r.returncode)}:\n{r.stderr[-3000:]}"
    return json.loads(r.stdout.splitlines()[-1])


def verify_limited(path, *, memory=MEMORY_LIMIT, stack=STACK_LIMIT, timeout=TIME_LIMIT):
    """``python -m idv verify PATH`` with the same limits (the stack one on the main thread);
    returns (returncode, stdout, stderr)."""
    import resource

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_STACK, (stack, stack))
    try:
        r = subprocess.run([sys.executable, "-m", "idv", "verify", str(path)],
                           capture_output=True, text=True, env=_child_env(), cwd=REPO,
                           timeout=timeout, preexec_fn=limits)
    except subprocess.TimeoutExpired:
        pytest.fail(f"idv verify: no answer in {timeout} s")
    return r.returncode, r.stdout, r.stderr


def assert_refused(data, tmp_path, pattern, **limits) -> dict:
    """The file is refused with IdvFormatError matching `pattern`, quickly and within limits."""
    path = tmp_path / "hostile.idv"
    path.write_bytes(data)
    got = read_limited(path, **limits)
    assert got["outcome"] == "IdvFormatError", got
    assert re.search(pattern, got["message"]), (pattern, got["message"])
    assert got["seconds"] < WORK_SECONDS, got
    return got


# ============================================================================ building files

VERSION = _header.WRITER_VERSION


class Builder:
    """An .idv assembled part by part with idv's packing helpers. Offsets are chosen by the
    caller, so parts may share bytes, as no honest writer would do."""

    def __init__(self, rows):
        self.rows = rows
        self.body = bytearray(_header.HEADER_SIZE)
        self.entries = []

    def put(self, data) -> int:
        """Append bytes; returns their offset."""
        at = len(self.body)
        self.body += data
        return at

    def lookup(self, blocks) -> int:
        """A lookup table of (offset, disk, raw) triples; returns its offset."""
        o, d, r = (np.array(x, np.int64) for x in zip(*blocks))
        return self.put(_lookup.pack_lookup(o, d, r))

    def metadata(self, entries) -> int:
        """A metadata TOC of (kind, codec, params, offset, size) tuples, uncompressed."""
        return self.put(_toc.pack_metadata_toc(
            [_toc.MetadataEntry(k, c, p, 0, o, s) for k, c, p, o, s in entries]))

    def column(self, name, codec, params=b"", *, lookup=0, metadata=0, compression=0,
               rows_per_block=None):
        rpb = rows_per_block or max(self.rows, 1)
        self.entries.append(_toc.TocEntry(len(self.entries), name, codec, params, compression,
                                          rpb, lookup, metadata))

    def finish(self) -> bytes:
        toc = len(self.body)
        for e in self.entries:
            self.body += e.pack()
        tail = len(self.body)
        self.body += _header.pack_tail()
        head = _header.Header(VERSION, VERSION, toc, tail, self.rows, len(self.entries))
        self.body[:_header.HEADER_SIZE] = head.pack()
        return bytes(self.body)


def vbuffer(item, *dims, item_params=b""):
    return _toc.pack_codec(item, item_params) + struct.pack(f"<i{len(dims)}i", len(dims), *dims)


def key2(inner, count):
    return _toc.pack_codec(inner, b"") + struct.pack("<Q", count)


def chain(name, depth, suffix):
    """Parameters of a `name` codec nested `depth` times in itself around UInt32, each level
    followed by `suffix`. Built from the inside out in linear time."""
    base = _toc.pack_codec("UInt32", b"")
    heads, size = [], len(base) + len(suffix)
    for _ in range(depth):
        heads.append(encode_string(name) + encode_leb128(size))
        size += len(heads[-1]) + len(suffix)
    return b"".join(reversed(heads)) + base + suffix * (depth + 1)


def chain_of_size(name, nbytes, suffix):
    per_level = len(encode_string(name)) + 3 + len(suffix)
    return chain(name, nbytes // per_level, suffix)


KEY2_SUFFIX = struct.pack("<Q", 5)
VBUFFER_SUFFIX = struct.pack("<ii", 1, 3)


def sparse_payload(length):
    """A VBuffer block of one empty sparse vector of `length` slots over a Single codec."""
    return struct.pack("<iiiii", 1, 0, length, 0, 0)


def text_payload(s):
    raw = s.encode("utf-8")
    return struct.pack("<ii", 1, len(s)) + encode_leb128(len(raw)) + raw


_ZEROS_CACHE = {}


def deflated_zeros(n):
    """Raw DEFLATE of n zero bytes (about n / 1030 bytes), cached."""
    if n not in _ZEROS_CACHE:
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        chunk = bytes(1 << 24)
        parts = [c.compress(chunk) for _ in range(n >> 24)] + [c.compress(bytes(n % (1 << 24)))]
        _ZEROS_CACHE[n] = b"".join(parts) + c.flush()
    return _ZEROS_CACHE[n]


# ============================================================================ the cases
# Each returns (file bytes, regex the error message must match, extra limits).

CASES = {}


def case(f):
    CASES[f.__name__] = f
    return f


def _one_column(codec, params, rows=0):
    b = Builder(rows)
    b.column("deep", codec, params)
    return b.finish()


@case
def nested_key2():
    """Key2<Key2<...>> 14,000 levels deep (223 KB): a SIGSEGV in C recursion."""
    data = _one_column("Key2", chain_of_size("Key2", 223_000, KEY2_SUFFIX))
    return data, r"column 0 'deep'.*Key2|Key2.*column 0 'deep'", {}


@case
def nested_vbuffer():
    data = _one_column("VBuffer", chain_of_size("VBuffer", 223_000, VBUFFER_SUFFIX))
    return data, r"VBuffer of VBuffer.*column 0 'deep'", {}


@case
def nested_key2_small():
    """31 KB is enough to overflow a 1 MiB stack."""
    data = _one_column("Key2", chain_of_size("Key2", 31_000, KEY2_SUFFIX))
    return data, r"Key2.*column 0 'deep'", {}


@case
def nested_in_metadata():
    """The same chain as an annotation's codec."""
    b = Builder(0)
    meta = b.metadata([("Deep", "VBuffer", chain_of_size("VBuffer", 100_000, VBUFFER_SUFFIX),
                        _header.HEADER_SIZE, 1)])
    b.column("c", "Single", metadata=meta)
    return b.finish(), r"VBuffer of VBuffer.*column 0 'c' metadata 'Deep'", {}


@case
def quadratic_key2():
    """159 KB of nesting took 3.4 GB when the stack was big enough (here 32 MiB)."""
    data = _one_column("Key2", chain_of_size("Key2", 159_000, KEY2_SUFFIX))
    return data, r"Key2.*column 0 'deep'", {"stack": 32 << 20}


@case
def quadratic_vbuffer():
    """800 KB: 9.7 s and beyond 6 GiB with a big stack (here 64 MiB)."""
    data = _one_column("VBuffer", chain_of_size("VBuffer", 800_000, VBUFFER_SUFFIX))
    return data, r"VBuffer of VBuffer.*column 0 'deep'", {"stack": 64 << 20}


@case
def long_innermost_parameters():
    """Not nesting but length: 800 KB of parameters at the deepest legal level."""
    inner = _toc.pack_codec("UInt32", bytes(800_000)) + struct.pack("<Q", 5)
    data = _one_column("VBuffer", vbuffer("Key2", 3, item_params=inner))
    return data, r"800000 unused parameter bytes.*column 0 'deep'", {}


def _overflowing_dims(rows):
    b = Builder(rows)
    dims = (2**31 - 1, 2**31 - 1, 2**31 - 1)
    lookup = 0
    if rows:
        block = struct.pack("<iiiii", 1, 0, 0, 0, 0)
        lookup = b.lookup([(b.put(block), len(block), len(block))])
    b.column("v", "VBuffer", vbuffer("Single", *dims), lookup=lookup)
    return b.finish(), r"column 0 'v'.*(overflow|too large)|(overflow|too large).*column 0 'v'", {}


@case
def dimension_overflow():
    """A 353-byte file whose vector size overflows: OverflowError, 'internal error' in verify."""
    return _overflowing_dims(1)


@case
def dimension_overflow_no_rows():
    """The same type without rows: a plain ValueError, and verify said OK."""
    return _overflowing_dims(0)


@case
def sparse_columns_share_block():
    """8 sparse vector columns read one 20-byte block of 2^26 implicit zeros: 2.1 GB."""
    b = Builder(1)
    block = sparse_payload(1 << 26)
    at = b.put(block)
    for i in range(8):
        b.column(f"v{i}", "VBuffer", vbuffer("Single", 0),
                 lookup=b.lookup([(at, len(block), len(block))]))
    return b.finish(), rf"column 1 'v1' block 0 \(bytes {at}-{at + 19}\) overlaps column 0 " \
                       rf"'v0' block 0 \(bytes {at}-{at + 19}\)", {}


@case
def metadata_kinds_share_block():
    """8 annotations of one column read one sparse block: 2.08 GB."""
    b = Builder(0)
    block = sparse_payload(1 << 26)
    at = b.put(block)
    meta = b.metadata([(f"k{i}", "VBuffer", vbuffer("Single", 0), at, len(block))
                       for i in range(8)])
    b.column("c", "Single", metadata=meta)
    return b.finish(), r"column 0 'c' metadata 'k1' block \(bytes \d+-\d+\) overlaps " \
                       r"column 0 'c' metadata 'k0' block", {}


@case
def columns_share_inflating_block():
    """4 Byte columns share one DEFLATE block that inflates to 256 MiB: 1 GiB of output."""
    n = 256 << 20
    b = Builder(n)
    disk = deflated_zeros(n)
    at = b.put(disk)
    for i in range(4):
        b.column(f"b{i}", "Byte", compression=1,
                 lookup=b.lookup([(at, len(disk), n)]))
    return b.finish(), r"column 1 'b1' block 0 .*overlaps column 0 'b0' block 0", {}


@case
def text_columns_share_lookup_table():
    """100 Text columns share one 60,000-entry lookup table: read() took 14.7 s."""
    rows = 60_000
    b = Builder(rows)
    blocks = []
    for i in range(rows):
        p = text_payload(f"{i % 1000:03d}")
        blocks.append((b.put(p), len(p), len(p)))
    table = b.lookup(blocks)
    for i in range(100):
        b.column(f"t{i}", "TextSpan", lookup=table, rows_per_block=1)
    end = table + 16 * rows - 1
    return b.finish(), rf"column 1 't1' lookup table \(bytes {table}-{end}\) overlaps column 0 " \
                       rf"'t0' lookup table", {}


@pytest.mark.parametrize("name", sorted(CASES))
def test_refused_within_limits(name, tmp_path):
    """idv.open + reading everything: IdvFormatError naming the place, no crash, within
    1 GiB of address space, a 1 MiB stack (unless the case asks for more) and 5 s."""
    data, pattern, limits = CASES[name]()
    got = assert_refused(data, tmp_path, pattern, **limits)
    assert got["peak_rss"] < 256 << 20, got


@pytest.mark.parametrize("name", sorted(CASES))
def test_verify_refuses_within_limits(name, tmp_path):
    """``idv verify``: exit code 1 with the place named, not a crash (139) nor an internal
    error, under the same limits (the stack limit on the main thread)."""
    data, pattern, limits = CASES[name]()
    path = tmp_path / "hostile.idv"
    path.write_bytes(data)
    t0 = time.perf_counter()
    rc, out, err = verify_limited(path, **limits)
    assert rc == 1, (rc, out[-2000:], err[-2000:])
    assert "internal error" not in out + err
    assert re.search(pattern, out), (pattern, out[-2000:])
    assert time.perf_counter() - t0 < TIME_LIMIT
