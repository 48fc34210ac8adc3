"""Crafted corrupt files, one function per rule of the reader's contract for bad input.

Each case, registered with ``@case``, returns ``(bytes, regex)``: a file built from a real
ML.NET-written fixture of the shared folder (edited at offsets craft.py finds, or re-assembled
by ``craft.build`` after changing one thing), and the pattern the ``IdvFormatError`` message
must match. ``fixture_bytes`` skips the test when the shared folder is missing.
"""
from __future__ import annotations

import struct

import numpy as np
import pytest

from craft import (SIG, V, build, col_named, compress, key2_params, leb, nstr, parse, patch,
                   read_leb, respell_rows_per_block, tail_offset, text_payload, triple,
                   vbuf_params, vbuf_payload)
from reference import MLNET_FILES_DIR, SAMPLE_DIR, SET_SHARED, shared_dir

# the sample fixtures, then ML.NET's own files (datatypes.idv, ...)
FIXTURE_FILES = (sorted(SAMPLE_DIR.glob("*.idv")) if SAMPLE_DIR.is_dir() else []) + \
    (sorted(MLNET_FILES_DIR.glob("*.idv")) if MLNET_FILES_DIR.is_dir() else [])
MISSING = f"shared fixtures missing under {shared_dir()} ({SET_SHARED})"

_CACHE: dict = {}


def fixture_bytes(name: str) -> bytes:
    """The bytes of a shared fixture (by file name); skips when the shared folder is missing."""
    if name not in _CACHE:
        for p in FIXTURE_FILES:
            if p.name == name:
                _CACHE[name] = p.read_bytes()
                break
        else:
            pytest.skip(f"fixture {name} not found: {MISSING}")
    return _CACHE[name]


def fixture_file_params():
    """Every fixture file as a parameter named by its file name."""
    if not FIXTURE_FILES:
        return [pytest.param(None, marks=pytest.mark.skip(reason=MISSING), id="missing")]
    return [pytest.param(p.name, id=p.name) for p in FIXTURE_FILES]


def model_of(name: str):
    return parse(fixture_bytes(name))


def first_block_edited(name, column, edit):
    """Fixture `name` re-assembled with block 0 of `column` (an index or a name) replaced by
    edit(its decompressed payload)."""
    m = model_of(name)
    c = col_named(m, column) if isinstance(column, str) else m.cols[column]
    c.blocks[0] = edit(c.blocks[0])
    return build(m)[0]


CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


@case
def bad_magic():
    return patch(fixture_bytes("scalars_numeric.idv"), 0, "<Q", 0x1122334455667788), \
        r"byte 0: not an \.idv file: bad signature 0x1122334455667788"


@case
def bad_magic_last_byte():
    d = bytearray(fixture_bytes("scalars_numeric.idv"))
    d[7] = 1
    return bytes(d), r"byte 0: not an \.idv file: bad signature "


@case
def compatible_version_too_new():
    d = fixture_bytes("scalars_numeric.idv")
    d = patch(patch(d, 8, "<Q", V[7]), 16, "<Q", V[7])
    return d, r"byte 16: unsupported version 1\.1\.1\.7 \(compatible version 1\.1\.1\.7\).*too new"


@case
def compatible_version_too_old():
    d = fixture_bytes("datatypes.idv")          # the real 1.1.1.5 file
    return patch(d, 16, "<Q", V[3]), r"byte 16: unsupported .*compatible version 1\.1\.1\.3\).*too old"


@case
def version_too_old():
    d = patch(fixture_bytes("datatypes.idv"), 8, "<Q", V[1])
    d = patch(d, 16, "<Q", V[1])
    return d, r"byte 8: unsupported version 1\.1\.1\.1 .*too old"


@case
def compatible_newer_than_version():
    d = patch(fixture_bytes("scalars_numeric.idv"), 8, "<Q", V[4])
    return d, r"byte 16: unsupported version 1\.1\.1\.4 \(compatible version 1\.1\.1\.6\): compatible " \
              r"version is newer"


