"""Block statistics: what idv's writer records per block and column equals the same figures
computed with numpy from the values read back; ML.NET loads files that carry them and reads
the same values; a section that no longer matches its file is refused."""
from __future__ import annotations

import datetime as dt
import io
import struct
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import idv
from idv import _encode
from idv._storage import bounds as B, statistics as S

ROWS, RPB = 2500, 400


def data():
    rng = np.random.default_rng(3)
    f = rng.random(ROWS)
    f[rng.random(ROWS) < 0.2] = np.nan
    f[800:1200] = np.nan                           # a block with none present
    words = [("é" if i % 5 == 0 else "") + f"w{i % 97:04d}" + "x" * (i % 90) for i in range(ROWS)]
    return {
        "I8": rng.integers(-128, 127, ROWS).astype(np.int8),
        "U64": rng.integers(0, 2**63, ROWS, dtype=np.uint64) * np.uint64(2),
        "I64": np.arange(ROWS, dtype=np.int64) - 1000,
        "F": f,
        "F32": rng.random(ROWS).astype(np.float32),
        "B": rng.random(ROWS) < 0.5,
        "K": rng.integers(0, 4, ROWS).astype(np.uint32),        # 0: missing
        "When": np.datetime64("2020-01-01") + np.arange(ROWS).astype("timedelta64[h]"),
        "Span": np.arange(ROWS).astype("timedelta64[s]"),
        "Zoned": [dt.datetime(2021, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=i % 5)))
                  + dt.timedelta(minutes=i) for i in range(ROWS)],
        "Txt": words,
        "Long": ["\xff" * 3 + "y" * 80 + str(i) for i in range(ROWS)],
        "Vec": rng.random((ROWS, 3)).astype(np.float32),
    }


TYPES = {"K": idv.Key(idv.UInt32, count=3), "Zoned": idv.DateTimeOffset}
META = {"K": {"KeyValues": ["red", "green", "blue"]}}


def written(**options):
    buf = io.BytesIO()
    idv.write(buf, data(), types=TYPES, metadata=META, rows_per_block=RPB, **options)
    return buf.getvalue()


def _numbers(values):
    """(present, missing, low, high) of one block, computed here with numpy."""
    v = np.asarray(values)
    if v.dtype.names:
        v = v["utc"]
    if v.dtype.kind == "M":           # .NET ticks: 100 ns since 0001-01-01
        v = v.view(np.int64) + 621355968000000000
    elif v.dtype.kind == "m":
        v = v.view(np.int64)
    missing = np.isnan(v) if v.dtype.kind == "f" else np.zeros(v.shape, bool)
    kept = v[~missing]
    return (len(kept), int(missing.sum()), kept.min() if len(kept) else None,
            kept.max() if len(kept) else None)


def test_numbers_per_block_equal_numpy_over_the_values_read():
    with idv.open(written()) as f:
        stats = f.statistics
        got = f.read()
        names = f.column_names
    assert stats is not None and stats.num_blocks == (ROWS - 1) // RPB + 1
    for name in ["I8", "U64", "I64", "F", "F32", "B", "When", "Span", "Zoned", "Vec"]:
        cs = stats.columns[names.index(name)]
        for b in range(stats.num_blocks):
            present, missing, low, high = _numbers(got[name][b * RPB:(b + 1) * RPB])
            assert (cs.present[b], cs.missing[b]) == (present, missing), (name, b)
            if present:
                assert (cs.low[b], cs.high[b]) == (low, high), (name, b)
    assert stats.columns[names.index("F")].present[2] == 0      # rows 800-1199: all NaN


def test_keys_count_zero_as_missing():
    with idv.open(written()) as f:
        cs = f.statistics.columns[f.column_names.index("K")]
        k = f["K"].read()
    for b in range(len(cs.present)):
        block = k[b * RPB:(b + 1) * RPB]
        assert cs.missing[b] == (block == 0).sum()
        assert cs.low[b] == block[block > 0].min() and cs.high[b] == block.max()


@pytest.mark.parametrize("name", ["Txt", "Long"])
def test_text_bounds_hold_every_value_and_are_at_most_64_bytes(name):
    with idv.open(written()) as f:
        cs = f.statistics.columns[f.column_names.index(name)]
        values = f[name].read()
    for b in range(len(cs.present)):
        block = [v.encode() for v in values[b * RPB:(b + 1) * RPB]]
        lo, hi, flags = cs.low[b], cs.high[b], int(cs.flags[b])
        assert len(lo) <= S.PREFIX and len(hi) <= S.PREFIX
        assert lo <= min(block) and (flags & S.NO_HIGH or max(block) <= hi)
        assert bool(flags & S.LOW_EXACT) == (len(min(block)) <= S.PREFIX)
        if flags & S.LOW_EXACT:
            assert lo == min(block)
        if flags & S.HIGH_EXACT:
            assert hi == max(block)
        assert bool(flags & S.ASCII) == all(v.isascii() for v in block)
    if name == "Long":         # every value longer than a bound: none exact
        assert not (cs.flags & (S.LOW_EXACT | S.HIGH_EXACT)).any()


