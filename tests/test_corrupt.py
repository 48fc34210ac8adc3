"""Corrupt, truncated and hand-crafted files: the reader fails with IdvFormatError, never worse.

The contract for bad input: ``idv.IdvFormatError`` naming what is wrong and where (byte offset,
column, block). Never a crash, a hang, an out-of-bounds read, a huge allocation, another
exception type, or a silently wrong value where the damage is detectable. An unknown top-level
codec or compression leaves the column listed but unreadable (``IdvWarning`` at open,
``UnsupportedCodecError`` on read).

Every corrupt file here is built in memory from the real ML.NET-written fixtures in the shared
folder (``<repo>/../shared`` or ``$IDV_SHARED``; tests skip when it is absent), either by editing
their bytes at offsets found with the small independent parser below, or by re-assembling them
from their decoded parts (``parse``/``build``) after changing one thing.

* truncation: every fixture cut at every offset (a seeded sample for the big ones);
* random byte flips (seeded): an error or data, and exactly "error" or "same data" where the
  byte's role demands it (header, unused header bytes, tail signature);
* crafted cases for each rule of the contract, each through bytes, a file object and a path;
* decoder leaks: reading text-heavy files (and failing on corrupt ones) many times does not
  grow memory; one read loop of valid and corrupt files under valgrind's memcheck (~10 s;
  skipped without valgrind or with IDV_VALGRIND=0).
"""
from __future__ import annotations

import ast
import gc
import io
import os
import random
import re
import struct
import subprocess
import sys
import warnings
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pytest

import idv
from idv import compression

REPO = Path(__file__).resolve().parent.parent


def _shared_dir() -> Path:
    env = os.environ.get("IDV_SHARED")
    return Path(env).expanduser().resolve() if env else (REPO.parent / "shared").resolve()


SHARED = _shared_dir()
SAMPLE = SHARED / "oracle" / "fixtures-sample"
MLNET = SHARED / "mlnet-files"
FIXTURES = (sorted(SAMPLE.glob("*.idv")) if SAMPLE.is_dir() else []) + \
    (sorted(MLNET.glob("*.idv")) if MLNET.is_dir() else [])
SMALL = 64 * 1024            # files up to this size get exhaustive treatment
BACKENDS = [b for b in ("zlib", "libdeflate", "isal") if b in compression.installed()]

_CACHE: dict = {}


def fixture_bytes(name: str) -> bytes:
    """The bytes of a shared fixture (by file name); skips when the shared folder is missing."""
    if name not in _CACHE:
        for p in FIXTURES:
            if p.name == name:
                _CACHE[name] = p.read_bytes()
                break
        else:
            pytest.skip(f"fixture {name} not found under {SHARED} (set IDV_SHARED)")
    return _CACHE[name]


def _fixture_params():
    if not FIXTURES:
        return [pytest.param(None, marks=pytest.mark.skip(
            reason=f"shared fixtures missing under {SHARED} (set IDV_SHARED)"), id="missing")]
    return [pytest.param(p.name, id=p.name) for p in FIXTURES]


# ============================================================================ format helpers
# An independent little parser/assembler, written from the format reference, so the corrupt
# files do not depend on the code under test.

SIG = 0x00425644004C4D43
TAIL_SIG = 0x434D4C0044564200
V = {s: 0x0001000100010000 | s for s in range(1, 10)}      # V[6] = 1.1.1.6
HDR = struct.Struct("<QQQqqqi")


def leb(v: int) -> bytes:
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def nstr(s, raw: bytes = None) -> bytes:
    """.NET BinaryWriter string (7-bit length + UTF-8); `raw` gives the bytes verbatim."""
    b = s.encode("utf-8") if raw is None else raw
    return leb(len(b)) + b


def triple(name: str, params: bytes = b"") -> bytes:
    return nstr(name) + leb(len(params)) + params


def vbuf_params(item: str, dims=(0,), item_params: bytes = b"") -> bytes:
    return triple(item, item_params) + struct.pack(f"<i{len(dims)}i", len(dims), *dims)


def key2_params(inner: str, count: int) -> bytes:
    return triple(inner) + struct.pack("<Q", count)


def compress(kind: int, payload: bytes) -> bytes:
    if kind == 1:
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return c.compress(payload) + c.flush()
    if kind == 2:
        return zlib.compress(payload, 6)
    return payload


def decompress(kind: int, data: bytes) -> bytes:
    if kind == 1:
        return zlib.decompress(data, -15)
    if kind == 2:
        return zlib.decompress(data)
    return data


def text_payload(values, bounds=None, raw: bytes = None, count=None) -> bytes:
    """A TextSpan block: int32 count, end boundaries in UTF-16 units, one 7-bit-prefixed string."""
    if bounds is None:
        bounds, total = [], 0
        for v in values:
            total += len(v.encode("utf-16-le")) // 2
            bounds.append(total)
    body = "".join(values).encode("utf-8") if raw is None else raw
    n = len(bounds) if count is None else count
    return struct.pack(f"<i{len(bounds)}i", n, *bounds) + nstr(None, body)


def vbuf_payload(nvec, size, counts, indices, values: bytes, lengths=None, nidx=None) -> bytes:
    """A VBuffer block: nvec, size, [lengths], counts, numIndices, indices, item block."""
    out = struct.pack("<ii", nvec, size)
    if lengths is not None:
        out += struct.pack(f"<{len(lengths)}i", *lengths)
    out += struct.pack(f"<{len(counts)}i", *counts)
    out += struct.pack("<i", len(indices) if nidx is None else nidx)
    out += struct.pack(f"<{len(indices)}i", *indices)
    return out + values


@dataclass
class Meta:
    kind: str
    codec: str
    params: bytes
    comp: int
    payload: bytes                    # decompressed item block
    stored: bytes = None              # the bytes on disk, when they must differ from compress()


@dataclass
class Col:
    name: str
    codec: str
    params: bytes = b""
    comp: int = 1
    rpb: int = 1
    blocks: list = field(default_factory=list)     # decompressed payloads, one per block
    meta: list = field(default_factory=list)
    stored: dict = field(default_factory=dict)     # block index -> bytes on disk (verbatim)
    raw_name: bytes = None                         # column name bytes verbatim (bad UTF-8)


@dataclass
class Model:
    rows: int
    cols: list
    version: int = V[6]
    compat: int = V[6]


@dataclass
class Layout:
    """Where build() put everything (absolute byte offsets)."""
    toc: int = 0
    tail: int = 0
    entries: list = field(default_factory=list)    # per column: dict of field offsets
    lookups: list = field(default_factory=list)    # per column: lookup table offset
    blocks: list = field(default_factory=list)     # per column: [(offset, disk, raw)]
    meta_tocs: list = field(default_factory=list)  # per column: metadata TOC offset or 0
    meta_blocks: list = field(default_factory=list)


def build(m: Model, trailing: bytes = b""):
    """Assemble an .idv as BinarySaver lays it out: blocks, lookups, metadata, TOC, tail."""
    out = bytearray(256)
    lay = Layout()
    for c in m.cols:
        locs = []
        for b, payload in enumerate(c.blocks):
            disk = c.stored.get(b, compress(c.comp, payload))
            locs.append((len(out), len(disk), len(payload)))
            out += disk
        lay.blocks.append(locs)
    for locs in lay.blocks:
        lay.lookups.append(len(out))
        for o, d, r in locs:
            out += struct.pack("<qii", o, d, r)
    for c in m.cols:
        if not c.meta:
            lay.meta_tocs.append(0)
            lay.meta_blocks.append([])
            continue
        where = []
        for e in c.meta:
            disk = e.stored if e.stored is not None else compress(e.comp, e.payload)
            where.append((len(out), len(disk)))
            out += disk
        lay.meta_blocks.append(where)
        lay.meta_tocs.append(len(out))
        out += leb(len(c.meta))
        for e, (o, d) in zip(c.meta, where):
            out += nstr(e.kind) + triple(e.codec, e.params) + bytes([e.comp]) + \
                struct.pack("<q", o) + leb(d)
    lay.toc = len(out)
    for i, c in enumerate(m.cols):
        f = {"start": len(out)}
        out += nstr(c.name, c.raw_name)
        f["codec"] = len(out)
        out += nstr(c.codec)
        f["params_len"] = len(out)
        out += leb(len(c.params))
        f["params"] = len(out)
        out += c.params
        f["comp"] = len(out)
        out += bytes([c.comp])
        f["rpb"] = len(out)
        out += leb(c.rpb)
        f["lookup"] = len(out)
        out += struct.pack("<q", lay.lookups[i])
        f["meta"] = len(out)
        out += struct.pack("<q", lay.meta_tocs[i])
        lay.entries.append(f)
    lay.tail = len(out)
    out += struct.pack("<Q", TAIL_SIG)
    out[:HDR.size] = HDR.pack(SIG, m.version, m.compat, lay.toc, lay.tail, m.rows, len(m.cols))
    return bytes(out) + trailing, lay


