"""Hostile files: crafted to crash the reader or to make it spend memory and time out of all
proportion to their size. Each is refused with ``idv.IdvFormatError``
naming the place, in a child process with a memory limit (RLIMIT_AS), a 1 MiB stack and a
wall-clock limit, both through the API and through ``python -m idv verify``.

* codec parameters nested without end (``Key2<Key2<...>>``, ``VBuffer<VBuffer<...>>``): the
  recursion used to overflow the C stack, and every level copied the rest of the parameters
  (quadratic memory);
* vector dimensions whose product overflows ML.NET's int32 size;
* parts of the file shared by several columns, lookup tables or metadata kinds, so that limits
  meant for one part add up: ML.NET never writes two parts into the same bytes, and the reader
  refuses such a file at open (idv._storage.layout).

Every file is built here, from idv's own packing helpers; no binary is committed.
"""
from __future__ import annotations

import io
import re
import struct
import subprocess
import sys
import time
import warnings
import zlib

import numpy as np
import pytest

import idv
from idv import _header, _lookup, _toc
from idv._storage import layout
from idv._cursor import Cursor
from idv._cursor import encode_leb128, encode_string

from limited import (STACK_LIMIT, TIME_LIMIT, WORK_SECONDS, child_env, read_limited,
                     verify_limited)


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


# Codecs nested in themselves: (codec, file size, stack of the work) -> what the file did
CHAINS = {
    "nested_key2": ("Key2", 223_000, STACK_LIMIT),          # SIGSEGV in C recursion
    "nested_vbuffer": ("VBuffer", 223_000, STACK_LIMIT),
    "nested_key2_small": ("Key2", 31_000, STACK_LIMIT),     # enough for a 1 MiB stack
    "quadratic_key2": ("Key2", 159_000, 32 << 20),          # 3.4 GB given a big stack
    "quadratic_vbuffer": ("VBuffer", 800_000, 64 << 20),    # 9.7 s and beyond 6 GiB
}
CHAIN_SUFFIX = {"Key2": struct.pack("<Q", 5), "VBuffer": struct.pack("<ii", 1, 3)}
CHAIN_ERROR = {"Key2": r"column 0 'deep'.*key over Key2",
               "VBuffer": r"column 0 'deep'.*VBuffer of VBuffer"}


def _chain_case(codec, nbytes, stack):
    data = _one_column(codec, chain_of_size(codec, nbytes, CHAIN_SUFFIX[codec]))
    return data, CHAIN_ERROR[codec], {"stack": stack}


for _name, _args in CHAINS.items():
    CASES[_name] = lambda args=_args: _chain_case(*args)


@case
def nested_in_metadata():
    """The same chain as an annotation's codec."""
    b = Builder(0)
    block = b.put(b"\0")
    params = chain_of_size("VBuffer", 100_000, CHAIN_SUFFIX["VBuffer"])
    meta = b.metadata([("Deep", "VBuffer", params, block, 1)])
    b.column("c", "Single", metadata=meta)
    return b.finish(), r"column 0 'c' metadata 'Deep'.*VBuffer of VBuffer", {}


@case
def long_innermost_parameters():
    """Not nesting but length: 800 KB of parameters at the deepest legal level."""
    inner = _toc.pack_codec("UInt32", bytes(800_000)) + struct.pack("<Q", 5)
    data = _one_column("VBuffer", vbuffer("Key2", 3, item_params=inner))
    return data, r"column 0 'deep'.*800000 unused parameter bytes", {}


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
    assert got["peak_rss"] is None or got["peak_rss"] < 256 << 20, got


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


# ============================================================================ the layout rule
# In-process checks of idv._storage.layout: what counts as a part, which overlaps are refused at
# open, and that damage to one table still stays local to its column.

def _regions_of(f):
    return f.tables.regions          # the parts the reader found at open


def _tiling(regions):
    """(bytes in no part before the last one, bytes in more than one part)."""
    s, e = regions.starts, regions.stops
    keep = e > s
    order = np.argsort(s[keep], kind="stable")
    s, e = s[keep][order], e[keep][order]
    gaps = int(s[0]) + int((s[1:] - e[:-1]).clip(0).sum())
    shared = int((e[:-1] - s[1:]).clip(0).sum())
    return gaps, shared