def test_arrow_text_gives_the_same_statistics_as_python_str():
    pa = pytest.importorskip("pyarrow", reason="Arrow input needs pyarrow")
    words = data()["Txt"] + data()["Long"]
    a, b = io.BytesIO(), io.BytesIO()
    idv.write(a, {"T": words}, rows_per_block=RPB)
    idv.write(b, pa.table({"T": pa.array(words)}), rows_per_block=RPB)
    sa, sb = idv.open(a.getvalue()).statistics, idv.open(b.getvalue()).statistics
    ca, cb = sa.columns[0], sb.columns[0]
    assert ca.low == cb.low and ca.high == cb.high and (ca.flags == cb.flags).all()


def test_sparse_vectors_count_their_implicit_zeros():
    import scipy.sparse as sp
    m = sp.csr_matrix(np.array([[0, 5, 7], [3, 4, 6]], np.float32))
    buf = io.BytesIO()
    idv.write(buf, {"V": m})
    cs = idv.open(buf.getvalue()).statistics.columns[0]
    assert (cs.low[0], cs.high[0]) == (0, 7)


def test_statistics_false_writes_none_and_the_header_stays_zero():
    plain = written(statistics=False)
    assert plain[84:116] == bytes(32)
    with idv.open(plain) as f:
        assert f.statistics is None


def test_a_changed_section_or_header_is_refused():
    good = written(checksums=False)       # with them, the checksums tell first
    off, length = S.section_of(good[:256])
    bad = bytearray(good)
    bad[off + 20] ^= 1
    with pytest.raises(idv.IdvFormatError, match="block statistics"):
        idv.open(bytes(bad)).statistics
    with idv.open(good) as f:       # the same section, recorded for other blocks
        f.statistics.check(f.statistics.fingerprint)
        with pytest.raises(idv.IdvFormatError, match="do not match the file's blocks"):
            f.statistics.check(f.statistics.fingerprint ^ 1)


@pytest.mark.parametrize("rows", [-(ROWS % RPB), -1, RPB])     # to a block boundary, ...
def test_a_changed_row_count_is_refused_at_open_without_checksums(tmp_path, rows):
    """The header bytes the statistics recorded are checked at every open: a row count made
    smaller by whole blocks read fewer rows on every path, without a word; a larger one was
    blamed on the lookup tables. A file without statistics (ML.NET's) has nothing to tell."""
    good = written(checksums=False)
    n = struct.unpack_from("<q", good, 40)[0]
    bad = bytearray(good)
    struct.pack_into("<q", bad, 40, n + rows)
    path = tmp_path / "bad.idv"
    path.write_bytes(bytes(bad))
    for read in (lambda: idv.open(path), lambda: idv.open(bytes(bad)),
                 lambda: idv.dataset(path).read()):
        with pytest.raises(idv.IdvFormatError, match=r"byte 0: checksum mismatch in the "
                                                     r"header \(bytes 0-51\) recorded with"):
            read()
    assert not idv.verify(path).ok
    with idv.open(good) as f:
        assert f.num_rows == n


def test_mlnet_loads_files_with_statistics_with_the_same_values(tmp_path, oracle):
    ours, plain = tmp_path / "stats.idv", tmp_path / "plain.idv"
    for path, on in ((ours, True), (plain, False)):
        idv.write(path, data(), types=TYPES, metadata=META, rows_per_block=RPB, backend="zlib",
                  checksums=False, statistics=on)
    a, b = ours.read_bytes(), plain.read_bytes()
    assert a[84:92] == S.MAGIC and b[84:92] == bytes(8)
    dumps = oracle.dump_many([ours, plain])
    d, ref = dumps[str(ours)], dumps[str(plain)]
    assert "error" not in d, d.get("error")
    assert d["columns"] == ref["columns"] and d["rows"] == ref["rows"]
    assert d["row_count"] == ROWS


def test_bytes_past_any_bound_have_no_high_bound():
    """A value of 0xFF bytes longer than a bound has no shorter bytes above it (idv's Text is
    UTF-8, where 0xFF never occurs, but other bytes run into the rule too)."""
    offsets = np.array([0, 70, 71], np.int64)
    data = np.frombuffer(b"\xff" * 70 + b"a", np.uint8)
    block = B.text(offsets, data)
    assert block.flags & S.NO_HIGH and block.low == b"a"
    block = B.text(np.array([0, 66], np.int64), np.frombuffer(b"ab" + b"\xff" * 64, np.uint8))
    assert block.high == b"ac" and not block.flags & S.NO_HIGH