def _rd_leb(d, p):
    v = s = 0
    while True:
        b = d[p]
        p += 1
        v |= (b & 0x7F) << s
        s += 7
        if not b & 0x80:
            return v, p


def _rd_str(d, p):
    n, p = _rd_leb(d, p)
    return d[p:p + n].decode("utf-8"), p + n


def parse(data: bytes) -> Model:
    """A fixture into a Model with decompressed payloads (inverse of build)."""
    sig, ver, compat, toc, tail, rows, ncol = HDR.unpack_from(data, 0)
    assert sig == SIG
    p, cols = toc, []
    for _ in range(ncol):
        name, p = _rd_str(data, p)
        codec, p = _rd_str(data, p)
        n, p = _rd_leb(data, p)
        params, p = bytes(data[p:p + n]), p + n
        comp = data[p]
        rpb, p = _rd_leb(data, p + 1)
        lookup, meta = struct.unpack_from("<qq", data, p)
        p += 16
        nb = 0 if rows == 0 else (rows - 1) // rpb + 1
        blocks = []
        for b in range(nb):
            o, d, r = struct.unpack_from("<qii", data, lookup + 16 * b)
            payload = decompress(comp, data[o:o + d])
            assert len(payload) == r
            blocks.append(payload)
        metas = []
        if meta:
            q = meta
            cnt, q = _rd_leb(data, q)
            for _ in range(cnt):
                kind, q = _rd_str(data, q)
                mc, q = _rd_str(data, q)
                n, q = _rd_leb(data, q)
                mp, q = bytes(data[q:q + n]), q + n
                mk = data[q]
                (mo,), q = struct.unpack_from("<q", data, q + 1), q + 9
                sz, q = _rd_leb(data, q)
                metas.append(Meta(kind, mc, mp, mk, decompress(mk, data[mo:mo + sz])))
        cols.append(Col(name, codec, params, comp, rpb, blocks, metas))
    return Model(rows, cols, ver, compat)


def model_of(name: str) -> Model:
    return parse(fixture_bytes(name))


def col_named(m: Model, name: str) -> Col:
    return next(c for c in m.cols if c.name == name)


def patch(data: bytes, offset: int, fmt: str, *values) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, offset, *values)
    return bytes(b)


# ============================================================================ reading helpers

def _is_sparse_readable(t):
    return isinstance(t, idv.Vector) and (isinstance(t.item, idv.Key)
                                          or t.item.dtype.kind in "biuf")


