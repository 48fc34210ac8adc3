"""Text read straight into Arrow: the blocks' UTF-8 bytes with byte offsets, no Python str.

Expected values are ML.NET's (the sample fixtures' and testdata's sidecars, read back from
Arrow by hand in arrow_check.py): scalars_text's "", non-ASCII, emoji surrogate pairs, NUL and
1000-character values; vectors_fixed / vectors_misc / vectors_sparse / vectors_variable and
testdata/text_bool_vectors' text vectors (fixed, variable, rows stored sparse); multi-block
columns (mixed_maxbytes, multiblock_200k). Damaged text on this path: tests/test_corrupt.py
(test_crafted_text_cases_on_the_arrow_path).
"""
from __future__ import annotations

import numpy as np
import pytest

import idv
from arrow_check import column_from_arrow
from expected import (annotations_by_kind, assert_column_equal, column_cells, dense_cell,
                      expected_column, parse_type_string, visible_columns)
from reference import (MLNET_FILES_DIR, SAMPLE_DIR, SET_SHARED, TESTDATA_DIR, fixture,
                       sidecar, sidecar_path)

pa = pytest.importorskip("pyarrow")


def _text_files():
    """Every fixture with a sidecar and a Text or vector-of-Text column."""
    paths = sorted(SAMPLE_DIR.glob("*.idv")) + sorted(TESTDATA_DIR.glob("*.idv"))
    out = []
    for p in paths:
        if sidecar_path(p) is None:
            continue
        doc = sidecar(p)
        if any(c["item_type"] == "Text" for c in visible_columns(doc)):
            out.append(pytest.param(p, id=p.stem))
    return out or [pytest.param(None, marks=pytest.mark.skip(
        reason=f"no ML.NET fixture with a sidecar and a Text column in {SAMPLE_DIR} or "
               f"{TESTDATA_DIR} ({SET_SHARED})"))]


TEXT_FILES = _text_files()


def _text_columns(doc):
    return [c for c in visible_columns(doc) if c["item_type"] == "Text"]


def _check(table, doc, dcols):
    """Every column of `table` (the text columns `dcols`) against ML.NET's values."""
    table.validate(full=True)           # offsets in range, UTF-8 valid
    assert table.column_names == [c["name"] for c in dcols]
    for i, dcol in enumerate(dcols):
        col = table.column(i)
        typ = col.type
        item = typ.value_type if pa.types.is_list(typ) or pa.types.is_fixed_size_list(typ) \
            else typ
        assert item == pa.string(), dcol["name"]
        actual = column_from_arrow(parse_type_string(dcol["type_string"]), col,
                                   annotations_by_kind(dcol).get("KeyValues"))
        assert_column_equal(actual, expected_column(doc, dcol["index"]),
                            f"column {dcol['name']!r}")


@pytest.mark.parametrize("path", TEXT_FILES)
def test_to_arrow_text_equals_mlnet(path):
    doc = sidecar(path)
    dcols = _text_columns(doc)
    with idv.open(path) as f:
        table = idv.to_arrow(f, columns=[c["index"] for c in dcols])
        _check(table, doc, dcols)
        # one chunk per block: the blocks' own buffers
        for dcol, chunked in zip(dcols, table.columns):
            assert chunked.num_chunks == f[dcol["index"]].num_blocks


@pytest.mark.parametrize("path", TEXT_FILES)
@pytest.mark.parametrize("batch_size", [None, 7])
def test_record_batch_reader_text_equals_mlnet(path, batch_size):
    doc = sidecar(path)
    dcols = _text_columns(doc)
    reader = idv.record_batch_reader(path, [c["index"] for c in dcols], batch_size=batch_size)
    table = reader.read_all()
    if batch_size and table.num_rows:
        assert all(len(b) == 7 for b in table.to_batches()[:-1])
    _check(table, doc, dcols)


@pytest.mark.parametrize("path", TEXT_FILES)
def test_text_blocks_hold_mlnet_utf8(path):
    """Column.read_text_blocks: per block, byte offsets into the UTF-8 of ML.NET's strings."""
    doc = sidecar(path)
    with idv.open(path) as f:
        for dcol in _text_columns(doc):
            col = f[dcol["index"]]
            cells = column_cells(doc, dcol["index"])
            blocks = col.read_text_blocks(0, col.num_blocks)
            assert len(blocks) == col.num_blocks
            for b, block in enumerate(blocks):
                r0, r1 = col.block_rows(b)
                if block is None:        # a vector block with rows stored sparse
                    assert isinstance(col.type, idv.Vector)
                    assert any(isinstance(c, dict) for c in cells[r0:r1])
                    continue
                if isinstance(col.type, idv.Vector):
                    spans = block.values
                    items = [v for c in cells[r0:r1] for v in dense_cell(c, idv.Text)]
                else:
                    spans = block
                    items = cells[r0:r1]
                encoded = [s.encode("utf-8") for s in items]
                assert spans.offsets.dtype == np.int32
                assert spans.offsets.tolist() == np.cumsum([0] + [len(e) for e in encoded]) \
                    .tolist()
                assert spans.data.tobytes() == b"".join(encoded)
            assert col.blocks_decoded == col.num_blocks