# values that share a prefix of 8 bytes or more than a bound's 64, or none
_WORDS = st.builds(lambda head, tail: head + tail, st.sampled_from(["", "abcdefgh", "é" * 40]),
                   st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40))


@given(st.lists(_WORDS, min_size=1, max_size=40))
@settings(max_examples=200, deadline=None)
def test_text_bounds_are_code_point_order(words):
    """A block's Text bounds, from str, from UTF-8 or found while encoding, are those of
    Python's min and max (code point order) and str.isascii, whatever the mix of widths,
    shared prefixes and lengths."""
    low, high = min(words).encode(), max(words).encode()
    ascii = all(w.isascii() for w in words)
    encoded = [w.encode() for w in words]
    offsets = np.cumsum([0] + [len(e) for e in encoded], dtype=np.int64)
    data = np.frombuffer(b"".join(encoded), np.uint8)
    _payload, least, greatest, every_ascii = _encode.encode_text(np.array(words, dtype=object),
                                                                 S.PREFIX + 1)
    written = B.text_bounds(len(words), least, greatest, every_ascii)    # the writer's
    for block in (B.text_values(np.array(words, dtype=object)), B.text(offsets, data), written):
        assert block.present == len(words) and block.low == low[:S.PREFIX]
        assert bool(block.flags & S.ASCII) == ascii
        assert bool(block.flags & S.LOW_EXACT) == (len(low) <= S.PREFIX)
        if len(high) <= S.PREFIX:
            assert block.high == high and block.flags & S.HIGH_EXACT
        else:
            assert high < block.high and not block.high.startswith(high[:S.PREFIX])


@pytest.mark.parametrize("words", [["", "", ""], ["a\x00", "a", "a\x00\x00", "a\x00\x01"],
                                   ["abcdefgh\x00", "abcdefgh", "abcdefghi", "abcdefg"],
                                   ["user12", "user9", "user123", "user1", "user9\x00"]])
def test_utf8_text_bounds_past_their_first_8_bytes(words):
    """Arrow text's bounds where values agree in their first 8 bytes, zero bytes padding
    included (compared in full there), and where every value is empty."""
    encoded = [w.encode() for w in words]
    offsets = np.cumsum([0] + [len(e) for e in encoded], dtype=np.int64)
    block = B.text(offsets, np.frombuffer(b"".join(encoded), np.uint8))
    assert (block.low, block.high) == (min(encoded), max(encoded))


def _blocks_rewritten(data, move_bytes):
    """`data` (a file of one column) with its first two blocks exchanged in its lookup table:
    with `move_bytes` their bytes too (the same values, blocks moved), else not (block 0 now
    holds block 1's values, and its statistics describe other values)."""
    with idv.open(data) as f:
        (o0, d0, r0), (o1, d1, r1) = f.columns[0].lookup[:2].tolist()
    assert o1 == o0 + d0
    table = struct.pack("<qii", o0, d0, r0) + struct.pack("<qii", o1, d1, r1)
    at = data.index(table)
    assert data.find(table, at + 1) < 0
    out = bytearray(data)
    if move_bytes:          # block 1's bytes first, then block 0's: each entry follows its own
        out[o0:o0 + d0 + d1] = data[o1:o1 + d1] + data[o0:o0 + d0]
        out[at:at + 32] = struct.pack("<qii", o0 + d1, d0, r0) + struct.pack("<qii", o0, d1, r1)
    else:                   # the entries exchanged, the bytes where they were
        out[at:at + 32] = table[16:] + table[:16]
    return bytes(out)


@pytest.mark.parametrize("move_bytes", [False, True], ids=["values-changed", "blocks-moved"])
def test_a_file_whose_blocks_were_rewritten_behind_its_statistics_is_refused(tmp_path,
                                                                             move_bytes):
    x = np.arange(1000, dtype=np.int64) * 3
    buf = io.BytesIO()
    idv.write(buf, {"x": x}, rows_per_block=100, checksums=False)
    path = tmp_path / "rewritten.idv"
    path.write_bytes(_blocks_rewritten(buf.getvalue(), move_bytes))
    with idv.open(path) as f:
        got = f.read()["x"]                      # a valid file, read without its statistics
        swapped = np.concatenate([x[100:200], x[:100], x[200:]])
        assert np.array_equal(got, x if move_bytes else swapped)
        with pytest.raises(idv.IdvFormatError, match="do not match the file's blocks"):
            f.statistics
        with pytest.warns(idv.IdvWarning, match="do not match the file's blocks.*every "
                                                "block"):
            kept = f.read(filter=[("x", "<", 300)])["x"]    # never from the stale bounds
        assert np.array_equal(kept, got[got < 300])
    with pytest.raises(idv.IdvFormatError, match="do not match the file's blocks"):
        idv.add_statistics(path)