def _written_files(tmp_path):
    from reference import TESTDATA_DIR, shared_dir
    files = sorted(TESTDATA_DIR.rglob("*.idv"))
    for sub in ("mlnet-files", "oracle/fixtures-sample"):
        files += sorted((shared_dir() / sub).rglob("*.idv"))
    path = tmp_path / "written.idv"
    idv.write(path, {"x": np.arange(1000, dtype=np.float32), "t": [str(i) for i in range(1000)],
                     "v": np.ones((1000, 3), np.int32)},
              metadata={"v": {"SlotNames": np.array(["a", "b", "c"], object)}},
              rows_per_block=64)
    return files + [path]


def test_a_metadata_table_as_long_as_a_lookup_table_opens():
    """Three blocks make lookup tables of 48 bytes, the length of this column's metadata
    table: it stays a metadata table (found by fuzz/fuzz_read.py: IndexError at open)."""
    out = io.BytesIO()
    idv.write(out, {"v": np.arange(6, dtype=np.float32).reshape(3, 2)}, rows_per_block=1,
              metadata={"v": {"SlotNames": ["a", "b"]}})
    with idv.open(out.getvalue()) as f:
        assert f["v"].read().tolist() == [[0, 1], [2, 3], [4, 5]]
        assert list(f["v"].metadata["SlotNames"]) == ["a", "b"]


def test_an_empty_name_in_the_last_byte_of_a_table_is_a_format_error():
    """A name length of 0 as the last byte of the bytes read (found by fuzz/fuzz_read.py:
    IndexError from the table of contents' parser)."""
    with pytest.raises(idv.IdvFormatError, match="empty codec name"):
        _toc.read_codec_head(Cursor(b"\x00"))
    with pytest.raises(idv.IdvFormatError, match="codec"):
        _toc.read_codec_head(Cursor(b"\x01a\x00", pos=2))
    out = io.BytesIO()
    idv.write(out, {"x": np.arange(3, dtype=np.int32)})
    with idv.open(out.getvalue()) as f:
        h = f.header
    with pytest.raises(idv.IdvFormatError, match="empty column name"):
        _toc.parse_toc(b"\x00", h.toc_offset, h)      # column name "", then nothing


def test_parts_tile_every_honest_file(tmp_path):
    """ML.NET's files (shared fixtures, testdata) and idv's own: the parts found at open cover
    every byte from 0 to the end of the tail once, so none is missed or counted twice."""
    files = _written_files(tmp_path)
    assert len(files) > 5
    for p in files:
        with idv.open(p, checksums=True) as f:     # the checksum table is a part too
            r = _regions_of(f)
            assert _tiling(r) == (0, 0), p
            assert int(r.stops.max()) == f.header.file_size, p
            assert r.overlaps() == []


# Overlaps of every kind of part, each refused at open: name -> () -> (file, message regex)
OVERLAPS = {}


def overlap(f):
    OVERLAPS[f.__name__] = f
    return f


def _single_with_metadata(block_at_metadata=False, meta_block_at_lookup=False):
    b = Builder(1)
    blk = b.put(struct.pack("<f", 1.5))
    mblk = b.put(struct.pack("<f", 2.5))
    lookup_at = len(b.body)
    meta_at = lookup_at + 16
    lookup = b.lookup([(meta_at if block_at_metadata else blk, 4, 4)])
    meta = b.metadata([("K", "Single", b"", lookup_at if meta_block_at_lookup else mblk, 4)])
    assert (lookup, meta) == (lookup_at, meta_at)
    b.column("a", "Single", lookup=lookup, metadata=meta)
    return b.finish(), lookup, meta


@overlap
def block_in_metadata_table():
    data, _, meta = _single_with_metadata(block_at_metadata=True)
    return data, rf"column 0 'a' (block 0|metadata table) \(bytes {meta}-.*overlaps column 0 " \
                 rf"'a' (block 0|metadata table) \(bytes {meta}-"


@overlap
def metadata_block_in_lookup_table():
    data, lookup, _ = _single_with_metadata(meta_block_at_lookup=True)
    return data, rf"^byte \d+: column 0 'a' metadata 'K' block \(bytes {lookup}-\d+\) overlaps column 0 " \
                 rf"'a' lookup table \(bytes {lookup}-"


def _column_b_over_a(codec, lookup_of_b):
    """Column a: one Single block (16 spare bytes after it) and its lookup table; column b of
    `codec` with its lookup table at lookup_of_b(builder, a's block offset)."""
    b = Builder(1)
    blk = b.put(struct.pack("<f", 1.5) + bytes(16))
    b.column("a", "Single", lookup=b.lookup([(blk, 4, 4)]))
    b.column("b", codec, lookup=lookup_of_b(b, blk))
    return b.finish(), blk