def test_scalars_text_edge_values():
    """"", non-ASCII, an emoji (a UTF-16 surrogate pair), NUL and 1000 characters, as ML.NET
    wrote them: byte offsets differ from the UTF-16 ends the file stores."""
    doc = sidecar("scalars_text")
    want = [row[0] for row in doc["rows"]]
    assert "" in want and any("\U0001F600" in s for s in want) and any("\x00" in s for s in want)
    got = idv.to_arrow(fixture("scalars_text"), columns=["Txt"]).column(0)
    assert got.to_pylist() == want


def test_sparse_text_vector_blocks_densify_with_empty_strings():
    """Rows stored sparse have no payload for their implicit "" items: those blocks go through
    the object path, with ML.NET's values."""
    doc = sidecar("vectors_sparse")
    dcol = next(c for c in visible_columns(doc) if c["name"] == "SparseText")
    with idv.open(fixture("vectors_sparse")) as f:
        col = f["SparseText"]
        assert col.read_text_blocks(0, 1) == [None]
        table = idv.to_arrow(f, columns=["SparseText"])
    _check(table, doc, [dcol])


def test_legacy_na_boundaries_read_as_empty():
    """A 1.1.1.5 file's NA (a boundary with the high bit set) is "" on both paths (reference
    section 4.3, the verified example of datatypes.idv's column tx)."""
    path = MLNET_FILES_DIR / "datatypes.idv"
    if not path.exists():
        pytest.skip(f"{path} missing")
    want = ["foo", "xyz", "", "", ""]
    with idv.open(path) as f:
        assert f["tx"].read().tolist() == want
        assert idv.to_arrow(f, columns=["tx"]).column(0).to_pylist() == want
        assert pa.table(idv.record_batch_reader(f, ["tx"])).column(0).to_pylist() == want
        # a filtered read tests the text's bytes and makes str of the matches alone
        assert f.read(["tx"], filter="tx != 'foo'")["tx"].tolist() == want[1:]
        assert f.read(["tx"], filter="tx == ''")["tx"].tolist() == want[2:]
        assert idv.to_arrow(f, ["tx"], filter="tx < 'g'").column(0).to_pylist() == \
            ["foo", "", "", ""]


def test_empty_file_text_column():
    with idv.open(fixture("empty_rows")) as f:
        table = idv.to_arrow(f, columns=["Txt"])
    assert table.num_rows == 0 and table.schema.field("Txt").type == pa.string()


# ---- pandas

def test_pandas_default_strings_are_arrow_backed_and_mlnet():
    """pandas' default string dtype (pandas 3: str, backed by pyarrow) holds the Arrow column
    as read; pandas 2 keeps object columns of str."""
    pd = pytest.importorskip("pandas")
    doc = sidecar("scalars_text")
    df = idv.read_pandas(fixture("scalars_text"))
    default = pd.Series([""]).dtype
    assert df["Txt"].dtype == default
    assert df["Txt"].tolist() == [row[0] for row in doc["rows"]]
    if isinstance(default, pd.StringDtype) and default.storage == "pyarrow":
        assert isinstance(df["Txt"].array, pd.arrays.ArrowStringArray)


def test_pandas_dtype_backend_pyarrow():
    pd = pytest.importorskip("pandas")
    doc = sidecar("mixed_deflate")
    df = idv.read_pandas(fixture("mixed_deflate"), dtype_backend="pyarrow")
    assert df["Txt"].dtype == pd.ArrowDtype(pa.string())
    assert df["Id"].dtype == pd.ArrowDtype(pa.int32())
    assert df["F64"].dtype == pd.ArrowDtype(pa.float64())
    assert isinstance(df["Key"].dtype, pd.CategoricalDtype)
    index = {c["name"]: c["index"] for c in doc["columns"]}
    assert df["Txt"].tolist() == [row[index["Txt"]] for row in doc["rows"]]
    assert df["Id"].tolist() == [row[index["Id"]] for row in doc["rows"]]
    with pytest.raises(ValueError, match="dtype_backend must be one of"):
        idv.read_pandas(fixture("mixed_deflate"), dtype_backend="arrow")