# ---- statistics that cannot lie silently ----------------------------------------------------

def _sorted_blocks(checksums=True, compression="deflate"):
    """1,000 sorted int64 in blocks of 100, with statistics (bytes)."""
    buf = io.BytesIO()
    idv.write(buf, {"x": np.arange(1000, dtype=np.int64)}, rows_per_block=100,
              checksums=checksums, compression=compression)
    return bytearray(buf.getvalue())


def _restated(data, change):
    """`data` with its statistics section rebuilt after `change(ColumnStats)` (and its own
    CRC-32 recomputed, as a careless or hostile tool would): only the blocks can tell."""
    with idv.open(bytes(data), checksums=False) as f:
        st = f.statistics
        cs = st.columns[0]
        cs = S.ColumnStats(cs.index, cs.domain, cs.present.copy(), cs.missing.copy(),
                           cs.low.copy(), cs.high.copy(), crcs=cs.crcs)
        off, length, nb = st.offset, st.length, st.num_blocks
        fingerprint = st.fingerprint
    change(cs)
    head = struct.unpack_from("<IIqII", S.pack([cs], nb, fingerprint))
    section = S.pack([cs], head[2], fingerprint)
    assert len(section) == length
    out = bytearray(data)
    out[off:off + length] = section
    out[S.POINTER_AT:S.POINTER_AT + S.POINTER_SIZE] = S.pointer(bytes(out[:52]), off, section)
    return bytes(out)


def _swap_bounds(cs):
    cs.low[3], cs.high[3] = cs.high[3], cs.low[3]


def _nan_bound(cs):
    cs.domain = S.FLOAT
    cs.low = cs.low.astype(np.float64)
    cs.high = cs.high.astype(np.float64)
    cs.low[2] = np.nan


def _wrong_counts(cs):
    cs.present[5] = 99


@pytest.mark.parametrize("change", [_swap_bounds, _nan_bound, _wrong_counts],
                         ids=["swapped", "nan-bound", "counts"])
def test_malformed_statistics_are_refused_and_filters_read_every_block(change):
    data = _restated(_sorted_blocks(checksums=False), change)
    with idv.open(data) as f:
        with pytest.raises(idv.IdvFormatError, match="statistics are malformed"):
            f.statistics
        with pytest.warns(idv.IdvWarning, match="malformed.*reads every block"):
            got = f.read(filter=[("x", ">=", 300), ("x", "<", 310)])["x"]
        assert np.array_equal(got, np.arange(300, 310))
        assert f["x"].blocks_decoded == 10                      # every block, none skipped
    report = idv.verify(data)
    assert not report.ok and "malformed" in str(report)


def test_a_filter_reads_the_statistics_of_its_own_columns_alone():
    """Statistics are checked column by column when a filter first uses them: bad bounds of
    another column leave a filter on this one skipping blocks, and one on that column
    reading every block, while f.statistics (every column) is refused."""
    buf = io.BytesIO()
    idv.write(buf, {"x": np.arange(1000, dtype=np.int64),
                    "y": np.arange(1000, dtype=np.int64)}, rows_per_block=100, checksums=False)
    data = bytearray(buf.getvalue())
    with idv.open(bytes(data)) as f:
        st = f.statistics
        cols = [st.columns[0], st.columns[1]]
    cols[1] = S.ColumnStats(1, cols[1].domain, cols[1].present, cols[1].missing,
                            cols[1].low.copy(), cols[1].high.copy(), crcs=cols[1].crcs)
    _swap_bounds(cols[1])
    section = S.pack(cols, st.num_blocks, st.fingerprint)
    assert len(section) == st.length
    data[st.offset:st.offset + st.length] = section
    data[S.POINTER_AT:S.POINTER_AT + S.POINTER_SIZE] = S.pointer(bytes(data[:52]), st.offset,
                                                                 section)
    with idv.open(bytes(data)) as f:
        with pytest.raises(idv.IdvFormatError, match="statistics are malformed"):
            f.statistics
        with warnings.catch_warnings():
            warnings.simplefilter("error")                      # no warning: x's are sound
            got = f.read(["x"], filter=[("x", ">=", 300), ("x", "<", 310)])["x"]
        assert np.array_equal(got, np.arange(300, 310))
        assert f["x"].blocks_decoded == 1                       # the others skipped
        with pytest.warns(idv.IdvWarning, match="malformed.*reads every block"):
            got = f.read(["y"], filter=[("y", ">=", 300), ("y", "<", 310)])["y"]
        assert np.array_equal(got, np.arange(300, 310))
        assert f["y"].blocks_decoded == 10