@overlap
def lookup_table_in_block():
    data, blk = _column_b_over_a("Single", lambda b, blk: blk + 2)
    return data, rf"^byte \d+: column 1 'b' lookup table \(bytes {blk + 2}-{blk + 17}\) overlaps " \
                 rf"column 0 'a' block 0 \(bytes {blk}-{blk + 3}\)"


@overlap
def unreadable_column_shares_block():
    """A column with an unknown codec is never decoded, but its block is still a part."""
    data, blk = _column_b_over_a("Float16", lambda b, blk: b.lookup([(blk, 4, 4)]))
    return data, rf"^byte \d+: column 1 'b' block 0 \(bytes {blk}-{blk + 3}\) overlaps column 0 'a' block 0"


@overlap
def columns_share_metadata_table():
    """Found from the table of contents alone, before either table is read."""
    b = Builder(0)
    mblk = b.put(struct.pack("<f", 2.5))
    meta = b.metadata([("K", "Single", b"", mblk, 4)])
    b.column("a", "Single", metadata=meta)
    b.column("b", "Single", metadata=meta)
    return b.finish(), rf"^byte \d+: column 1 'b' metadata table \(bytes {meta}-{meta}\) overlaps " \
                       rf"column 0 'a' metadata table"


@pytest.mark.parametrize("name", sorted(OVERLAPS))
def test_overlapping_parts_refused_at_open(name):
    data, pattern = OVERLAPS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", idv.IdvWarning)
        with pytest.raises(idv.IdvFormatError, match=pattern):
            idv.open(data)


def test_metadata_table_running_into_the_next_part():
    """A metadata table is read only up to the next part the table of contents locates: if it
    runs on, the column's metadata fails, naming that part; the data still reads."""
    b = Builder(1)
    blk_a = b.put(struct.pack("<f", 1.5))
    blk_b = b.put(struct.pack("<f", 2.5))
    mblk = b.put(struct.pack("<f", 3.5))
    toc = _toc.pack_metadata_toc([_toc.MetadataEntry("K", "Single", b"", 0, mblk, 4)])
    meta = b.put(toc[:-3])                              # b's lookup table takes its last bytes
    lookup_b = b.lookup([(blk_b, 4, 4)])
    b.column("a", "Single", lookup=b.lookup([(blk_a, 4, 4)]), metadata=meta)
    b.column("b", "Single", lookup=lookup_b)
    with idv.open(b.finish()) as f:
        assert f["a"].read().tolist() == [1.5] and f["b"].read().tolist() == [2.5]
        with pytest.raises(idv.IdvFormatError, match=rf"column 0 'a' metadata.*truncated .*; "
                           rf"the table must end before column 1 'b' lookup table \(bytes "
                           rf"{lookup_b}-"):
            f["a"].metadata


def test_damaged_tables_stay_local():
    """A lookup or metadata table that cannot be read fails only its column's reads (as a
    damaged block does); the others still read."""
    b = Builder(1)
    blk_b = b.put(struct.pack("<f", 2.5))
    meta = b.metadata([("K", "Single", b"", 10**6, 4)])       # a block beyond the file
    b.column("a", "Single", lookup=b.lookup([(10**6, 4, 4)]), metadata=meta)
    b.column("b", "Single", lookup=b.lookup([(blk_b, 4, 4)]))
    with idv.open(b.finish()) as f:
        assert f["b"].read().tolist() == [2.5]
        with pytest.raises(idv.IdvFormatError, match=r"column 0 'a' block 0 .*block at offset 1000000"):
            f["a"].read()
        with pytest.raises(idv.IdvFormatError, match=r"metadata 'K' .*block at offset 1000000"):
            f["a"].metadata


def test_empty_parts_overlap_nothing():
    """0-byte parts (blocks of an unreadable column, say) may sit anywhere; overlaps() lists
    every part that starts inside another, in file order."""
    r = layout.Regions()
    r.add(0, 256, "the header")
    r.add([300, 300, 310, 400], [0, 20, 5, 10], lambda i: f"block {i}")
    r.add(305, 0, "nothing")
    r.add([315, 402], [1, 1], lambda i: f"late {i}")
    assert [(r.describe(k), r.describe(o)) for k, o in r.overlaps()] == [
        ("block 2 (bytes 310-314)", "block 1 (bytes 300-319)"),
        ("late 0 (bytes 315-315)", "block 1 (bytes 300-319)"),
        ("late 1 (bytes 402-402)", "block 3 (bytes 400-409)")]
    with pytest.raises(idv.IdvFormatError, match=r"^byte 310: block 2 \(bytes 310-314\) overlaps block 1 "
                                                 r"\(bytes 300-319\)"):
        r.check()