@pytest.mark.parametrize("rows", [slice(8000, 8400), slice(16384, 24576), slice(199_990, None),
                                  slice(5, 5), slice(10, 100_000, 7)])
def test_pandas_row_slices_of_text(rows):
    """to_pandas(rows=) (a Dask partition) reads Text straight from Arrow for the blocks that
    hold the rows (across block boundaries, to the end, empty), and through str objects for
    a slice with a step: ML.NET's values either way."""
    pytest.importorskip("pandas")
    doc = sidecar("multiblock_200k_deflate")
    index = {c["name"]: c["index"] for c in doc["columns"]}
    df = idv.to_pandas(fixture("multiblock_200k_deflate"), ["Name", "Id"], rows=rows)
    want = doc["rows"][rows]
    assert df["Name"].tolist() == [row[index["Name"]] for row in want]
    assert df["Id"].tolist() == [row[index["Id"]] for row in want]


# ---- the Arrow C stream

def test_polars_and_duckdb_read_text_from_the_stream():
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    doc = sidecar("scalars_text")
    want = [row[0] for row in doc["rows"]]
    with idv.open(fixture("scalars_text")) as f:
        assert pl.DataFrame(f)["Txt"].to_list() == want
        con = duckdb.connect()
        con.register("t", f)
        got = [r[0] for r in con.sql("SELECT Txt FROM t").fetchall()]
    assert got == want


# ---- numpy 2's StringDType

@pytest.mark.parametrize("name", ["scalars_text", "mixed_maxbytes", "vectors_fixed",
                                  "vectors_variable", "vectors_sparse"])
def test_read_text_as_string_dtype_equals_mlnet(name):
    if not hasattr(getattr(np, "dtypes", None), "StringDType"):
        pytest.skip("numpy < 2 has no StringDType")
    doc = sidecar(name)
    got = idv.read(SAMPLE_DIR / f"{name}.idv", text="StringDType")
    for dcol in _text_columns(doc):
        values = got[dcol["name"]]
        want = expected_column(doc, dcol["index"])
        if isinstance(values, idv.Ragged):
            assert values.values.dtype == np.dtypes.StringDType()
            assert values.offsets.tolist() == want.offsets.tolist()
            values, want = values.values, want.values
        assert values.dtype == np.dtypes.StringDType(), dcol["name"]
        assert values.tolist() == want.tolist(), dcol["name"]
    rows = idv.read(fixture("scalars_text"), rows=[0, 5, 13], text="StringDType")["Txt"]
    assert rows.dtype == np.dtypes.StringDType()
    assert rows.tolist() == [sidecar("scalars_text")["rows"][i][0] for i in (0, 5, 13)]


def test_read_text_option_is_checked():
    with pytest.raises(ValueError, match="text must be one of 'object', 'StringDType'"):
        idv.read(fixture("scalars_text"), text="str")


# ---- the two decoders against Python's own UTF-8 and UTF-16

def _payload(values, bounds=None, raw=None):
    from craft import text_payload
    return bytearray(text_payload(values, bounds, raw))


def _python_reading(values_bytes, bounds):
    """What ML.NET's rules (reference section 4.3) make of UTF-8 bytes and boundaries, by
    Python's strict UTF-8 decoder and UTF-16 encoder: the strings, or None when invalid."""
    try:
        text = values_bytes.decode("utf-8")
    except UnicodeDecodeError:
        return None
    units = text.encode("utf-16-le")
    if len(units) // 2 != (bounds[-1] & 0x7FFFFFFF if bounds else 0):
        return None
    out, prev = [], 0
    for b in bounds:
        m = b & 0x7FFFFFFF
        if (b >= 0 and m < prev) or (b < 0 and m != prev):
            return None
        piece = units[2 * prev:2 * m]
        try:
            out.append(piece.decode("utf-16-le"))     # a split surrogate pair fails here
        except UnicodeDecodeError:
            return None
        prev = m
    return out


def test_non_ascii_at_every_position_of_a_word(tmp_path):
    """The scan for the next non-ASCII byte (32 bytes, then 8, at a time) finds it at every
    offset within a word and after ASCII runs of 0 to 80 bytes: the strings read back on the
    Arrow path are the strings written."""
    pytest.importorskip("pyarrow", reason="the Arrow path needs pyarrow")
    values = []
    for run in range(81):
        for ch in ("é", "中", "😀"):
            values.append("a" * run + ch + "b" * (run % 7))
            values.append("x" * (run % 9))
    path = tmp_path / "runs.idv"
    idv.write(path, {"t": np.array(values, dtype=object)}, rows_per_block=37)
    assert idv.to_arrow(path).column("t").to_pylist() == values
    with idv.open(path) as f:
        assert f["t"].read().tolist() == values