def test_a_filtered_read_of_a_wide_file_parses_one_columns_statistics(monkeypatch):
    """The cost of a filter's statistics grows with the columns it names, not the file's."""
    buf = io.BytesIO()
    idv.write(buf, {f"c{j}": np.arange(500, dtype=np.int64) + j for j in range(300)},
              rows_per_block=100)
    parsed = []
    check = S._check_bounds
    monkeypatch.setattr(S, "_check_bounds", lambda cs: parsed.append(cs.index) or check(cs))
    with idv.open(buf.getvalue()) as f:
        got = f.read(["c7"], filter="c7 == 250")["c7"]
        assert list(got) == [250] and f["c7"].blocks_decoded == 1
        assert parsed == [7]
        assert len(f.statistics.columns) == 300                 # every one, when asked for
    assert len(parsed) == 300


@pytest.mark.parametrize("text", [False, True], ids=["numbers", "with-text"])
def test_the_columns_are_found_without_a_walk_where_all_are_numbers(text):
    """A section of numbers alone is indexed by arithmetic, the same places a walk finds."""
    cols = {"i": np.arange(700, dtype=np.int64), "u": np.arange(700, dtype=np.uint32),
            "f": np.linspace(0, 1, 700, dtype=np.float32)}
    if text:
        cols["t"] = np.array([f"w{k % 13}" for k in range(700)], object)
    buf = io.BytesIO()
    idv.write(buf, cols, rows_per_block=100)                    # 7 blocks: an odd count
    with idv.open(buf.getvalue()) as f:
        st = f.statistics
        data = bytes(f.store.view(st.offset, st.length))
    nb = st.num_blocks
    counts = 20 * nb + 4 * (nb % 2)
    walked, end = S._walk(data, len(cols), nb, counts)
    assert sorted(walked) == list(range(len(cols))) and end == len(data)
    found = S._numbers_only(data, len(cols), 8 + counts + 16 * nb)
    assert found == (None if text else (walked, end))


def test_a_wrong_block_count_is_an_idv_format_error_naming_the_file(tmp_path):
    data = _sorted_blocks(checksums=False)
    with idv.open(bytes(data)) as f:
        off, length = f.statistics.offset, f.statistics.length
    out = bytearray(data)
    struct.pack_into("<q", out, off + 8, 9)                     # 9 blocks per column, not 10
    section = bytes(out[off:off + length])                      # its CRC-32 made anew
    out[S.POINTER_AT:S.POINTER_AT + S.POINTER_SIZE] = S.pointer(bytes(out[:52]), off, section)
    path = tmp_path / "nine.idv"
    path.write_bytes(bytes(out))
    with idv.open(path) as f:
        with pytest.raises(idv.IdvFormatError, match="nine.idv.*malformed") as e:
            f.statistics
        assert e.value.path == str(path)


def test_lowered_bounds_are_found_by_verify():
    def lower(cs):
        cs.high[2] = 250                                        # block 2 holds 200..299
    data = _restated(_sorted_blocks(checksums=False), lower)
    report = idv.verify(data)
    assert [(p.column, p.block) for p in report.problems] == [("x", 2)]
    assert "recorded 100 present, 0 missing, from 200 to 250" in str(report)
    assert "from 200 to 299" in str(report)