def read_all(source, backend=None, threads=None, slices=True):
    """Open and read everything a user can: every column (dense, sparse, sliced, by block),
    all metadata and the schema. Returns {column index: (dense values, metadata)}."""
    with idv.open(source, backend=backend, threads=threads) as f:
        str(f.schema)
        out = {}
        for c in f.columns:
            meta = c.metadata
            if not c.readable:
                out[c.index] = (None, meta)
                continue
            values = c.read()
            if _is_sparse_readable(c.type):
                c.read(sparse=True)
            if slices and c.num_rows:
                c[c.num_rows // 2]
                c[1:c.num_rows - 1]
                c[::3]
                for _ in c.iter_blocks():
                    pass
            out[c.index] = (values, meta)
        f.read()
        return out


def read_quiet(source, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", idv.IdvWarning)
        return read_all(source, **kw)


def same(a, b) -> bool:
    """Deep equality of read_all results (NaN-aware, arrays, Ragged, dicts)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, idv.Ragged):
        return isinstance(b, idv.Ragged) and same(a.offsets, b.offsets) \
            and same(a.values, b.values)
    if isinstance(a, np.ndarray):
        if not isinstance(b, np.ndarray) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.kind in "fc":
            return np.array_equal(a, b, equal_nan=True)
        if a.dtype.names:
            return all(same(a[n], b[n]) for n in a.dtype.names)
        return np.array_equal(a, b)
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b
    return type(a) is type(b) and a == b


def prefix_same(a, b) -> bool:
    """Columns that exist in both agree on the rows that exist in both."""
    for k in a.keys() & b.keys():
        va, vb = a[k][0], b[k][0]
        if va is None or vb is None:
            continue
        n = min(len(va), len(vb))
        if not same(va[:n], vb[:n]):
            return False
    return True


SOURCES = ["bytes", "fileobj", "path"]


def as_source(kind, data, tmp_path):
    if kind == "bytes":
        return data
    if kind == "fileobj":
        return io.BytesIO(data)
    p = tmp_path / "crafted.idv"
    p.write_bytes(data)
    return str(p)


def expect_error(data, pattern, tmp_path=None, source="bytes", exact=idv.IdvFormatError,
                 **kw):
    """Reading everything fails with IdvFormatError (exactly `exact`) matching `pattern`."""
    src = as_source(source, data, tmp_path)
    with pytest.raises(idv.IdvFormatError) as ei:
        read_quiet(src, **kw)
    assert type(ei.value) is exact, repr(ei.value)
    assert re.search(pattern, str(ei.value)), f"{pattern!r} not in {str(ei.value)!r}"
    return str(ei.value)


# ============================================================================ sanity

def test_builder_round_trips_every_fixture():
    """parse() + build() reproduce every fixture's data: the crafted files are realistic."""
    if not FIXTURES:
        pytest.skip(f"shared fixtures missing under {SHARED}")
    for p in FIXTURES:
        if p.stat().st_size > SMALL:
            continue
        data = fixture_bytes(p.name)
        rebuilt, _ = build(parse(data))
        assert same(read_quiet(rebuilt), read_quiet(data)), p.name


# ============================================================================ 1. truncation

def _truncation_offsets(n, rng):
    if n <= SMALL:
        return range(n)
    edges = {0, 1, 7, 8, 55, 56, 255, 256, 257, n - 9, n - 8, n - 7, n - 1}
    return sorted(edges | {rng.randrange(n) for _ in range(150)})


@pytest.mark.parametrize("name", _fixture_params())
def test_truncated_everywhere(name):
    """Every prefix of every fixture is an IdvFormatError (bytes source)."""
    data = fixture_bytes(name)
    rng = random.Random(len(data))
    for n in _truncation_offsets(len(data), rng):
        with pytest.raises(idv.IdvFormatError):
            read_quiet(data[:n], slices=False)


@pytest.mark.parametrize("name", _fixture_params())
def test_truncated_file_objects_and_paths(name, tmp_path):
    """A sample of prefixes through a file object and a path; the message names the sizes."""
    data = fixture_bytes(name)
    rng = random.Random(len(data) + 1)
    cuts = sorted({0, 100, 255, 256, len(data) - 1, len(data) - 8}
                  | {rng.randrange(len(data)) for _ in range(8)})
    for n in cuts:
        for kind in ("fileobj", "path"):
            src = as_source(kind, data[:n], tmp_path)
            with pytest.raises(idv.IdvFormatError, match=r"truncated|outside the file|ended"):
                read_quiet(src, slices=False)
    # the exact messages for the two kinds of truncation
    with pytest.raises(idv.IdvFormatError, match=r"truncated file: 100 bytes"):
        idv.open(data[:100])
    with pytest.raises(idv.IdvFormatError,
                       match=rf"tail offset {len(data) - 8} .*outside the file of "
                             rf"{len(data) - 1} bytes"):
        idv.open(data[:-1])


# ============================================================================ 2. byte flips

def _tail_offset(data):
    return HDR.unpack_from(data, 0)[4]


def _flip_positions(data, rng, count):
    """Random positions, plus every header byte and every tail byte."""
    tail = _tail_offset(data)
    pos = [rng.randrange(len(data)) for _ in range(count)]
    return list(range(0, 56)) + list(range(tail, tail + 8)) + pos


@pytest.mark.parametrize("name", _fixture_params())
def test_random_byte_flips(name):
    """A flipped byte gives IdvFormatError (or an unreadable column) or data, nothing else;
    where the byte's role decides the outcome, exactly that outcome."""
    data = fixture_bytes(name)
    rng = random.Random(f"flip-{name}")
    big = len(data) > SMALL
    original = read_quiet(data)
    tail = _tail_offset(data)
    columns = HDR.unpack_from(data, 0)[6]
    backends = BACKENDS or [None]
    for k, i in enumerate(_flip_positions(data, rng, 15 if big else 250)):
        b = bytearray(data)
        b[i] ^= rng.randrange(1, 256)
        flipped = bytes(b)
        try:
            got = read_quiet(flipped, backend=backends[k % len(backends)],
                             slices=not big and k % 4 == 0)
        except idv.IdvFormatError:
            got = None
        where = f"{name}: byte {i} {data[i]:#04x} -> {flipped[i]:#04x}"
        if i < 8 or 32 <= i < 40 or tail <= i < tail + 8 or (24 <= i < 32 and columns):
            # signature, TOC offset, tail offset, tail signature: must be detected
            assert got is None, where
        elif i < 32:
            # version / compatible version (and the TOC offset of a file without columns,
            # which is never followed): refused, or accepted with identical data
            assert got is None or same(got, original), where
        elif i < 52:
            # row count / column count: refused, or the rows and columns still there agree
            assert got is None or prefix_same(got, original), where
        elif i < 256:
            # unused header bytes: never read
            assert got is not None and same(got, original), where


EDGE_INT32 = (-1, 0, 1, 2, 3, 1000, 0x7FFF, 1 << 16, 1 << 20, 2**31 - 1, -2**31)


def mutate(payload: bytes, rng) -> bytes:
    """A few random edits: flip a byte, set an int32 to an edge value, delete or insert bytes."""
    p = bytearray(payload)
    for _ in range(rng.choice((1, 1, 2, 3, 5))):
        j = rng.randrange(len(p) + 1)
        r = rng.random()
        if r < 0.3 and j + 4 <= len(p):
            struct.pack_into("<i", p, j, rng.choice(EDGE_INT32))
        elif r < 0.4:
            del p[j:j + rng.randrange(1, 9)]
        elif r < 0.5:
            p[j:j] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        elif j < len(p):
            p[j] ^= rng.randrange(1, 256)
    return bytes(p)


@pytest.mark.parametrize("name", ["mixed_smallblocks_none.idv", "vectors_sparse.idv",
                                  "vectors_variable.idv", "vectors_misc.idv", "scalars_text.idv",
                                  "scalars_datetime.idv", "datatypes.idv", "keys.idv",
                                  "annotations_custom.idv", "pipeline_multiclass_scored.idv"])
def test_payload_mutations(name):
    """Mutate decompressed block and metadata payloads, then recompress, so the damage reaches
    the decoders instead of breaking DEFLATE: IdvFormatError or data, nothing else."""
    m = model_of(name)
    rng = random.Random(f"payload-{name}")
    targets = [(c, b) for c in m.cols for b in range(len(c.blocks))] + \
        [(c, e) for c in m.cols for e in c.meta]
    for k in range(120):
        c, which = rng.choice(targets)
        if isinstance(which, int):
            blocks = list(c.blocks)
            blocks[which] = mutate(blocks[which], rng)
            c2 = replace(c, blocks=blocks)
        else:
            c2 = replace(c, meta=[replace(e, payload=mutate(e.payload, rng)) if e is which else e
                                  for e in c.meta])
        data, _ = build(replace(m, cols=[c2 if x is c else x for x in m.cols]))
        try:
            read_quiet(data, slices=k % 4 == 0)
        except idv.IdvFormatError:
            pass


# ============================================================================ 3. crafted cases
# Each case: a function returning (bytes, regex the message must match). Run through bytes, a
# file object and a path.

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def _hdr_patch(data, field_offset, fmt, value):
    return patch(data, field_offset, fmt, value)


@case
def bad_magic():
    return _hdr_patch(fixture_bytes("scalars_numeric.idv"), 0, "<Q", 0x1122334455667788), \
        r"bad signature 0x1122334455667788 at byte 0"


@case
def bad_magic_last_byte():
    d = bytearray(fixture_bytes("scalars_numeric.idv"))
    d[7] = 1
    return bytes(d), r"not an \.idv file: bad signature .* at byte 0"


@case
def compatible_version_too_new():
    d = fixture_bytes("scalars_numeric.idv")
    d = _hdr_patch(_hdr_patch(d, 8, "<Q", V[7]), 16, "<Q", V[7])
    return d, r"unsupported version 1\.1\.1\.7 \(compatible version 1\.1\.1\.7\).*too new"


@case
def compatible_version_too_old():
    d = fixture_bytes("datatypes.idv")          # the real 1.1.1.5 file
    return _hdr_patch(d, 16, "<Q", V[3]), r"compatible version 1\.1\.1\.3\).*too old"


@case
def version_too_old():
    d = _hdr_patch(fixture_bytes("datatypes.idv"), 8, "<Q", V[1])
    d = _hdr_patch(d, 16, "<Q", V[1])
    return d, r"unsupported version 1\.1\.1\.1 .*too old"


@case
def compatible_newer_than_version():
    d = _hdr_patch(fixture_bytes("scalars_numeric.idv"), 8, "<Q", V[4])
    return d, r"unsupported version 1\.1\.1\.4 \(compatible version 1\.1\.1\.6\): compatible " \
              r"version is newer"


@case
def version_major_part_named():
    d = _hdr_patch(fixture_bytes("scalars_numeric.idv"), 16, "<Q", 0x0002000000000000)
    d = _hdr_patch(d, 8, "<Q", 0x0002000000000000)
    return d, r"version 2\.0\.0\.0"


@case
def negative_row_count():
    return _hdr_patch(fixture_bytes("scalars_numeric.idv"), 40, "<q", -5), \
        r"negative row count -5 .*byte 40"


@case
def negative_column_count():
    return _hdr_patch(fixture_bytes("scalars_numeric.idv"), 48, "<i", -1), \
        r"negative column count -1 .*byte 48"


@case
def column_count_beyond_toc():
    d = fixture_bytes("scalars_numeric.idv")
    return _hdr_patch(d, 48, "<i", 11), r"truncated .*column 10.* at byte \d+"


@case
def row_count_huge():
    return _hdr_patch(fixture_bytes("scalars_numeric.idv"), 40, "<q", 2**62), \
        r"column 0 'F32'.*lookup table of \d+ blocks at offset \d+ lies outside"


@case
def toc_offset_beyond_tail():
    d = fixture_bytes("scalars_numeric.idv")
    return _hdr_patch(d, 24, "<q", _tail_offset(d) + 1), \
        r"table of contents offset \d+ \(header byte 24\) is outside"


@case
def toc_offset_inside_header():
    return _hdr_patch(fixture_bytes("scalars_numeric.idv"), 24, "<q", 100), \
        r"table of contents offset 100 \(header byte 24\)"


@case
def tail_offset_beyond_file():
    d = fixture_bytes("scalars_numeric.idv")
    return _hdr_patch(d, 32, "<q", 10**12), r"tail offset 1000000000000 \(header byte 32\) " \
        rf"is outside the file of {len(d)} bytes"


@case
def tail_offset_negative():
    return _hdr_patch(fixture_bytes("scalars_numeric.idv"), 32, "<q", -1), \
        r"tail offset -1 \(header byte 32\)"


@case
def bad_tail_signature():
    d = fixture_bytes("scalars_numeric.idv")
    t = _tail_offset(d)
    return _hdr_patch(d, t, "<Q", SIG), rf"bad tail signature .* at byte {t}"


@case
def tail_moved_earlier():
    d = fixture_bytes("scalars_numeric.idv")
    return _hdr_patch(d, 32, "<q", _tail_offset(d) - 8), r"bad tail signature"


# ---- TOC
@case
def column_name_invalid_utf8():
    m = model_of("scalars_text.idv")
    m.cols[1].raw_name = b"In\xfft"
    d, lay = build(m)
    return d, rf"invalid UTF-8 in column 1 name at byte {lay.entries[1]['start']}"


@case
def column_name_empty():
    m = model_of("scalars_text.idv")
    m.cols[1].name = ""
    d, lay = build(m)
    return d, rf"column 1.*empty name.*byte {lay.entries[1]['start']}"


@case
def codec_name_empty():
    m = model_of("scalars_text.idv")
    m.cols[1].codec = ""
    return build(m)[0], r"empty codec name in column 1 'Id'"


@case
def codec_params_beyond_toc():
    m = model_of("scalars_text.idv")
    d, lay = build(m)
    d = patch(d, lay.entries[1]["params_len"], "<B", 0x7F)
    return d, rf"column 1 'Id' codec 'Int32' declares 127 parameter bytes at byte " \
              rf"{lay.entries[1]['params_len']}"


@case
def simple_codec_with_params():
    m = model_of("scalars_text.idv")
    m.cols[1].params = b"\x00"
    return build(m)[0], r"codec 'Int32' has 1 unused parameter bytes.*column 1 'Id'"


@case
def leb128_overlong():
    """11-byte LEB128 rows-per-block (ML.NET reads at most 10)."""
    m = model_of("scalars_text.idv")
    d, lay = build(m)
    at = lay.entries[0]["rpb"]
    assert d[at] == 14 and m.rows == 14
    bad = d[:at] + b"\x8e" + b"\x80" * 9 + b"\x00" + d[at + 1:]
    bad = patch(bad, 32, "<q", lay.tail + 10)                      # the tail moved too
    bad = patch(bad, lay.entries[1]["lookup"] + 10, "<q", lay.lookups[1])
    return bad, rf"column 0 'Txt' rows per block at byte {at} overflows 64 bits"


@case
def leb128_tenth_byte_too_big():
    m = model_of("scalars_text.idv")
    d, lay = build(m)
    at = lay.entries[0]["rpb"]
    bad = d[:at] + b"\x8e" + b"\x80" * 8 + b"\x02" + d[at + 1:]
    bad = patch(bad, 32, "<q", lay.tail + 9)
    return bad, rf"rows per block at byte {at} overflows 64 bits"


@case
def rows_per_block_zero_with_rows():
    m = model_of("scalars_text.idv")
    for c in m.cols:
        c.rpb = 0
    d, lay = build(m)
    return d, rf"column 0 'Txt': invalid rows per block 0 \(TOC entry at byte " \
              rf"{lay.entries[0]['start']}\)"


@case
def rows_per_block_too_big():
    m = model_of("scalars_text.idv")
    for c in m.cols:
        c.rpb = 2**31
    return build(m)[0], r"column 0 'Txt': invalid rows per block 2147483648"


@case
def rows_per_block_differs():
    m = model_of("mixed_smallblocks_none.idv")       # 100 rows, 7 per block
    c = m.cols[3]
    rows = np.arange(100)
    # re-block column 3 (Boolean) in 10-row blocks: a valid column on its own
    bits = np.zeros(100, bool)
    for b, payload in enumerate(c.blocks):
        r0 = b * 7
        n = min(7, 100 - r0)
        bits[r0:r0 + n] = np.unpackbits(np.frombuffer(payload, np.uint8), count=n,
                                        bitorder="little").astype(bool)
    c.rpb = 10
    c.blocks = [np.packbits(bits[r:r + 10], bitorder="little").tobytes() for r in rows[::10]]
    return build(m)[0], r"column 3 'B': rows per block 10 differs from the first column's 7"


@case
def rows_per_block_differs_without_rows():
    """ML.NET refuses differing rows per block even in a file without rows."""
    m = model_of("schema-codec-test.idv")
    m.cols[2].rpb = 2
    return build(m)[0], rf"column 2 '{m.cols[2].name}': rows per block 2 differs from the " \
                        r"first column's 1"


@case
def lookup_offset_beyond_file():
    m = model_of("scalars_text.idv")
    d, lay = build(m)
    return patch(d, lay.entries[1]["lookup"], "<q", 10**9), \
        rf"column 1 'Id': lookup table of 1 blocks at offset 1000000000 lies outside " \
        rf"\[256, {lay.tail}\] \(TOC entry at byte {lay.entries[1]['start']}\)"


@case
def lookup_offset_in_header():
    m = model_of("scalars_text.idv")
    d, lay = build(m)
    return patch(d, lay.entries[0]["lookup"], "<q", 8), r"column 0 'Txt': lookup table .* 8 " \
        r"lies outside"


@case
def lookup_table_overlaps_tail():
    m = model_of("mixed_smallblocks_deflate.idv")
    d, lay = build(m)
    return patch(d, lay.entries[2]["lookup"], "<q", lay.tail - 16 * 14), \
        r"column 2 'F64': lookup table of 15 blocks"


@case
def metadata_offset_beyond_file():
    m = model_of("annotations_custom.idv")
    d, lay = build(m)
    return patch(d, lay.entries[1]["meta"], "<q", lay.tail + 1), \
        rf"column 1 'Score': metadata offset {lay.tail + 1} lies outside"


# ---- lookup entries / blocks
def _lookup_patch(name, col, block, field_, value, fmt=None):
    """Rebuild fixture `name`, then set one lookup field (0 offset, 8 disk, 12 raw)."""
    m = model_of(name)
    d, lay = build(m)
    at = lay.lookups[col] + 16 * block + field_
    return patch(d, at, fmt or ("<q" if field_ == 0 else "<i"), value), lay, m


@case
def block_offset_beyond_file():
    d, lay, _ = _lookup_patch("mixed_smallblocks_deflate.idv", 4, 3, 0, 10**7)
    return d, rf"column 4 'Txt': block 3 at offset 10000000 .* lies outside \[256, " \
              rf"{lay.tail}\].*lookup entry at byte {lay.lookups[4] + 48}"


@case
def block_offset_in_header():
    d, lay, _ = _lookup_patch("scalars_numeric.idv", 2, 0, 0, 0)
    return d, r"column 2 'I8': block 0 at offset 0"


@case
def block_disk_length_beyond_file():
    d, lay, _ = _lookup_patch("scalars_text.idv", 0, 0, 8, 10**6)
    return d, r"column 0 'Txt': block 0 .* 1000000 bytes on disk .* lies outside"


@case
def block_negative_lengths():
    d, lay, _ = _lookup_patch("scalars_text.idv", 0, 0, 12, -3)
    return d, r"column 0 'Txt': block 0 .*-3 decompressed .*negative"


@case
def raw_length_wrong_fixed_width():
    d, lay, _ = _lookup_patch("mixed_smallblocks_deflate.idv", 0, 2, 12, 7 * 4 + 4)
    return d, rf"column 0 'Id' block 2 \(lookup entry at byte {lay.lookups[0] + 32}\): " \
              r"decompressed length 32 is not rows x item size"


@case
def raw_length_one_short_text():
    d, lay, m = _lookup_patch("mixed_smallblocks_deflate.idv", 4, 5, 12,
                              len(model_of("mixed_smallblocks_deflate.idv").cols[4].blocks[5])
                              - 1)
    o = lay.blocks[4][5][0]
    return d, rf"column 4 'Txt' block 5 at byte {o} .*decompresses to more bytes than the " \
              r"lookup table says"


@case
def raw_length_one_long_text():
    m = model_of("mixed_smallblocks_deflate.idv")
    d, lay, _ = _lookup_patch("mixed_smallblocks_deflate.idv", 4, 5, 12,
                              len(m.cols[4].blocks[5]) + 1)
    o = lay.blocks[4][5][0]
    return d, rf"column 4 'Txt' block 5 at byte {o} .*decompresses to fewer bytes"


@case
def raw_length_huge():
    d, lay, _ = _lookup_patch("scalars_text.idv", 0, 0, 12, 2**31 - 1)
    return d, r"column 0 'Txt' block 0 .*decompressed length 2147483647 is beyond what DEFLATE"


@case
def raw_length_huge_vector():
    d, lay, _ = _lookup_patch("vectors_variable.idv", 0, 0, 12, 2**31 - 1)
    return d, r"column 0 .*block 0 .*decompressed length 2147483647"


@case
def raw_length_differs_uncompressed():
    d, lay, _ = _lookup_patch("mixed_none.idv", 4, 0, 12, 10**6)
    return d, r"column 4 'Txt' block 0 .*decompressed length 1000000 differs from the stored " \
              r"length \(compression None\)"


@case
def corrupt_deflate():
    m = model_of("mixed_smallblocks_deflate.idv")
    d, lay = build(m)
    o, disk, _ = lay.blocks[4][6]
    b = bytearray(d)
    b[o:o + disk] = b"\xff" * disk          # block type 3: invalid
    return bytes(b), rf"column 4 'Txt' block 6 at byte {o} \({disk} bytes on disk.*\): " \
                     r"corrupt compressed data"


@case
def corrupt_deflate_fixed_width():
    m = model_of("mixed_smallblocks_deflate.idv")
    d, lay = build(m)
    o, disk, _ = lay.blocks[2][9]
    b = bytearray(d)
    b[o:o + disk] = b"\xff" * disk
    return bytes(b), rf"column 2 'F64' block 9 at byte {o} .*corrupt compressed data"


@case
def deflate_stream_truncated():
    """The block's disk length cut short: the stream ends early."""
    m = model_of("mixed_smallblocks_deflate.idv")
    d, lay = build(m)
    at = lay.lookups[4] + 16 * 2 + 8
    disk = struct.unpack_from("<i", d, at)[0]
    return patch(d, at, "<i", disk - 3), r"column 4 'Txt' block 2 at byte \d+ .*(fewer|corrupt)"


@case
def text_block_too_short():
    m = model_of("mixed_none.idv")
    c = col_named(m, "Txt")
    c.blocks[0] = c.blocks[0][:-1]
    return build(m)[0], r"column 4 'Txt' block 0 .*TextSpan block too short"


@case
def text_block_too_long():
    m = model_of("mixed_none.idv")
    c = col_named(m, "Txt")
    c.blocks[0] += b"\x00\x00"
    return build(m)[0], r"column 4 'Txt' block 0 .*2 bytes more than"


@case
def fixed_block_too_long():
    m = model_of("mixed_none.idv")
    m.cols[0].blocks[0] += b"\x00"
    return build(m)[0], r"column 0 'Id' block 0 .*decompressed length 401 is not rows x item"


@case
def vector_block_too_long():
    m = model_of("vectors_sparse.idv")
    m.cols[0].blocks[0] += b"\x00" * 4
    return build(m)[0], r"column 0 'SparseF32' block 0 .*4 bytes more than"


@case
def boolean_block_too_long():
    m = model_of("scalars_bool.idv")
    m.cols[0].blocks[0] += b"\x00"
    return build(m)[0], r"column 0 .*block 0 .*1 bytes more than"


@case
def boolean_block_too_short():
    m = model_of("scalars_bool.idv")
    m.cols[1].blocks[0] = m.cols[1].blocks[0][:-1]
    return build(m)[0], r"column 1 .*block 0 .*too small for the block's rows"


# ---- text
def _text_case(values=None, bounds=None, raw=None, count=None):
    m = model_of("scalars_text.idv")
    m.cols[0].blocks[0] = text_payload(values or [], bounds, raw, count)
    return build(m)[0]


def _pad14(bounds):
    return bounds + [bounds[-1]] * (14 - len(bounds))


@case
def text_count_differs():
    return _text_case(["a"] * 13, count=13), r"column 0 'Txt' block 0 .*TextSpan block holds " \
                                             r"13 entries, expected 14"


@case
def text_boundary_backwards():
    return _text_case(bounds=_pad14([3, 2, 6]), raw=b"abcdef"), \
        r"column 0 'Txt' block 0 \(rows 0-13, at byte \d+\): TextSpan boundary 1 goes backwards"


@case
def text_boundary_beyond_text():
    return _text_case(bounds=_pad14([3, 9]), raw=b"abcdef"), \
        r"column 0 'Txt' block 0 .*TextSpan boundary 1 lies beyond the text"


@case
def text_boundary_splits_surrogate_pair():
    # "a\U0001F600b": boundaries in UTF-16 units are 1, 3, 4; 2 splits the pair
    return _text_case(bounds=_pad14([1, 2, 4]), raw="a\U0001F600b".encode()), \
        r"column 0 'Txt' block 0 .*TextSpan boundary 1 splits a surrogate pair"


@case
def text_bytes_beyond_last_boundary():
    return _text_case(bounds=_pad14([1, 2]), raw=b"abc"), \
        r"column 0 'Txt' block 0 .*1 bytes beyond the last boundary"


@case
def text_invalid_utf8_lead():
    return _text_case(bounds=_pad14([1, 2]), raw=b"a\xff"), \
        r"column 0 'Txt' block 0 .*invalid UTF-8 in TextSpan entry 1"


@case
def text_invalid_utf8_continuation():
    return _text_case(bounds=_pad14([1, 2]), raw=b"a\xc3A"), r"invalid UTF-8 in TextSpan entry 1"


@case
def text_invalid_utf8_surrogate_encoded():
    return _text_case(bounds=_pad14([1, 2]), raw=b"a\xed\xa0\x80"), \
        r"column 0 'Txt' block 0 .*invalid UTF-8"


@case
def text_invalid_utf8_overlong():
    return _text_case(bounds=_pad14([1, 2]), raw=b"a\xe0\x80\x80"), \
        r"column 0 'Txt' block 0 .*invalid UTF-8"


@case
def text_invalid_utf8_beyond_unicode():
    return _text_case(bounds=_pad14([1, 3]), raw=b"a\xf4\x90\x80\x80"), \
        r"column 0 'Txt' block 0 .*invalid UTF-8"


@case
def text_string_length_beyond_block():
    m = model_of("scalars_text.idv")
    p = m.cols[0].blocks[0]
    n, q = _rd_leb(p, 4 + 4 * 14)        # the string's 7-bit UTF-8 byte count
    m.cols[0].blocks[0] = p[:4 + 4 * 14] + leb(n + 1) + p[q:]
    return build(m)[0], r"column 0 'Txt' block 0 .*TextSpan block too short"


@case
def text_string_length_overlong_varint():
    m = model_of("scalars_text.idv")
    p = m.cols[0].blocks[0]
    m.cols[0].blocks[0] = p[:4 + 56] + b"\xff" * 6 + b"\x01" + p[4 + 56 + 1:]
    return build(m)[0], r"column 0 'Txt' block 0 .*TextSpan string length"


# ---- vectors
def _sparse_case(payload_fn):
    """vectors_sparse.idv column 0: Vector<Single, 10>? rebuilt with a hand-written block."""
    m = model_of("vectors_sparse.idv")
    c = m.cols[0]
    c.blocks[0] = payload_fn(m)
    return build(m)[0]


def _f32(*v):
    return struct.pack(f"<{len(v)}f", *v)


def _sparse_size(m):
    return struct.unpack_from("<i", m.cols[0].params, len(m.cols[0].params) - 4)[0]


def _sparse6(m, counts, indices, values, size=None, nidx=None, lengths=None):
    return vbuf_payload(6, _sparse_size(m) if size is None else size, counts, indices,
                        _f32(*values), lengths=lengths, nidx=nidx)


@case
def vbuffer_count_equals_length():
    return _sparse_case(lambda m: _sparse6(m, [-1, -1, -1, -1, -1, _sparse_size(m)],
                                           list(range(_sparse_size(m))),
                                           [0.0] * (6 * _sparse_size(m)))), \
        r"column 0 'SparseF32' block 0 .*invalid sparse count"


@case
def vbuffer_count_below_minus_one():
    return _sparse_case(lambda m: _sparse6(m, [-2, 0, 0, 0, 0, 0], [], [])), \
        r"column 0 'SparseF32' block 0 .*invalid sparse count"


@case
def vbuffer_index_out_of_range():
    return _sparse_case(lambda m: _sparse6(m, [1, 0, 0, 0, 0, 0], [_sparse_size(m)], [1.0])), \
        r"column 0 'SparseF32' block 0 .*sparse index out of range"


@case
def vbuffer_index_negative():
    return _sparse_case(lambda m: _sparse6(m, [0, 0, 1, 0, 0, 0], [-1], [1.0])), \
        r"column 0 'SparseF32' block 0 .*sparse index out of range"


@case
def vbuffer_indices_unsorted():
    return _sparse_case(lambda m: _sparse6(m, [0, 2, 0, 0, 0, 0], [3, 1], [1.0, 2.0])), \
        r"column 0 'SparseF32' block 0 .*unsorted sparse indices"


@case
def vbuffer_indices_duplicate():
    return _sparse_case(lambda m: _sparse6(m, [0, 0, 0, 2, 0, 0], [4, 4], [1.0, 2.0])), \
        r"column 0 'SparseF32' block 0 .*unsorted sparse indices"


@case
def vbuffer_index_count_mismatch():
    return _sparse_case(lambda m: _sparse6(m, [1, 0, 0, 0, 0, 0], [2], [1.0], nidx=2)), \
        r"column 0 'SparseF32' block 0 .*index count 2 differs from the sum of sparse counts 1"


@case
def vbuffer_fixed_size_wrong():
    return _sparse_case(lambda m: _sparse6(m, [0] * 6, [], [], size=_sparse_size(m) + 1)), \
        r"column 0 'SparseF32' block 0 .*VBuffer block size \d+ differs from the type's \d+"


@case
def vbuffer_vector_count_differs():
    return _sparse_case(lambda m: vbuf_payload(5, _sparse_size(m), [0] * 6, [], b"")), \
        r"column 0 'SparseF32' block 0 .*VBuffer block holds 5 vectors, expected 6"


@case
def vbuffer_values_short():
    return _sparse_case(lambda m: _sparse6(m, [-1, 0, 0, 0, 0, 0], [], [1.0] * 3)), \
        r"column 0 'SparseF32' block 0 .*(truncated vector values|too short)"


@case
def vbuffer_negative_length():
    m = model_of("vectors_variable.idv")
    c = m.cols[0]
    c.blocks[0] = vbuf_payload(6, 0, [-1] * 6, [], b"", lengths=[0, 0, -1, 0, 0, 0])
    return build(m)[0], rf"column 0 '{c.name}' block 0 .*negative vector length"


@case
def vbuffer_huge_sparse_row_count():
    """A sparse count near 2^31 (length 2^31-1) with no values: refused before allocating."""
    m = model_of("vectors_variable.idv")
    c = m.cols[0]
    c.blocks[0] = vbuf_payload(6, 0, [2**31 - 2] + [0] * 5, [], b"",
                               lengths=[2**31 - 1] * 6)
    return build(m)[0], rf"column 0 '{c.name}' block 0 .*(truncated|too short|index count)"


@case
def vbuffer_sparse_length_huge():
    """Six empty sparse vectors of length 2^31-1: valid, but their dense form is 8 GB per row;
    the dense read refuses it (read(sparse=True) reads it, see test_huge_sparse_vectors)."""
    m = model_of("vectors_variable.idv")
    c = m.cols[0]
    c.blocks[0] = vbuf_payload(6, 0, [0] * 6, [], b"", lengths=[2**31 - 1] * 6)
    return build(m)[0], rf"column 0 '{c.name}' blocks 0-0: the sparse vectors would densify " \
                        r"to 12884901882 implicit zeros .*sparse=True"


@case
def vbuffer_fixed_size_huge():
    """A fixed-size type of 2^31-1 slots, rows stored sparse with no values."""
    m = model_of("vectors_sparse.idv")
    c = m.cols[0]
    c.params = vbuf_params("Single", (2**31 - 1,))
    c.blocks[0] = vbuf_payload(6, 2**31 - 1, [0] * 6, [], b"")
    return build(m)[0], r"column 0 'SparseF32' blocks 0-0: the sparse vectors would densify"


@case
def metadata_sparse_length_huge():
    m = model_of("annotations_custom.idv")
    e = next(e for e in m.cols[0].meta if e.kind == "MyFloatVec")
    e.payload = vbuf_payload(1, 0, [0], [], b"", lengths=[2**31 - 1])
    return build(m)[0], r"column 0 'Feat' metadata 'MyFloatVec' .*densify"


@case
def column_count_huge():
    return _hdr_patch(fixture_bytes("mixed_none.idv"), 48, "<i", 2**31 - 1), \
        r"truncated .*column 9 name.* at byte \d+"


@case
def metadata_entry_count_huge():
    m = model_of("annotations_custom.idv")
    d, lay = build(m)
    at = lay.meta_tocs[1]
    d = d[:at] + leb(2**31 - 2) + d[at + 1:]
    d = patch(d, 24, "<q", lay.toc + 4)
    d = patch(d, 32, "<q", lay.tail + 4)
    return d, r"\(column 1 'Score' metadata\)"


# ---- DvBool, dates
@case
def dvbool_pattern_11():
    m = model_of("datatypes.idv")
    c = col_named(m, "bl")
    c.blocks[0] = struct.pack("<I", 0b11 << 6)
    return build(m)[0], r"column 0 'bl' block 0 .*DvBool value 3 has the invalid bit pattern 11"


@case
def datetime_ticks_out_of_range():
    m = model_of("scalars_datetime.idv")
    c = m.cols[0]
    c.blocks[0] = struct.pack("<q", 2**62) + c.blocks[0][8:]
    return build(m)[0], r"column 0 .*DateTime ticks 4611686018427387904 outside"


@case
def datetimeoffset_minutes_out_of_range():
    m = model_of("scalars_datetime.idv")
    c = m.cols[1]
    c.blocks[0] = struct.pack("<h", 900) + c.blocks[0][2:]
    return build(m)[0], r"column 1 .*block 0 .*DateTimeOffset offset beyond"


# ---- keys, nested codecs
@case
def key2_count_zero():
    m = model_of("keys.idv")
    m.cols[0].params = m.cols[0].params[:-8] + struct.pack("<Q", 0)
    return build(m)[0], rf"key count 0 out of range.*column 0 '{m.cols[0].name}'"


@case
def key2_count_beyond_raw_type():
    m = model_of("keys.idv")
    c = next(c for c in m.cols if c.params.startswith(triple("Byte")))
    c.params = key2_params("Byte", 256)
    return build(m)[0], rf"key count 256 out of range for Byte.*column {m.cols.index(c)} " \
                        rf"'{c.name}'"


@case
def key2_over_single():
    m = model_of("keys.idv")
    m.cols[0].params = key2_params("Single", 3)
    return build(m)[0], rf"key over Single.*column 0 '{m.cols[0].name}'"


@case
def key2_params_short():
    m = model_of("keys.idv")
    m.cols[0].params = m.cols[0].params[:-1]
    return build(m)[0], rf"truncated key count .*column 0 '{m.cols[0].name}'"


@case
def key2_nested_unknown_codec():
    m = model_of("keys.idv")
    m.cols[2].params = triple("UInt24") + struct.pack("<Q", 3)
    return build(m)[0], rf"unknown codec 'UInt24' nested in Key2.*column 2 '{m.cols[2].name}'"


@case
def vbuffer_nested_unknown_codec():
    m = model_of("vectors_sparse.idv")
    m.cols[1].params = vbuf_params("Float16", (10,))
    return build(m)[0], rf"unknown codec 'Float16' nested in VBuffer.*column 1 " \
                        rf"'{m.cols[1].name}'"


@case
def vbuffer_nested_key_count_zero():
    m = model_of("vectors_sparse.idv")
    m.cols[1].params = vbuf_params("Key2", (10,), key2_params("UInt32", 0))
    return build(m)[0], rf"key count 0 .*column 1 '{m.cols[1].name}'"


@case
def vbuffer_of_vbuffer():
    m = model_of("vectors_sparse.idv")
    m.cols[1].params = vbuf_params("VBuffer", (10,), vbuf_params("Single", (2,)))
    return build(m)[0], rf"VBuffer of VBuffer.*column 1 '{m.cols[1].name}'"


@case
def vbuffer_negative_dimension():
    m = model_of("vectors_sparse.idv")
    m.cols[1].params = vbuf_params("Single", (-4,))
    return build(m)[0], rf"negative vector dimension.*column 1 '{m.cols[1].name}'"


@case
def vbuffer_dimension_count_huge():
    m = model_of("vectors_sparse.idv")
    m.cols[1].params = triple("Single") + struct.pack("<ii", 2**30, 10)
    return build(m)[0], rf"invalid vector dimension count 1073741824.*column 1 " \
                        rf"'{m.cols[1].name}'"


# ---- metadata
@case
def metadata_entry_count_zero():
    m = model_of("annotations_custom.idv")
    d, lay = build(m)
    at = lay.meta_tocs[1]
    return patch(d, at, "<B", 0), rf"invalid metadata entry count 0 at byte {at} " \
                                  r"\(column 1 'Score' metadata\)"


@case
def metadata_entry_count_beyond_toc():
    m = model_of("annotations_custom.idv")
    d, lay = build(m)
    at = lay.meta_tocs[0]
    return patch(d, at, "<B", 99), r"\(column 0 'Feat' metadata\)"


@case
def metadata_duplicate_kind():
    m = model_of("annotations_custom.idv")
    c = m.cols[1]
    c.meta[1].kind = c.meta[0].kind
    d, lay = build(m)
    return d, rf"duplicate metadata kind '{c.meta[0].kind}' at byte \d+ \(column 1 'Score' " \
              r"metadata\)"


@case
def metadata_empty_kind():
    m = model_of("annotations_custom.idv")
    m.cols[1].meta[2].kind = ""
    return build(m)[0], r"empty metadata kind at byte \d+ \(column 1 'Score' metadata\)"


@case
def metadata_block_beyond_tail():
    m = model_of("annotations_custom.idv")
    d, lay = build(m)
    # the first entry's block offset: kind, codec triple, compression byte, then the int64
    e = m.cols[1].meta[0]
    at = lay.meta_tocs[1] + 1 + len(nstr(e.kind)) + len(triple(e.codec, e.params)) + 1
    assert struct.unpack_from("<q", d, at)[0] == lay.meta_blocks[1][0][0]
    return patch(d, at, "<q", lay.tail - 2), rf"metadata '{e.kind}' block at offset " \
                                            rf"{lay.tail - 2} of \d+ bytes lies outside"


@case
def metadata_block_size_zero():
    m = model_of("annotations_custom.idv")
    d, lay = build(m)
    e = m.cols[1].meta[0]
    at = lay.meta_tocs[1] + 1 + len(nstr(e.kind)) + len(triple(e.codec, e.params)) + 1 + 8
    return patch(d, at, "<B", 0), rf"metadata '{e.kind}' block at offset \d+ of 0 bytes"


@case
def metadata_corrupt_deflate():
    m = model_of("annotations_custom.idv")
    e = next(e for e in m.cols[0].meta if e.comp == 1)
    e.stored = b"\xff" * 8
    return build(m)[0], rf"column 0 'Feat' metadata '{e.kind}' \(block at byte \d+\): corrupt " \
                        r"compressed data"


@case
def metadata_deflate_truncated():
    m = model_of("annotations_custom.idv")
    e = next(e for e in m.cols[0].meta if e.comp == 1)
    e.stored = compress(1, e.payload)[:-2]
    return build(m)[0], rf"column 0 'Feat' metadata '{e.kind}' .*truncated"


@case
def metadata_block_too_long():
    m = model_of("annotations_custom.idv")
    e = m.cols[1].meta[3]                    # MyDouble
    assert e.codec == "Double"
    e.payload += b"\x00"
    return build(m)[0], r"column 1 'Score' metadata 'MyDouble' .*1 bytes more than"


@case
def metadata_block_too_short():
    m = model_of("annotations_custom.idv")
    e = m.cols[1].meta[3]
    e.payload = e.payload[:-1]
    return build(m)[0], r"column 1 'Score' metadata 'MyDouble' .*too short"


@case
def metadata_text_invalid_utf8():
    m = model_of("annotations_custom.idv")
    e = next(e for e in m.cols[1].meta if e.codec == "TextSpan")
    e.payload = text_payload([], [2], raw=b"\xc3(")
    return build(m)[0], rf"column 1 'Score' metadata '{e.kind}' .*invalid UTF-8"


@case
def metadata_slot_names_unsorted_sparse():
    m = model_of("annotations_custom.idv")
    e = m.cols[1].meta[-1]                  # MyKeyVec: Vector<Key<Byte, 9>, 3>
    assert e.codec == "VBuffer"
    e.payload = vbuf_payload(1, 3, [2], [2, 1], b"\x01\x02")
    return build(m)[0], r"column 1 'Score' metadata 'MyKeyVec' .*unsorted sparse indices"


@case
def metadata_nested_unknown_codec():
    m = model_of("annotations_custom.idv")
    e = m.cols[0].meta[0]
    e.params = vbuf_params("Utf7", (3,))
    return build(m)[0], rf"unknown codec 'Utf7' nested in VBuffer.*column 0 'Feat' metadata " \
                        rf"'{e.kind}'"


@case
def metadata_key_count_zero():
    m = model_of("annotations_custom.idv")
    e = next(e for e in m.cols[1].meta if e.codec == "Key2")
    e.params = key2_params("UInt32", 0)
    return build(m)[0], rf"key count 0 .*column 1 'Score' metadata '{e.kind}'"


ALL_CASES = sorted(CASES)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", ALL_CASES)
def test_crafted(name, source, tmp_path):
    data, pattern = CASES[name]()
    expect_error(data, pattern, tmp_path, source)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", [n for n in ALL_CASES if "raw_length" in n or "deflate" in n])
def test_crafted_backends(name, backend):
    """The DEFLATE errors read the same with every installed backend."""
    data, pattern = CASES[name]()
    expect_error(data, pattern, backend=backend)


HUGE_CASES = ["raw_length_huge", "raw_length_huge_vector", "vbuffer_huge_sparse_row_count",
              "row_count_huge", "vbuffer_sparse_length_huge", "vbuffer_fixed_size_huge",
              "metadata_sparse_length_huge", "column_count_huge", "metadata_entry_count_huge"]

ISOLATED_SCRIPT = """
import resource, sys, time, tracemalloc, warnings
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))   # a huge allocation fails here
sys.path.insert(0, sys.argv[1])
import test_corrupt as T, idv
for name in sys.argv[2:]:
    data, pattern = T.CASES[name]()
    tracemalloc.start()
    t = time.perf_counter()
    try:
        T.read_quiet(data, threads=1)
        outcome = "no error"
    except idv.IdvFormatError as e:
        outcome = "IdvFormatError: " + str(e)
    except BaseException as e:
        outcome = type(e).__name__ + ": " + str(e)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(repr((name, outcome, time.perf_counter() - t, peak)), flush=True)
"""


def test_huge_lengths_do_not_allocate_or_hang(tmp_path):
    """Lengths and counts claiming gigabytes are refused quickly without allocating them. Run in
    a child process with a 3 GB address-space limit and a timeout, so a regression fails the
    test instead of hanging it or exhausting the machine's memory."""
    if not FIXTURES:
        pytest.skip(f"shared fixtures missing under {SHARED} (set IDV_SHARED)")
    script = tmp_path / "huge.py"
    script.write_text(ISOLATED_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(REPO), IDV_SHARED=str(SHARED))
    try:
        r = subprocess.run([sys.executable, str(script), str(Path(__file__).parent),
                            *HUGE_CASES], capture_output=True, text=True, env=env, timeout=120)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"hang: no answer in 120 s; got so far:\n{e.stdout}")
    results = [ast.literal_eval(line) for line in r.stdout.splitlines() if line.startswith("(")]
    assert [x[0] for x in results] == HUGE_CASES, r.stderr[-3000:]
    for name, outcome, seconds, peak in results:
        assert outcome.startswith("IdvFormatError: "), (name, outcome)
        assert re.search(CASES[name]()[1], outcome), (name, outcome)
        assert seconds < 5, (name, seconds)
        assert peak < 32 << 20, (name, f"peak {peak} bytes")


AT_OPEN = {"bad_magic", "bad_magic_last_byte", "bad_tail_signature", "codec_name_empty",
           "codec_params_beyond_toc", "column_count_beyond_toc", "column_count_huge",
           "column_name_empty", "column_name_invalid_utf8", "compatible_newer_than_version",
           "compatible_version_too_new", "compatible_version_too_old",
           "key2_count_beyond_raw_type", "key2_count_zero", "key2_nested_unknown_codec",
           "key2_over_single", "key2_params_short", "leb128_overlong",
           "leb128_tenth_byte_too_big", "lookup_offset_beyond_file", "lookup_offset_in_header",
           "lookup_table_overlaps_tail", "metadata_offset_beyond_file", "negative_column_count",
           "negative_row_count", "row_count_huge", "rows_per_block_differs",
           "rows_per_block_differs_without_rows",
           "rows_per_block_too_big", "rows_per_block_zero_with_rows", "simple_codec_with_params",
           "tail_moved_earlier", "tail_offset_beyond_file", "tail_offset_negative",
           "toc_offset_beyond_tail", "toc_offset_inside_header", "vbuffer_dimension_count_huge",
           "vbuffer_negative_dimension", "vbuffer_nested_key_count_zero",
           "vbuffer_nested_unknown_codec", "vbuffer_of_vbuffer", "version_major_part_named",
           "version_too_old"}


@pytest.mark.parametrize("name", sorted(AT_OPEN))
def test_header_toc_and_codec_errors_at_open(name):
    """Header, TOC and codec-parameter damage (a nested unknown codec included) fails in
    idv.open itself, as ML.NET's loader does; block and metadata damage when read."""
    data, pattern = CASES[name]()
    with pytest.raises(idv.IdvFormatError, match=pattern) as ei:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", idv.IdvWarning)
            idv.open(data)
    assert type(ei.value) is idv.IdvFormatError


# ---- accepted variants (not errors)

@pytest.mark.parametrize("name", ["vbuffer_sparse_length_huge", "vbuffer_fixed_size_huge"])
def test_huge_sparse_vectors_read_sparse(name):
    """Vectors of 2^31-1 slots are valid: read(sparse=True) gives them without densifying."""
    data, _ = CASES[name]()
    with idv.open(data) as f:
        m = f[0].read(sparse=True)
        assert m.shape == (6, 2**31 - 1) and m.nnz == 0

def test_leb128_non_minimal_is_accepted():
    """ML.NET reads up to 10 LEB128 bytes, minimal or not: a padded rows-per-block reads."""
    m = model_of("scalars_text.idv")
    d, lay = build(m)
    at = lay.entries[0]["rpb"]
    padded = d[:at] + b"\x8e" + b"\x80" * 8 + b"\x00" + d[at + 1:]
    padded = patch(padded, 32, "<q", lay.tail + 9)
    padded = patch(padded, lay.entries[1]["lookup"] + 9, "<q", lay.lookups[1])
    assert same(read_quiet(padded), read_quiet(d))


def test_rows_per_block_zero_without_rows():
    m = model_of("schema-codec-test.idv")
    assert m.rows == 0
    for c in m.cols:
        c.rpb = 0
    d, _ = build(m)
    with idv.open(d) as f:
        assert f.num_rows == 0 and all(len(c.read()) == 0 for c in f.columns)


@pytest.mark.parametrize("version", [V[6], V[9], 0x0002000000000000])
@pytest.mark.parametrize("compat", [V[4], V[5], V[6]])
def test_readable_versions(version, compat):
    """Compatible version 1.1.1.4-1.1.1.6 reads, whatever the (newer) version."""
    d = fixture_bytes("scalars_numeric.idv")
    d2 = _hdr_patch(_hdr_patch(d, 8, "<Q", version), 16, "<Q", compat)
    assert same(read_quiet(d2), read_quiet(d))


@pytest.mark.parametrize("source", SOURCES)
def test_trailing_bytes_after_tail_allowed(source, tmp_path):
    d = fixture_bytes("mixed_smallblocks_deflate.idv")
    for extra in (b"\x00", b"junk" * 100, struct.pack("<Q", TAIL_SIG)):
        assert same(read_quiet(as_source(source, d + extra, tmp_path)), read_quiet(d))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("source", SOURCES)
def test_compression_kind_2_zlib_is_read(source, backend, tmp_path):
    """Kind 2 (zlib-wrapped DEFLATE) reads, for blocks and metadata."""
    for name in ("mixed_smallblocks_deflate.idv", "annotations_custom.idv"):
        m = model_of(name)
        for c in m.cols:
            c.comp = 2
            for e in c.meta:
                e.comp = 2
        d, _ = build(m)
        with idv.open(as_source(source, d, tmp_path)) as f:
            assert all(c.compression == "Zlib" for c in f.columns)
        assert same(read_quiet(as_source(source, d, tmp_path), backend=backend),
                    read_quiet(fixture_bytes(name)))


def test_compression_kind_2_bad_checksum():
    m = model_of("scalars_text.idv")
    m.cols[0].comp = 2
    z = bytearray(compress(2, m.cols[0].blocks[0]))
    z[-1] ^= 1                               # Adler-32
    m.cols[0].stored[0] = bytes(z)
    expect_error(build(m)[0], r"column 0 'Txt' block 0 .*corrupt compressed data")


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("what", ["codec", "compression", "both"])
def test_unknown_top_level_codec(what, source, tmp_path):
    """Listed, unreadable with a warning naming it; the other columns read as before."""
    m = model_of("scalars_numeric.idv")
    c = m.cols[3]
    if what in ("codec", "both"):
        c.codec, c.params = "Float8", b"\x01\x02"
    if what in ("compression", "both"):
        c.comp, c.stored = 7, {0: b"\x00" * 5}
    d, _ = build(m)
    with pytest.warns(idv.IdvWarning, match=rf"column 3 '{c.name}'"):
        f = idv.open(as_source(source, d, tmp_path))
    with f:
        assert f.column_names == [x.name for x in m.cols]
        col = f[3]
        assert not col.readable
        assert (col.type is None) == (what != "compression")
        assert str(f.schema)
        with pytest.raises(idv.UnsupportedCodecError, match=rf"column 3 '{c.name}'"):
            col.read()
        with pytest.raises(idv.UnsupportedCodecError):
            col[0:2]
        if what != "compression":
            assert "Float8" in str(f.schema)
        got = f.read()
        assert c.name not in got
        want = read_quiet(fixture_bytes("scalars_numeric.idv"))
        for i in range(10):
            if i != 3:
                assert same(got[m.cols[i].name], want[i][0])


def test_unknown_metadata_codec_is_skipped():
    m = model_of("annotations_custom.idv")
    m.cols[1].meta[3].codec = "Decimal"
    m.cols[1].meta[4].comp = 9
    d, _ = build(m)
    with idv.open(d) as f:
        with pytest.warns(idv.IdvWarning) as record:
            meta = f[1].metadata
        messages = [str(w.message) for w in record]
        assert any("column 1 'Score' metadata 'MyDouble'" in w and "Decimal" in w
                   for w in messages), messages
        assert any("column 1 'Score' metadata 'MyI64'" in w and "compression 9" in w
                   for w in messages), messages
        assert "MyDouble" not in meta and "MyI64" not in meta
        assert f[1].metadata_types["MyDouble"] is None
        assert same(f[1].read(), read_quiet(fixture_bytes("annotations_custom.idv"))[1][0])


@pytest.mark.parametrize("source", SOURCES)
def test_length_prefixed_idv(source, tmp_path):
    """An IDV behind an int32 length prefix (model zips): the prefix bounds the stream the same
    way for every source; a prefix cutting the IDV short is a truncated file."""
    d = fixture_bytes("scalars_text.idv")
    want = read_quiet(d)
    for prefix, extra in ((len(d), b""), (len(d), b"more model bytes")):
        blob = struct.pack("<i", prefix) + d + extra
        assert same(read_quiet(as_source(source, blob, tmp_path)), want)
    for prefix in (len(d) - 1, len(d) // 2):
        blob = struct.pack("<i", prefix) + d
        expect_error(blob, rf"tail offset \d+ .*outside the file of {prefix} bytes", tmp_path,
                     source)
    for prefix in (0, -1, len(d) + 1):       # not a plausible prefix: not skipped
        blob = struct.pack("<i", prefix) + d
        expect_error(blob, r"bad signature .* at byte 0", tmp_path, source)


def test_messages_name_the_place_for_file_objects():
    """The error raised for a file-object source names the same place as for bytes."""
    for name in ("corrupt_deflate", "text_boundary_backwards", "lookup_offset_beyond_file",
                 "metadata_duplicate_kind", "bad_tail_signature"):
        data, pattern = CASES[name]()
        assert expect_error(io.BytesIO(data), pattern) == expect_error(data, pattern)


# ============================================================================ 4. leaks

TEXT_HEAVY = ["scalars_text.idv", "pipeline_featurize_text.idv", "pipeline_multiclass_scored.idv",
              "datatypes.idv", "mixed_smallblocks_deflate.idv", "vectors_fixed.idv"]


def _rss():
    """Resident memory in bytes (Linux), else None."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _grows(fn, rounds=5):
    """(Python memory blocks, gc objects, resident bytes) kept after rounds of fn(), counted
    from the end of the first round (warm-up: caches, the thread pool, numpy's free lists)."""
    def measure():
        gc.collect()
        return sys.getallocatedblocks(), len(gc.get_objects()), _rss()
    fn()
    before = measure()
    for _ in range(rounds):
        fn()
    after = measure()
    rss = None if before[2] is None else after[2] - before[2]
    return after[0] - before[0], after[1] - before[1], rss


def test_text_decoders_do_not_leak():
    """Reading text-heavy files again and again keeps no Python objects (a leaked reference to
    each decoded str would show as thousands of blocks)."""
    datas = [fixture_bytes(n) for n in TEXT_HEAVY]

    def once():
        for _ in range(10):
            for d in datas:
                read_quiet(d, threads=1, slices=False)
    blocks, objs, _ = _grows(once)
    assert blocks < 300, f"{blocks} memory blocks kept"
    assert objs < 100, f"{objs} objects kept"


def test_big_text_column_does_not_leak():
    """200,000 strings per read: a leaked str per row, or the C boundary array of each block,
    would add megabytes per read."""
    data = fixture_bytes("multiblock_200k_deflate.idv")

    def once():
        for _ in range(3):
            with idv.open(data) as f:
                f["Name"].read()
    blocks, objs, rss = _grows(once, rounds=4)
    assert blocks < 300, f"{blocks} memory blocks kept"
    assert objs < 100, f"{objs} objects kept"
    if rss is not None:     # 12 reads: a leak of 1.6 MB per read would be ~20 MB
        assert rss < 6 << 20, f"resident memory grew by {rss} bytes"


def test_failing_decoders_do_not_leak():
    """The error paths free what they allocated."""
    cases = [CASES[n]()[0] for n in ("text_boundary_backwards", "text_invalid_utf8_lead",
                                     "text_invalid_utf8_surrogate_encoded", "corrupt_deflate",
                                     "vbuffer_indices_unsorted", "metadata_text_invalid_utf8",
                                     "dvbool_pattern_11", "key2_count_zero")]

    def once():
        for _ in range(20):
            for d in cases:
                try:
                    read_quiet(d, threads=1, slices=False)
                except idv.IdvFormatError:
                    pass
    blocks, objs, _ = _grows(once)
    assert blocks < 300, f"{blocks} memory blocks kept"
    assert objs < 100, f"{objs} objects kept"


VALGRIND_SCRIPT = """
import sys, warnings, idv
for p in sys.argv[1:]:
    data = open(p, "rb").read()
    for n in (len(data), len(data) - 1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with idv.open(data[:n], threads=2) as f:
                    for c in f.columns:
                        c.metadata
                        if c.readable:
                            c.read()
        except idv.IdvFormatError:
            pass
print("ok")
"""

VALGRIND_CASES = ["text_boundary_backwards", "text_boundary_splits_surrogate_pair",
                  "text_invalid_utf8_continuation", "text_string_length_beyond_block",
                  "vbuffer_index_out_of_range", "vbuffer_values_short", "corrupt_deflate",
                  "raw_length_one_short_text", "raw_length_one_long_text", "dvbool_pattern_11",
                  "metadata_deflate_truncated", "leb128_overlong", "key2_params_short"]


def valgrind_errors_in_idv(stderr: str):
    """Memcheck's error reports with a frame in one of idv's extension modules (CPython,
    numpy and the dynamic loader have known noise without suppression files)."""
    blocks, cur = [], []
    for line in stderr.splitlines():
        line = re.sub(r"^==\d+== ?", "", line)
        if line.strip():
            cur.append(line)
        elif cur:
            blocks.append(cur)
            cur = []
    blocks.append(cur)
    ours = re.compile(r"idv/_\w+\.cpython|\b_(codecs|cursor|toc|lookup|header|compression)\.c:")
    return ["\n".join(b) for b in blocks
            if b and re.search(r"Invalid (read|write|free)|uninitialised|overlap|Mismatched", b[0])
            and any(ours.search(x) for x in b)]


@pytest.mark.skipif(os.environ.get("IDV_VALGRIND") == "0", reason="IDV_VALGRIND=0")
def test_valgrind_read_loop(tmp_path):
    """Valid and corrupt files read under memcheck: no invalid access inside idv's modules."""
    import shutil
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind not installed")
    if not FIXTURES:
        pytest.skip(f"shared fixtures missing under {SHARED} (set IDV_SHARED)")
    paths = [str(SAMPLE / n) for n in ("scalars_text.idv", "vectors_sparse.idv",
                                        "mixed_smallblocks_none.idv", "annotations_custom.idv")]
    for name in VALGRIND_CASES:
        p = tmp_path / f"{name}.idv"
        p.write_bytes(CASES[name]()[0])
        paths.append(str(p))
    script = tmp_path / "loop.py"
    script.write_text(VALGRIND_SCRIPT)
    env = dict(os.environ, PYTHONMALLOC="malloc", PYTHONPATH=str(REPO))
    r = subprocess.run(["valgrind", "--error-limit=no", sys.executable, str(script), *paths],
                       capture_output=True, text=True, env=env, timeout=1200)
    assert "ok" in r.stdout, r.stderr[-3000:]
    errors = valgrind_errors_in_idv(r.stderr)
    assert not errors, "\n\n".join(errors[:5])