@case
def version_major_part_named():
    d = patch(fixture_bytes("scalars_numeric.idv"), 16, "<Q", 0x0002000000000000)
    d = patch(d, 8, "<Q", 0x0002000000000000)
    return d, r"version 2\.0\.0\.0"


@case
def negative_row_count():
    return patch(fixture_bytes("scalars_numeric.idv"), 40, "<q", -5), \
        r"byte 40: negative row count -5 "


@case
def negative_column_count():
    return patch(fixture_bytes("scalars_numeric.idv"), 48, "<i", -1), \
        r"byte 48: negative column count -1 "


@case
def column_count_beyond_toc():
    d = fixture_bytes("scalars_numeric.idv")
    return patch(d, 48, "<i", 11), r"column 10 \(byte \d+\): truncated column name"


@case
def row_count_huge():
    return patch(fixture_bytes("scalars_numeric.idv"), 40, "<q", 2**62), \
        r"column 0 'F32'.*lookup table of \d+ blocks at offset \d+ lies outside"


@case
def toc_offset_beyond_tail():
    d = fixture_bytes("scalars_numeric.idv")
    return patch(d, 24, "<q", tail_offset(d) + 1), \
        r"byte 24: table of contents offset \d+ in the header is outside"


@case
def toc_offset_inside_header():
    return patch(fixture_bytes("scalars_numeric.idv"), 24, "<q", 100), \
        r"byte 24: table of contents offset 100 "


@case
def tail_offset_beyond_file():
    d = fixture_bytes("scalars_numeric.idv")
    return patch(d, 32, "<q", 10**12), r"byte 32: tail offset 1000000000000 in the header " \
        rf"is outside the file of {len(d)} bytes"


@case
def tail_offset_negative():
    return patch(fixture_bytes("scalars_numeric.idv"), 32, "<q", -1), \
        r"byte 32: tail offset -1 "


@case
def bad_tail_signature():
    d = fixture_bytes("scalars_numeric.idv")
    t = tail_offset(d)
    return patch(d, t, "<Q", SIG), rf"byte {t}: bad tail signature "


@case
def tail_moved_earlier():
    d = fixture_bytes("scalars_numeric.idv")
    return patch(d, 32, "<q", tail_offset(d) - 8), r"bad tail signature"


# ---- TOC
@case
def column_name_invalid_utf8():
    m = model_of("scalars_text.idv")
    m.cols[1].raw_name = b"In\xfft"
    d, lay = build(m)
    return d, rf"column 1 \(byte {lay.entries[1]['start']}\): invalid UTF-8 in column name"


@case
def column_name_empty():
    m = model_of("scalars_text.idv")
    m.cols[1].name = ""
    d, lay = build(m)
    return d, rf"column 1 \(byte {lay.entries[1]['start']}\): empty column name"


@case
def codec_name_empty():
    m = model_of("scalars_text.idv")
    m.cols[1].codec = ""
    return build(m)[0], r"column 1 'Id' \(byte \d+\): empty codec name"


@case
def codec_params_beyond_toc():
    m = model_of("scalars_text.idv")
    d, lay = build(m)
    d = patch(d, lay.entries[1]["params_len"], "<B", 0x7F)
    return d, rf"column 1 'Id' \(byte {lay.entries[1]['params_len']}\): codec 'Int32' " \
              r"declares 127 parameter bytes"


@case
def simple_codec_with_params():
    m = model_of("scalars_text.idv")
    m.cols[1].params = b"\x00"
    return build(m)[0], r"column 1 'Id' .*: codec 'Int32' has 1 unused parameter bytes"


@case
def leb128_overlong():
    """11-byte LEB128 rows-per-block (ML.NET reads at most 10)."""
    m = model_of("scalars_text.idv")
    d, lay = build(m)
    assert d[lay.entries[0]["rpb"]] == 14 and m.rows == 14
    bad, at = respell_rows_per_block(d, lay, b"\x8e" + b"\x80" * 9 + b"\x00")
    return bad, rf"column 0 'Txt' \(byte {at}\): rows per block overflows 64 bits"