@pytest.mark.parametrize("compression", ["none", "deflate"])
def test_a_block_rewritten_in_place_fails_the_filtered_read_as_the_full_read(tmp_path,
                                                                             compression):
    data = _sorted_blocks(compression=compression)
    with idv.open(bytes(data)) as f:
        off, n = int(f["x"].lookup["offset"][3]), int(f["x"].lookup["disk"][3])
    if compression == "none":
        struct.pack_into("<q", data, off, 5000)                 # block 3 now holds 5000
    else:
        data[off + n // 2] ^= 0xFF
    path = tmp_path / "rewritten.idv"
    path.write_bytes(bytes(data))
    with idv.open(path) as f:
        with pytest.raises(idv.IdvFormatError, match="checksum mismatch") as full:
            f.read()
        with pytest.raises(idv.IdvFormatError, match="checksum mismatch") as filtered:
            f.read(filter="x == 5000")                          # block 3 ruled out by bounds
        assert filtered.value.block == full.value.block == 3
        assert filtered.value.column == "x"
    ds = idv.arrow_dataset(path)
    import pyarrow.compute as pc
    with pytest.raises(idv.IdvFormatError, match="checksum mismatch"):
        ds.count_rows(filter=pc.field("x") == 5000)


def test_without_checksums_the_statistics_own_crcs_catch_a_rewritten_block(tmp_path):
    data = _sorted_blocks(checksums=False, compression="none")
    with idv.open(bytes(data)) as f:
        off = int(f["x"].lookup["offset"][3])
        assert f.statistics.columns[0].crcs is not None
    struct.pack_into("<q", data, off, 5000)
    path = tmp_path / "plain.idv"
    path.write_bytes(bytes(data))
    with idv.open(path) as f:
        assert f.read()["x"][300] == 5000               # nothing to tell it from
        with pytest.raises(idv.IdvFormatError, match="not those its statistics were "
                                                     "computed from") as e:
            f.read(filter="x == 5000")
        assert (e.value.column, e.value.block) == ("x", 3)
    with idv.open(path, checksums=False) as f:          # asked not to check: bounds trusted
        assert len(f.read(filter="x == 5000")["x"]) == 0


@pytest.mark.parametrize("checksums", [True, False])
def test_a_block_counted_by_its_statistics_is_checked_as_a_ruled_out_one(tmp_path, checksums):
    """count_rows(filter=) counts a block whose statistics say every row matches without
    decoding it: a block damaged since is refused, as to_table(filter=) refuses it."""
    pc = pytest.importorskip("pyarrow.compute", reason="arrow_dataset filters are pyarrow")
    data = _sorted_blocks(checksums=checksums)
    with idv.open(bytes(data)) as f:
        off, n = int(f["x"].lookup["offset"][3]), int(f["x"].lookup["disk"][3])
    data[off:off + n] = b"\xff" * n                             # rows 300-399
    path = tmp_path / "damaged.idv"
    path.write_bytes(bytes(data))
    ds = idv.arrow_dataset(path)
    with pytest.raises(idv.IdvFormatError):
        ds.to_table(filter=pc.field("x") >= 300)
    for expr in (pc.field("x") >= 300, pc.field("x") >= 0, pc.field("x") < 50):
        with pytest.raises(idv.IdvFormatError, match="checksum mismatch") as e:
            ds.count_rows(filter=expr)
        assert (e.value.path, e.value.column, e.value.block) == (str(path), "x", 3), expr


def test_a_block_and_its_checksum_rewritten_leave_the_statistics_unused(tmp_path):
    data = _sorted_blocks(compression="none")
    with idv.open(bytes(data)) as f:
        off, n = int(f["x"].lookup["offset"][3]), int(f["x"].lookup["disk"][3])
        table_at = f.store.sums.table_offset
        entries = f.store.sums.entries.copy()
    struct.pack_into("<q", data, off, 5000)
    k = int(np.flatnonzero(entries["offset"] == off)[0])     # a tool that redoes checksums
    entries["crc"][k] = S.crc(bytes(data[off:off + n]))
    table = entries.tobytes()
    data[table_at:table_at + len(table)] = table
    from idv._storage import checksums
    data[checksums.POINTER_AT:checksums.POINTER_AT + checksums.POINTER_SIZE] = \
        checksums.Recorder.pointer(bytes(data[:52]), table_at, table)
    path = tmp_path / "redone.idv"
    path.write_bytes(bytes(data))
    with idv.open(path) as f:
        with pytest.raises(idv.IdvFormatError, match="column 'x' block 3 were computed from "
                                                     "other bytes"):
            f.statistics
        with pytest.warns(idv.IdvWarning, match="reads every block"):
            assert list(f.read(filter="x == 5000")["x"]) == [5000]


def test_version_1_statistics_are_still_read():
    data = bytes(_sorted_blocks(checksums=False))
    with idv.open(data) as f:
        st = f.statistics
        cs = st.columns[0]
        off = st.offset
        fingerprint, nb = st.fingerprint, st.num_blocks
    v1 = struct.pack("<IIqII", 1, 1, nb, fingerprint, 0) + struct.pack("<IB3x", 0, cs.domain) \
        + b"".join(a.astype("<i8").tobytes() for a in (cs.present, cs.missing, cs.low,
                                                        cs.high))
    out = bytearray(data)
    out[off:off + len(v1)] = v1
    out[S.POINTER_AT:S.POINTER_AT + S.POINTER_SIZE] = S.pointer(bytes(out[:52]), off, v1)
    with idv.open(bytes(out)) as f:
        assert f.statistics.columns[0].crcs is None
        got = f.read(["x"], filter=[("x", ">=", 300), ("x", "<", 310)])["x"]
        assert np.array_equal(got, np.arange(300, 310)) and f["x"].blocks_decoded == 1


def test_a_pointer_beyond_int64_is_damage_not_a_crash(tmp_path):
    """A statistics pointer whose offset plus length lies beyond int64 (found by fuzzing:
    numpy refused the sum, a TypeError out of idv.open): the file opens, its statistics are
    refused as damage, its values read."""
    from idv._storage import statistics as S
    p = tmp_path / "s.idv"
    idv.write(p, {"x": np.arange(100.0)}, rows_per_block=10)
    data = bytearray(p.read_bytes())
    struct.pack_into("<8sqq", data, S.POINTER_AT, S.MAGIC, -(1 << 63) + 10, -(1 << 63) + 10)
    p.write_bytes(bytes(data))
    for checksums in (True, False):
        with idv.open(p, checksums=checksums) as f:
            assert np.array_equal(f["x"][:], np.arange(100.0))
            with pytest.raises(idv.IdvFormatError):
                f.statistics


_KERNEL_DTYPES = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8"]


def _kernel_cases(dtype):
    """Blocks of `dtype` for numeric_bounds: random, lengths around its lanes, the type's
    limits, and for floats NaN, -0.0 and the infinities in every position."""
    rng = np.random.default_rng(11)
    dt_ = np.dtype(dtype)
    if dt_.kind == "f":
        rand = rng.normal(0, 1e3, 1000).astype(dt_)
        specials = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, np.finfo(dt_).max,
                             np.finfo(dt_).min, np.finfo(dt_).tiny], dt_)
    else:
        info = np.iinfo(dt_)
        rand = rng.integers(info.min, info.max, 1000, dtype=dt_, endpoint=True)
        specials = np.array([0, info.min, info.max, 1], dt_)
    cases = [rand, specials] + [rand[:n] for n in (2, 3, 7, 8, 9, 15, 17, 33)]
    for s in specials:
        for at in (0, 5, 999):
            c = rand.copy()
            c[at] = s
            cases.append(c)
        cases.append(np.full(13, s, dt_))
    if dt_.kind == "f":
        holed = rand.copy()
        holed[::3] = np.nan
        cases += [holed, np.array([-0.0, 0.0], dt_), np.array([0.0, -0.0], dt_)]
    return cases


