"""An independent little parser and assembler of the .idv format, written from the format
reference (shared/spec/mlnet-idv-codecs.md), so crafted files do not depend on the code under
test.

``parse`` turns a file into a ``Model`` (header fields, columns with their decompressed block
and metadata payloads); ``build`` lays a Model out again the way ML.NET's BinarySaver does and
returns where everything went (``Layout``), so a test can change one thing and name its byte
offset. The small encoders (``leb``, ``nstr``, ``text_payload``, ``vbuf_payload``, ...) write
the pieces by hand.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

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


def read_leb(d, p):
    v = s = 0
    while True:
        b = d[p]
        p += 1
        v |= (b & 0x7F) << s
        s += 7
        if not b & 0x80:
            return v, p


def read_str(d, p):
    n, p = read_leb(d, p)
    return d[p:p + n].decode("utf-8"), p + n


def read_triple(d, p):
    """A codec: (load name, parameter bytes, position after them); the inverse of triple()."""
    name, p = read_str(d, p)
    n, p = read_leb(d, p)
    return name, bytes(d[p:p + n]), p + n


def parse(data: bytes) -> Model:
    """A fixture into a Model with decompressed payloads (inverse of build)."""
    sig, ver, compat, toc, tail, rows, ncol = HDR.unpack_from(data, 0)
    assert sig == SIG
    p, cols = toc, []
    for _ in range(ncol):
        name, p = read_str(data, p)
        codec, params, p = read_triple(data, p)
        comp = data[p]
        rpb, p = read_leb(data, p + 1)
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
            cnt, q = read_leb(data, q)
            for _ in range(cnt):
                kind, q = read_str(data, q)
                mc, mp, q = read_triple(data, q)
                mk = data[q]
                (mo,), q = struct.unpack_from("<q", data, q + 1), q + 9
                sz, q = read_leb(data, q)
                metas.append(Meta(kind, mc, mp, mk, decompress(mk, data[mo:mo + sz])))
        cols.append(Col(name, codec, params, comp, rpb, blocks, metas))
    return Model(rows, cols, ver, compat)


def tail_offset(data: bytes) -> int:
    """The tail offset the header gives."""
    return HDR.unpack_from(data, 0)[4]


def col_named(m: Model, name: str) -> Col:
    return next(c for c in m.cols if c.name == name)


def patch(data: bytes, offset: int, fmt: str, *values) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, offset, *values)
    return bytes(b)


def respell_rows_per_block(data: bytes, lay: Layout, spelled: bytes):
    """A built file whose column 0 has a one-byte rows-per-block LEB128, with that byte written
    as `spelled` instead (padded, overlong, ...): the tail offset and column 1's lookup offset
    move along. Returns (the file, the byte offset of the rows per block)."""
    at = lay.entries[0]["rpb"]
    moved = len(spelled) - 1
    out = data[:at] + spelled + data[at + 1:]
    out = patch(out, 32, "<q", lay.tail + moved)
    out = patch(out, lay.entries[1]["lookup"] + moved, "<q", lay.lookups[1])
    return out, at


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


def key_above_count(path):
    """A file whose Key<UInt32, 3> K (KeyValues a, b, c) holds raw keys 7, 3, 0, 1: a value
    above the count, which ML.NET writes and reads as it is (the writer refuses one, so it is
    patched into the block's payload)."""
    import numpy as np
    import idv
    idv.write(path, {"K": np.array([1, 3, 0, 1], np.uint32)},
              types={"K": idv.Key(idv.UInt32, 3)}, metadata={"K": {"KeyValues": ["a", "b", "c"]}},
              checksums=False, statistics=False)
    model = parse(path.read_bytes())
    col = col_named(model, "K")
    col.blocks = [struct.pack("<I", 7) + col.blocks[0][4:]] + col.blocks[1:]
    path.write_bytes(build(model)[0])
    return path