@case
def leb128_tenth_byte_too_big():
    bad, at = respell_rows_per_block(*build(model_of("scalars_text.idv")),
                                     b"\x8e" + b"\x80" * 8 + b"\x02")
    return bad, rf"\(byte {at}\): rows per block overflows 64 bits"


@case
def rows_per_block_zero_with_rows():
    m = model_of("scalars_text.idv")
    for c in m.cols:
        c.rpb = 0
    d, lay = build(m)
    return d, rf"column 0 'Txt' \(byte {lay.entries[0]['start']}\): invalid rows per block 0"


@case
def rows_per_block_too_big():
    m = model_of("scalars_text.idv")
    for c in m.cols:
        c.rpb = 2**31
    return build(m)[0], r"column 0 'Txt' \(byte \d+\): invalid rows per block 2147483648"


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
    return build(m)[0], r"column 3 'B' \(byte \d+\): rows per block 10 differs from the " \
                        r"first column's 7"


@case
def rows_per_block_differs_without_rows():
    """ML.NET refuses differing rows per block even in a file without rows."""
    m = model_of("schema-codec-test.idv")
    m.cols[2].rpb = 2
    return build(m)[0], rf"column 2 '{m.cols[2].name}' \(byte \d+\): rows per block 2 " \
                        r"differs from the first column's 1"


@case
def lookup_offset_beyond_file():
    m = model_of("scalars_text.idv")
    d, lay = build(m)
    return patch(d, lay.entries[1]["lookup"], "<q", 10**9), \
        rf"column 1 'Id' \(byte {lay.entries[1]['start']}\): lookup table of 1 blocks at " \
        rf"offset 1000000000 lies outside \[256, {lay.tail}\]"


@case
def lookup_offset_in_header():
    m = model_of("scalars_text.idv")
    d, lay = build(m)
    return patch(d, lay.entries[0]["lookup"], "<q", 8), r"column 0 'Txt' \(byte \d+\): lookup " \
        r"table .* 8 lies outside"


@case
def lookup_table_overlaps_tail():
    m = model_of("mixed_smallblocks_deflate.idv")
    d, lay = build(m)
    return patch(d, lay.entries[2]["lookup"], "<q", lay.tail - 16 * 14), \
        r"column 2 'F64' \(byte \d+\): lookup table of 15 blocks"


@case
def metadata_offset_beyond_file():
    m = model_of("annotations_custom.idv")
    d, lay = build(m)
    return patch(d, lay.entries[1]["meta"], "<q", lay.tail + 1), \
        rf"column 1 'Score' \(byte \d+\): metadata offset {lay.tail + 1} lies outside"


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
    return d, rf"column 4 'Txt' block 3 \(byte {lay.lookups[4] + 48}\): block at offset " \
              rf"10000000 .* lies outside \[256, {lay.tail}\]"


@case
def block_offset_in_header():
    d, lay, _ = _lookup_patch("scalars_numeric.idv", 2, 0, 0, 0)
    return d, r"column 2 'I8' block 0 \(byte \d+\): block at offset 0 "


@case
def block_disk_length_beyond_file():
    d, lay, _ = _lookup_patch("scalars_text.idv", 0, 0, 8, 10**6)
    return d, r"column 0 'Txt' block 0 .* 1000000 bytes on disk .* lies outside"


@case
def block_negative_lengths():
    d, lay, _ = _lookup_patch("scalars_text.idv", 0, 0, 12, -3)
    return d, r"column 0 'Txt' block 0 .*-3 decompressed .*negative"


@case
def raw_length_wrong_fixed_width():
    d, lay, _ = _lookup_patch("mixed_smallblocks_deflate.idv", 0, 2, 12, 7 * 4 + 4)
    return d, rf"column 0 'Id' block 2 \(byte {lay.lookups[0] + 32}\): decompressed length 32 " \
              r"is not rows x item size"