@pytest.mark.parametrize("dtype", _KERNEL_DTYPES)
def test_the_c_kernel_gives_the_blocks_numpy_gives(dtype):
    """item_block's one pass of C (contiguous native numbers) equals its numpy path (the same
    values strided, which the kernel leaves to numpy), NaN, -0.0, inf, the integer limits,
    all missing, keys and sparse vectors' implicit zeros included."""
    kinds = {"i": idv.Int64, "u": idv.UInt64, "f": idv.Double}
    types = [kinds[np.dtype(dtype).kind]]
    if np.dtype(dtype).kind == "u":
        types.append(idv.Key(idv.UInt64, count=2**32))
    for values in _kernel_cases(dtype):
        strided = np.repeat(values, 2)[::2]
        assert _encode.numeric_bounds(strided) is None
        for t in types:
            for implicit in (False, True):
                got = B.item_block(t, values, implicit)
                want = B.item_block(t, strided, implicit)
                assert got == want, (dtype, t, implicit, values[:10])
                assert type(got.low) is type(want.low) and type(got.high) is type(want.high)
                if got.present and np.dtype(dtype).kind == "f":
                    assert not np.isnan(got.low) and not np.isnan(got.high)
                    # a zero bound is +0.0 whichever zero the block holds
                    assert not np.signbit(got.low) or got.low != 0


def test_the_c_kernel_counts_what_it_leaves_out():
    f = np.array([np.nan, 2.5, np.nan, -1.0, 7.0, np.nan, 0.0, 3.0, np.nan], np.float32)
    assert _encode.numeric_bounds(f) == (5, 4, -1.0, 7.0)
    assert _encode.numeric_bounds(np.full(20, np.nan)) == (0, 20, None, None)
    k = np.array([0, 9, 0, 2**64 - 1, 4], np.uint64)
    assert _encode.numeric_bounds(k, True) == (3, 2, 4, 2**64 - 1)
    assert _encode.numeric_bounds(k) == (5, 0, 0, 2**64 - 1)
    assert _encode.numeric_bounds(np.array([-2**63, 2**63 - 1])) == (2, 0, -2**63, 2**63 - 1)
    assert _encode.numeric_bounds(np.array([], np.int8)) == (0, 0, None, None)
    assert _encode.numeric_bounds(np.array([-0.0])) == (1, 0, 0.0, 0.0)
    assert B.item_block(idv.Single, np.array([], np.float32)) == S.Block(0, 0)
    assert B.item_block(idv.Single, np.array([], np.float32), True) == S.Block(1, 0, 0.0, 0.0)
    assert B.item_block(idv.Int32, np.array([-5], np.int32), True) == S.Block(2, 0, -5, 0)
    # other kinds are numpy's: Booleans, big-endian, half floats, lists
    for other in (np.array([True]), np.array([1.0], ">f8"), np.array([1.0], "f2"), [1.0]):
        assert _encode.numeric_bounds(other) is None