def test_random_payloads_agree_with_python_on_both_paths():
    """Random strings (ASCII, Latin, CJK, emoji, NUL, legacy NA entries), some payloads with
    one byte changed: the Arrow path and the object path accept exactly what Python's codecs
    accept, and give its strings."""
    codec = idv._codecs.resolve("TextSpan", b"")
    rng = np.random.default_rng(10)
    alphabet = ["a", "Z", " ", "\x00", "é", "ß", "€", "中", "한", "😀", "𝄞"]
    checked = {True: 0, False: 0}
    for trial in range(400):
        n = int(rng.integers(0, 12))
        values = ["".join(rng.choice(alphabet, int(rng.integers(0, 6)))) for _ in range(n)]
        # some entries the legacy NA (1.1.1.5): the previous end with the high bit, no text
        bounds, end = [], 0
        for v in values:
            na = v == "" and rng.random() < 0.5
            end += len(v.encode("utf-16-le")) // 2
            bounds.append(end | 0x80000000 if na else end)
        payload = _payload(values, [b - 2**32 if b >= 2**31 else b for b in bounds],
                           "".join(values).encode("utf-8"))
        if trial % 2 and len(payload) > 4:
            pos = int(rng.integers(4, len(payload)))
            payload[pos] = int(rng.integers(0, 256))
        count = int.from_bytes(payload[:4], "little", signed=True)
        if count != n:
            continue
        bounds = [int(x) for x in np.frombuffer(bytes(payload[4:4 + 4 * n]), "<i4")]
        head = 4 + 4 * n
        length, shift, q = 0, 0, head
        while q < len(payload):
            length |= (payload[q] & 0x7F) << shift
            shift += 7
            q += 1
            if not payload[q - 1] & 0x80:
                break
        want = _python_reading(bytes(payload[q:]), bounds) if q + length == len(payload) \
            else None
        objects = np.empty(n, object)
        try:
            end = codec.decode_into(memoryview(bytes(payload)), 0, n, objects)
            got_objects = list(objects) if end == len(payload) else None
        except idv.IdvFormatError:
            got_objects = None
        try:
            offsets, data, end = codec.arrow_at(memoryview(payload), 0, n)
            got_arrow = [data[offsets[i]:offsets[i + 1]].tobytes().decode("utf-8")
                         for i in range(n)] if end == len(payload) else None
        except idv.IdvFormatError:
            got_arrow = None
        assert got_objects == want, (values, bytes(payload))
        assert got_arrow == want, (values, bytes(payload))
        checked[want is not None] += 1
    assert checked[True] > 100 and checked[False] > 50, checked


# ---- string views (what polars takes as they are), made as the blocks are decoded

def test_string_views_are_arrows_own():
    """_codecs.string_views over strings of every length around the 12 bytes held in a view
    (ASCII, multi-byte, NUL), with the text ending at the last string's end (the view's
    16-byte load falls back to a copy there): pyarrow's own views of the same strings hold
    the same 16 bytes where the string is inline, the same length and prefix where not; the
    longer ones point into the data buffer numbered as asked."""
    from idv import _codecs
    rng = np.random.default_rng(12)
    alphabet = ["a", "\x00", "é", "中", "😀"]
    for trial in range(300):
        n = int(rng.integers(0, 40))
        values = ["".join(rng.choice(alphabet, int(rng.choice([0, 1, 3, 4, 5, 8, 11, 12, 13,
                                                                  20]))))
                  for _ in range(n)]
        encoded = [v.encode("utf-8") for v in values]
        offsets = np.cumsum([0] + [len(e) for e in encoded]).astype(np.int32)
        data = np.frombuffer(b"".join(encoded), np.uint8).copy()
        out = np.full(16 * n, 0xAB, np.uint8)
        buffer = int(trial % 3)
        longer = _codecs.string_views(offsets, data, out, buffer)
        assert longer == sum(len(e) > 12 for e in encoded)     # those needing `data`
        ours = out.reshape(-1, 16)
        arrow = np.frombuffer(pa.array(values, pa.string_view()).buffers()[1], np.uint8,
                              16 * n).reshape(-1, 16)
        for i, e in enumerate(encoded):
            if len(e) <= 12:
                assert ours[i].tobytes() == arrow[i].tobytes(), (values[i], ours[i])
            else:
                assert ours[i, :8].tobytes() == arrow[i, :8].tobytes()
                assert int.from_bytes(ours[i, 8:12].tobytes(), "little") == buffer
                assert int.from_bytes(ours[i, 12:].tobytes(), "little") == offsets[i]
        array = pa.Array.from_buffers(pa.string_view(), n, [None, pa.py_buffer(out)] +
                                      [pa.py_buffer(b"")] * buffer + [pa.py_buffer(data)])
        array.validate(full=True)
        assert array.to_pylist() == values