@case
def raw_length_one_short_text():
    d, lay, m = _lookup_patch("mixed_smallblocks_deflate.idv", 4, 5, 12,
                              len(model_of("mixed_smallblocks_deflate.idv").cols[4].blocks[5])
                              - 1)
    o = lay.blocks[4][5][0]
    return d, rf"column 4 'Txt' block 5 \(byte {o}\): decompresses to more bytes than the " \
              r"lookup table says"


@case
def raw_length_one_long_text():
    m = model_of("mixed_smallblocks_deflate.idv")
    d, lay, _ = _lookup_patch("mixed_smallblocks_deflate.idv", 4, 5, 12,
                              len(m.cols[4].blocks[5]) + 1)
    o = lay.blocks[4][5][0]
    return d, rf"column 4 'Txt' block 5 \(byte {o}\): decompresses to fewer bytes"


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
    return bytes(b), rf"column 4 'Txt' block 6 \(byte {o}\): corrupt compressed data"


@case
def corrupt_deflate_fixed_width():
    m = model_of("mixed_smallblocks_deflate.idv")
    d, lay = build(m)
    o, disk, _ = lay.blocks[2][9]
    b = bytearray(d)
    b[o:o + disk] = b"\xff" * disk
    return bytes(b), rf"column 2 'F64' block 9 \(byte {o}\): corrupt compressed data"


@case
def deflate_stream_truncated():
    """The block's disk length cut short: the stream ends early."""
    m = model_of("mixed_smallblocks_deflate.idv")
    d, lay = build(m)
    at = lay.lookups[4] + 16 * 2 + 8
    disk = struct.unpack_from("<i", d, at)[0]
    return patch(d, at, "<i", disk - 3), r"column 4 'Txt' block 2 \(byte \d+\): .*(fewer|corrupt)"


@case
def text_block_too_short():
    return first_block_edited("mixed_none.idv", "Txt", lambda p: p[:-1]), \
        r"column 4 'Txt' block 0 .*TextSpan block too short"


@case
def text_block_too_long():
    return first_block_edited("mixed_none.idv", "Txt", lambda p: p + b"\x00\x00"), \
        r"column 4 'Txt' block 0 .*2 bytes more than"


@case
def fixed_block_too_long():
    return first_block_edited("mixed_none.idv", 0, lambda p: p + b"\x00"), \
        r"column 0 'Id' block 0 .*decompressed length 401 is not rows x item"


@case
def vector_block_too_long():
    return first_block_edited("vectors_sparse.idv", 0, lambda p: p + b"\x00" * 4), \
        r"column 0 'SparseF32' block 0 .*4 bytes more than"


@case
def boolean_block_too_long():
    return first_block_edited("scalars_bool.idv", 0, lambda p: p + b"\x00"), \
        r"column 0 .*block 0 .*1 bytes more than"


@case
def boolean_block_too_short():
    return first_block_edited("scalars_bool.idv", 1, lambda p: p[:-1]), \
        r"column 1 .*block 0 .*too small for the block's rows"


# ---- text
def _text_case(values=None, bounds=None, raw=None, count=None):
    return first_block_edited("scalars_text.idv", 0,
                              lambda p: text_payload(values or [], bounds, raw, count))


def _pad14(bounds):
    return bounds + [bounds[-1]] * (14 - len(bounds))


@case
def text_count_differs():
    return _text_case(["a"] * 13, count=13), r"column 0 'Txt' block 0 .*TextSpan block holds " \
                                             r"13 entries, expected 14"