def _runs(values, rows):
    return [values[a:a + rows] for a in range(0, len(values), rows)]


@pytest.mark.parametrize("dtype", _KERNEL_DTYPES)
def test_a_batchs_blocks_in_one_pass_equal_each_block_alone(dtype):
    """item_blocks (a batch's blocks, one pass of C) gives what item_block gives each block,
    bound types included: runs of 1, of the kernels' lane widths and longer than the batch,
    the last one short, NaN, -0.0, the limits, and keys' zeros missing."""
    kinds = {"i": [idv.Int64], "u": [idv.UInt64, idv.Key(idv.UInt64, count=2**32)],
             "f": [idv.Double]}
    values = np.concatenate(_kernel_cases(dtype))
    for t in kinds[np.dtype(dtype).kind]:
        for rows in (1, 3, 8, 17, 1000, len(values) + 5):
            got = B.item_blocks(t, values, rows)
            want = [B.item_block(t, run) for run in _runs(values, rows)]
            assert got == want, (dtype, t, rows)
            assert [(type(g.low), type(g.high)) for g in got] == \
                [(type(w.low), type(w.high)) for w in want]


def test_a_batchs_blocks_of_other_types():
    """Times compare as ticks, a DateTimeOffset's by its UTC instant, in one pass as block by
    block; values the pass does not take (Booleans, strided numbers, str objects, vectors'
    rows) give None, and the writer finds those blocks one at a time."""
    rng = np.random.default_rng(5)
    ticks = rng.integers(-2**62, 2**62, 100)
    dto = np.zeros(100, [("ticks", "<i8"), ("minutes", "<i2")])
    dto["ticks"], dto["minutes"] = ticks, rng.integers(-840, 840, 100)
    for t, values in ((idv.DateTime, ticks), (idv.TimeSpan, ticks), (idv.DateTimeOffset, dto)):
        assert B.item_blocks(t, values, 7) == [B.item_block(t, r) for r in _runs(values, 7)]
    assert B.item_blocks(idv.Boolean, rng.random(10) < 0.5, 3) is None
    assert B.item_blocks(idv.Double, rng.random(20)[::2], 3) is None
    assert B.item_blocks(idv.Text, np.array(["b", "a"], dtype=object), 1) is None
    assert B.item_blocks(idv.Vector(idv.Text), np.array(["b"], dtype=object), 1) is None
    assert _encode.numeric_bounds_blocks(np.array([1.0, np.nan]), 1, True) is None
    with pytest.raises(ValueError, match="rows"):
        _encode.numeric_bounds_blocks(np.arange(3), 0)


@given(st.lists(_WORDS, min_size=1, max_size=40), st.integers(1, 12))
@settings(max_examples=200, deadline=None)
def test_a_batchs_text_blocks_in_one_pass_equal_each_block_alone(words, rows):
    """Text blocks found in one pass over a batch's UTF-8 equal each found alone and Python's
    min and max of each run's str, with Arrow's int32 offsets as with int64 ones."""
    from idv._writer.values import Utf8Text
    encoded = [w.encode() for w in words]
    data = np.frombuffer(b"".join(encoded), np.uint8)
    for dtype in (np.int32, np.int64):
        offsets = np.cumsum([0] + [len(e) for e in encoded], dtype=dtype)
        got = B.item_blocks(idv.Text, Utf8Text(offsets, data), rows)
        assert got == [B.item_block(idv.Text, Utf8Text(offsets[a:a + rows + 1], data))
                       for a in range(0, len(words), rows)]
        for block, run in zip(got, _runs(words, rows)):
            assert block.present == len(run)
            assert block.low == min(run).encode()[:S.PREFIX]


def test_text_offsets_are_checked_once_for_the_batch():
    data = np.frombuffer(b"abcdef", np.uint8)
    for dtype in (np.int32, np.int64):
        with pytest.raises(ValueError, match="decrease at value 1"):
            _encode.utf8_extremes_blocks(np.array([0, 3, 2, 6], dtype), data, 2)
        with pytest.raises(ValueError, match="outside"):
            _encode.utf8_extremes_blocks(np.array([0, 3, 7], dtype), data, 2)
        with pytest.raises(ValueError, match="rows"):
            _encode.utf8_extremes_blocks(np.array([0, 3, 6], dtype), data, 0)
        low, high, ascii = _encode.utf8_extremes_blocks(np.array([0, 3, 3, 6], dtype), data, 2)
        assert low.tolist() == [1, 2] and high.tolist() == [0, 2] and ascii.tolist() == [1, 1]