@pytest.mark.parametrize("offsets, size, room", [
    ([0, 5, 3], 5, 32),         # decreasing
    ([0, 6], 5, 16),            # past the text
    ([-1, 2], 5, 16),           # before it
    ([0, 2, 4], 5, 16),         # room for one view of two
])
def test_string_views_refuse_spans_outside_their_text(offsets, size, room):
    from idv import _codecs
    with pytest.raises(ValueError):
        _codecs.string_views(np.array(offsets, np.int32), np.zeros(size, np.uint8),
                             np.zeros(room, np.uint8))


def _viewed(path, columns, **kw):
    """window_reader's table with Text as string views, checked whole, the views turned back
    into strings by pyarrow."""
    from idv._interop.arrow import window_reader
    table = window_reader(path, columns, text_views=True, **kw).read_all()
    table.validate(full=True)
    return table


@pytest.mark.parametrize("path", TEXT_FILES)
@pytest.mark.parametrize("batch_rows", [None, 3])
def test_text_as_string_views_equals_mlnet(path, batch_rows):
    doc = sidecar(path)
    dcols = _text_columns(doc)
    table = _viewed(path, [c["index"] for c in dcols], batch_rows=batch_rows)
    scalars = [c["name"] for c in dcols if not c["type_string"].startswith("Vector")]
    assert [f.name for f in table.schema if f.type == pa.string_view()] == scalars
    _check(pa.table([c.cast(pa.string()) if c.type == pa.string_view() else c
                     for c in table.columns], names=table.column_names), doc, dcols)


def test_string_views_through_filters_and_small_files(tmp_path):
    """Views of long and short strings over several blocks, and of a dataset's small files
    read together; where idv tests rows (a filter on another column, or on the Text column
    itself), Text is still given as views: made as the matches are taken out of the blocks
    (a test of one column) or from the strings kept (a test of two)."""
    words = np.array(["", "a", "twelve bytes", "thirteen byte", "a much longer value é",
                      "中文字符"], object)
    n = 5000
    data = {"k": np.arange(n, dtype=np.int64), "t": words[np.arange(n) * 7 % len(words)]}
    idv.write(tmp_path / "one.idv", data, rows_per_block=300)
    (tmp_path / "many").mkdir()
    for i in range(4):
        idv.write(tmp_path / "many" / f"{i}.idv",
                  {k: v[i * 100:(i + 1) * 100] for k, v in data.items()})
    got = _viewed(tmp_path / "one.idv", ["t", "k"])
    assert got.column("t").type == pa.string_view()
    assert got.column("t").to_pylist() == list(data["t"])
    for where, keep in [([("k", ">=", 1234)], data["k"] >= 1234),
                        ([("k", "<", 7), ("k", ">", 4993)], np.zeros(n, bool)),
                        ([("t", "==", "a much longer value é")],
                         data["t"] == "a much longer value é")]:
        got = _viewed(tmp_path / "one.idv", ["t", "k"], filter=where)
        assert got.column("t").type == pa.string_view()
        assert got.column("t").to_pylist() == list(data["t"][keep])
        assert got.column("k").to_pylist() == data["k"][keep].tolist()
    with idv.dataset(tmp_path / "many") as ds:
        got = _viewed(ds, ["t"])
    assert got.column("t").type == pa.string_view()
    assert got.column("t").to_pylist() == list(data["t"][:400])


def test_string_views_count_against_the_memory_limit(tmp_path):
    """Views take 16 bytes a string, more than the text of short strings (4 bytes each
    here, empty): they are charged to the file's memory limit as they are made, beyond
    what the window of blocks itself needs."""
    from idv._interop.arrow import window_reader
    path = tmp_path / "empty.idv"
    idv.write(path, {"t": np.array([""] * 500_000, object)}, rows_per_block=500_000)
    with idv.open(path, memory_limit=3_000_000) as f:     # the block's 2 MB fit, not 8 MB
        with pytest.raises(idv.MemoryLimitError, match="string views of column 't'"):
            window_reader(f, ["t"], text_views=True).read_all()
        assert window_reader(f, ["t"]).read_all().column("t").to_pylist() == [""] * 500_000
    with idv.open(path, memory_limit=9_000_000) as f:
        assert window_reader(f, ["t"], text_views=True).read_all().num_rows == 500_000