@case
def text_boundary_backwards():
    return _text_case(bounds=_pad14([3, 2, 6]), raw=b"abcdef"), \
        r"column 0 'Txt' block 0 \(byte 256\): TextSpan boundary 1 goes backwards"


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
    n, q = read_leb(p, 4 + 4 * 14)        # the string's 7-bit UTF-8 byte count
    m.cols[0].blocks[0] = p[:4 + 4 * 14] + leb(n + 1) + p[q:]
    return build(m)[0], r"column 0 'Txt' block 0 .*TextSpan block too short"


@case
def text_string_length_overlong_varint():
    m = model_of("scalars_text.idv")
    p = m.cols[0].blocks[0]
    m.cols[0].blocks[0] = p[:4 + 56] + b"\xff" * 6 + b"\x01" + p[4 + 56 + 1:]
    return build(m)[0], r"column 0 'Txt' block 0 .*TextSpan string length"


def _text_vector_case(bounds, raw):
    """vectors_fixed.idv's VecText (Vector<Text, 2>, dense rows), its first block's text items
    replaced by a hand-made TextSpan block."""
    def edit(p):
        n = struct.unpack_from("<i", p, 0)[0]
        return vbuf_payload(n, 2, [-1] * n, [], text_payload([], bounds + [bounds[-1]] *
                                                             (2 * n - len(bounds)), raw))
    return first_block_edited("vectors_fixed.idv", "VecText", edit)


@case
def text_vector_invalid_utf8():
    return _text_vector_case([1, 2], b"a\xff"), \
        r"column 5 'VecText' block 0 .*invalid UTF-8 in TextSpan entry 1"


@case
def text_vector_boundary_beyond_text():
    return _text_vector_case([1, 9], b"abc"), \
        r"column 5 'VecText' block 0 .*TextSpan boundary 1 lies beyond the text"


@case
def text_vector_bytes_beyond_last_boundary():
    return _text_vector_case([1, 2], b"abcd"), \
        r"column 5 'VecText' block 0 .*TextSpan text has 2 bytes beyond the last boundary"


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
    return build(m)[0], rf"column 0 '{c.name}' block 0 \(byte \d+\): the sparse vectors would " \
                        r"densify to 12884901882 implicit zeros .*sparse=True"


def fixed_size_huge():
    """Not damage: a fixed-size type of 2^31-1 slots, rows stored sparse with no values (a
    valid file, whose dense read is a question for the memory limit: its size is the
    type's)."""
    m = model_of("vectors_sparse.idv")
    c = m.cols[0]
    c.params = vbuf_params("Single", (2**31 - 1,))
    c.blocks[0] = vbuf_payload(6, 2**31 - 1, [0] * 6, [], b"")
    return build(m)[0]


@case
def metadata_sparse_length_huge():
    m = model_of("annotations_custom.idv")
    e = next(e for e in m.cols[0].meta if e.kind == "MyFloatVec")
    e.payload = vbuf_payload(1, 0, [0], [], b"", lengths=[2**31 - 1])
    return build(m)[0], r"column 0 'Feat' metadata 'MyFloatVec' .*densify"


@case
def column_count_huge():
    return patch(fixture_bytes("mixed_none.idv"), 48, "<i", 2**31 - 1), \
        r"column 9 \(byte \d+\): truncated column name"


@case
def metadata_entry_count_huge():
    m = model_of("annotations_custom.idv")
    d, lay = build(m)
    at = lay.meta_tocs[1]
    d = d[:at] + leb(2**31 - 2) + d[at + 1:]
    d = patch(d, 24, "<q", lay.toc + 4)
    d = patch(d, 32, "<q", lay.tail + 4)
    return d, r"column 1 'Score' .*\(byte \d+\): "


# ---- DvBool, dates
@case
def dvbool_pattern_11():
    return first_block_edited("datatypes.idv", "bl", lambda p: struct.pack("<I", 0b11 << 6)), \
        r"column 0 'bl' block 0 .*DvBool value 3 has the invalid bit pattern 11"


@case
def datetime_ticks_out_of_range():
    return first_block_edited("scalars_datetime.idv", 0,
                              lambda p: struct.pack("<q", 2**62) + p[8:]), \
        r"column 0 .*DateTime ticks 4611686018427387904 outside"