def test_few_parts_and_many_find_the_same_overlaps(monkeypatch):
    """overlaps() of a few parts runs in Python, of many in numpy: the same pairs either way,
    on random layouts with empty parts, ties and nesting."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        starts, sizes = rng.integers(0, 200, n), rng.integers(0, 30, n)
        r = layout.Regions()
        r.add(starts, sizes, lambda i: f"part {i}")
        for limit in (None, 1):
            monkeypatch.setattr(layout, "_FEW", 64)
            few = r.overlaps(limit)
            monkeypatch.setattr(layout, "_FEW", 0)
            assert r.overlaps(limit) == few, (starts.tolist(), sizes.tolist())


# ============================================================================ codec parameters

def _codec(name, params):
    from idv import _codecs
    return _codecs.resolve(name, params)


def test_deepest_legal_nesting_reads():
    """A vector of keys of a raw type (current Key2 and legacy Key) is as deep as ML.NET goes,
    and parses; one level more is refused by name before it is parsed."""
    t = _codec("VBuffer", vbuffer("Key2", 4, item_params=key2("UInt16", 7))).type
    assert t == idv.Vector(idv.Key(idv.UInt16, 7), 4)
    legacy = _toc.pack_codec("Byte", b"") + b"\x01" + struct.pack("<Qi", 0, 9)
    assert _codec("VBuffer", vbuffer("Key", 2, item_params=legacy)).type == \
        idv.Vector(idv.Key(idv.Byte, 9), 2)
    for inner in ("Key2", "VBuffer", "TextSpan", "Single"):
        params = _toc.pack_codec(inner, b"\xff" * 64) + struct.pack("<Q", 3)
        with pytest.raises(idv.IdvFormatError, match=rf"^key over \w+: the raw type must be"):
            _codec("Key2", params)


@pytest.mark.parametrize("dims,ok", [
    ((2**31 - 1,), True), ((46340, 46340), True), ((0, 2**31 - 1, 2**31 - 1), True),
    ((65536, 32768), False), ((2**31 - 1, 2), False),
    ((2**20, 2**20, 0), False)])     # ML.NET's product overflows before it reaches the 0
def test_vector_size_is_an_int32_product(dims, ok):
    """ML.NET computes a vector type's size as a checked int32 product, dimension by
    dimension; a type whose product overflows is refused when the file opens, with or
    without rows."""
    if ok:
        assert _codec("VBuffer", vbuffer("Single", *dims)).type.dims == dims
        return
    with pytest.raises(idv.IdvFormatError, match=r"vector dimensions overflow"):
        _codec("VBuffer", vbuffer("Single", *dims))


# ============================================================================ files that change

_TRUNCATE = r"""
import os, sys
import numpy as np
import idv
path = sys.argv[1]
idv.write(path, {"x": np.arange(400_000, dtype=np.int64), "y": np.ones(400_000)},
          compression="none", rows_per_block=10_000)
with idv.open(path) as f:
    first = f["x"][:10].tolist()
    os.truncate(path, os.path.getsize(path) // 3)
    for read in (lambda: f["y"].read(), lambda: f["x"][390_000], lambda: f.read()):
        try:
            read()
            print("no error")
        except idv.IdvFormatError as e:
            print(type(e).__name__, e.path == path, e.reason)
"""


def test_a_file_truncated_while_open_is_an_error_not_sigbus(tmp_path):
    """A file cut short after idv.open: reading from its memory map beyond the new end would
    kill the process (SIGBUS); each read checks the file's size first."""
    path = tmp_path / "shrinks.idv"
    r = subprocess.run([sys.executable, "-c", _TRUNCATE, str(path)], capture_output=True,
                       text=True, env=child_env(), timeout=TIME_LIMIT)
    assert r.returncode == 0, f"child ended with {r.returncode}:\n{r.stderr[-3000:]}"
    lines = r.stdout.splitlines()
    assert len(lines) == 3
    for line in lines:
        assert line.startswith("IdvFormatError True the file was truncated while open"), line