@case
def datetimeoffset_minutes_out_of_range():
    return first_block_edited("scalars_datetime.idv", 1,
                              lambda p: struct.pack("<h", 900) + p[2:]), \
        r"column 1 .*block 0 .*DateTimeOffset offset beyond"


# ---- keys, nested codecs
@case
def key2_count_zero():
    m = model_of("keys.idv")
    m.cols[0].params = m.cols[0].params[:-8] + struct.pack("<Q", 0)
    return build(m)[0], rf"column 0 '{m.cols[0].name}' .*: key count 0 out of range"


@case
def key2_count_beyond_raw_type():
    m = model_of("keys.idv")
    c = next(c for c in m.cols if c.params.startswith(triple("Byte")))
    c.params = key2_params("Byte", 256)
    return build(m)[0], rf"column {m.cols.index(c)} '{c.name}' .*: key count 256 out of range " \
                        r"for Byte"


@case
def key2_over_single():
    m = model_of("keys.idv")
    m.cols[0].params = key2_params("Single", 3)
    return build(m)[0], rf"column 0 '{m.cols[0].name}' .*: key over Single"


@case
def key2_params_short():
    m = model_of("keys.idv")
    m.cols[0].params = m.cols[0].params[:-1]
    return build(m)[0], rf"column 0 '{m.cols[0].name}' .*: truncated key count\b"


@case
def key2_nested_unknown_codec():
    m = model_of("keys.idv")
    m.cols[2].params = triple("UInt24") + struct.pack("<Q", 3)
    return build(m)[0], rf"column 2 '{m.cols[2].name}' .*: unknown codec 'UInt24' nested in Key2"


@case
def vbuffer_nested_unknown_codec():
    m = model_of("vectors_sparse.idv")
    m.cols[1].params = vbuf_params("Float16", (10,))
    return build(m)[0], rf"column 1 '{m.cols[1].name}' .*: unknown codec 'Float16' nested in " \
                        r"VBuffer"


@case
def vbuffer_nested_key_count_zero():
    m = model_of("vectors_sparse.idv")
    m.cols[1].params = vbuf_params("Key2", (10,), key2_params("UInt32", 0))
    return build(m)[0], rf"column 1 '{m.cols[1].name}' .*: key count 0 "


@case
def vbuffer_of_vbuffer():
    m = model_of("vectors_sparse.idv")
    m.cols[1].params = vbuf_params("VBuffer", (10,), vbuf_params("Single", (2,)))
    return build(m)[0], rf"column 1 '{m.cols[1].name}' .*: VBuffer of VBuffer"


@case
def vbuffer_negative_dimension():
    m = model_of("vectors_sparse.idv")
    m.cols[1].params = vbuf_params("Single", (-4,))
    return build(m)[0], rf"column 1 '{m.cols[1].name}' .*: negative vector dimension"


@case
def vbuffer_dimension_count_huge():
    m = model_of("vectors_sparse.idv")
    m.cols[1].params = triple("Single") + struct.pack("<ii", 2**30, 10)
    return build(m)[0], rf"column 1 '{m.cols[1].name}' .*: invalid vector dimension count " \
                        r"1073741824"


# ---- metadata
@case
def metadata_entry_count_zero():
    m = model_of("annotations_custom.idv")
    d, lay = build(m)
    at = lay.meta_tocs[1]
    return patch(d, at, "<B", 0), rf"column 1 'Score' \(byte {at}\): invalid metadata entry " \
                                  r"count 0"


@case
def metadata_entry_count_beyond_toc():
    m = model_of("annotations_custom.idv")
    d, lay = build(m)
    at = lay.meta_tocs[0]
    return patch(d, at, "<B", 99), r"column 0 'Feat' \(byte \d+\): .*metadata kind"


@case
def metadata_duplicate_kind():
    m = model_of("annotations_custom.idv")
    c = m.cols[1]
    c.meta[1].kind = c.meta[0].kind
    d, lay = build(m)
    return d, rf"column 1 'Score' \(byte \d+\): duplicate metadata kind '{c.meta[0].kind}'"


@case
def metadata_empty_kind():
    m = model_of("annotations_custom.idv")
    m.cols[1].meta[2].kind = ""
    return build(m)[0], r"column 1 'Score' \(byte \d+\): empty metadata kind"


@case
def metadata_block_beyond_tail():
    m = model_of("annotations_custom.idv")
    d, lay = build(m)
    # the first entry's block offset: kind, codec triple, compression byte, then the int64
    e = m.cols[1].meta[0]
    at = lay.meta_tocs[1] + 1 + len(nstr(e.kind)) + len(triple(e.codec, e.params)) + 1
    assert struct.unpack_from("<q", d, at)[0] == lay.meta_blocks[1][0][0]
    return patch(d, at, "<q", lay.tail - 2), rf"column 1 'Score' metadata '{e.kind}' " \
        rf"\(byte \d+\): block at offset {lay.tail - 2} of \d+ bytes lies outside"


@case
def metadata_block_size_zero():
    m = model_of("annotations_custom.idv")
    d, lay = build(m)
    e = m.cols[1].meta[0]
    at = lay.meta_tocs[1] + 1 + len(nstr(e.kind)) + len(triple(e.codec, e.params)) + 1 + 8
    return patch(d, at, "<B", 0), rf"metadata '{e.kind}' \(byte \d+\): block at offset \d+ of 0 " \
                                  r"bytes"


@case
def metadata_corrupt_deflate():
    m = model_of("annotations_custom.idv")
    e = next(e for e in m.cols[0].meta if e.comp == 1)
    e.stored = b"\xff" * 8
    return build(m)[0], rf"column 0 'Feat' metadata '{e.kind}' \(byte \d+\): corrupt " \
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
    return build(m)[0], rf"column 0 'Feat' metadata '{e.kind}' \(byte \d+\): unknown codec 'Utf7' " \
                        r"nested in VBuffer"


@case
def metadata_key_count_zero():
    m = model_of("annotations_custom.idv")
    e = next(e for e in m.cols[1].meta if e.codec == "Key2")
    e.params = key2_params("UInt32", 0)
    return build(m)[0], rf"column 1 'Score' metadata '{e.kind}' \(byte \d+\): key count 0 "


# the cases whose damage idv.open itself detects (header, TOC, codec parameters), as ML.NET's
# loader does; the others fail when the block or metadata is read
FAIL_AT_OPEN = {
    "bad_magic", "bad_magic_last_byte", "bad_tail_signature", "codec_name_empty",
    "codec_params_beyond_toc", "column_count_beyond_toc", "column_count_huge", "column_name_empty",
    "column_name_invalid_utf8", "compatible_newer_than_version", "compatible_version_too_new",
    "compatible_version_too_old", "key2_count_beyond_raw_type", "key2_count_zero",
    "key2_nested_unknown_codec", "key2_over_single", "key2_params_short", "leb128_overlong",
    "leb128_tenth_byte_too_big", "lookup_offset_beyond_file", "lookup_offset_in_header",
    "lookup_table_overlaps_tail", "metadata_offset_beyond_file", "negative_column_count",
    "negative_row_count", "row_count_huge", "rows_per_block_differs",
    "rows_per_block_differs_without_rows", "rows_per_block_too_big",
    "rows_per_block_zero_with_rows", "simple_codec_with_params", "tail_moved_earlier",
    "tail_offset_beyond_file", "tail_offset_negative", "toc_offset_beyond_tail",
    "toc_offset_inside_header", "vbuffer_dimension_count_huge", "vbuffer_negative_dimension",
    "vbuffer_nested_key_count_zero", "vbuffer_nested_unknown_codec", "vbuffer_of_vbuffer",
    "version_major_part_named", "version_too_old"
}
