"""Arrow strings and numbers into .idv blocks without Python objects.

Text from Arrow (string, large_string, string_view; sliced, chunked; pandas' Arrow-backed
strings) is encoded from Arrow's buffers: the UTF-8 bytes as they are and the block ends
counted in UTF-16 units in Cython. The reference is the writer's output from Python str, which
is ML.NET's own bytes with backend="zlib" (test_writer); here ML.NET also writes the same
values itself and must produce the very bytes the Arrow path wrote.
"""
from __future__ import annotations

import io
import json
import random

import numpy as np
import pytest

import idv
from idv import _encode
from idv._writer.values import Utf8Text
from write_spec import item_cells

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

# non-ASCII of each UTF-8 length, emoji (surrogate pairs: 2 UTF-16 units), "", NUL, long
VALUES = ["", "a", "abc", "é", "ß€", "中文字", "😀", "a😀b", "\x00", "x\x00y", "🇫🇷🏳️‍🌈",
          "\U0010FFFF", "\u07FF\u0800\uFFFF\U00010000", "ascii only here", "x" * 70_000,
          "é" * 40_000 + "😀" * 10_000]
ZLIB = dict(backend="zlib", checksums=False, statistics=False)
# a DEFLATE library whose output repeats byte for byte: ISA-L's, from the writer's threads, can
# differ by a byte in a block from run to run (the same values)
_REPEATABLE = "libdeflate" if "libdeflate" in idv.compression.installed() else "zlib"


def _values(n, seed=0):
    rng = random.Random(seed)
    return [rng.choice(VALUES) if rng.random() < 0.3 else
            "".join(rng.choice("abcé😀\x00中 ") for _ in range(rng.randint(0, 12)))
            for _ in range(n)]


def _bytes_from_str(values, rows_per_block=None, **kw):
    buf = io.BytesIO()
    idv.write(buf, {"s": np.array(values, object), "n": np.arange(len(values), dtype=np.int32)},
              rows_per_block=rows_per_block, **ZLIB, **kw)
    return buf.getvalue()


@pytest.fixture
def no_str_encoder(monkeypatch):
    """The str encoder and its unit counter fail: what is written went through Arrow's bytes."""
    _refuse_str(monkeypatch)


# ---------------------------------------------------------------------------------------------
# the kernel: UTF-16 units and UTF-8 checks against Python's codecs
# ---------------------------------------------------------------------------------------------

def _units_of(b):
    return len(b.decode("utf-8").encode("utf-16-le")) // 2


def _check_kernel(pieces):
    data = b"".join(pieces)
    offsets = np.cumsum([0] + [len(p) for p in pieces]).astype(np.int64)
    units, bad = _encode.utf8_units(offsets, np.frombuffer(data, np.uint8))
    first_bad = -1
    for i, p in enumerate(pieces):
        try:
            p.decode("utf-8")
        except UnicodeDecodeError:
            first_bad = i
            break
    assert bad == first_bad, pieces
    if bad < 0:
        want = np.cumsum([0] + [_units_of(p) for p in pieces])
        got = offsets - offsets[0] if units is None else units
        assert got.tolist() == want.tolist()
        assert (units is None) == all(p.isascii() for p in pieces)


@pytest.mark.parametrize("bad", [
    b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xc2", b"\xe0\x80\x80", b"\xe0\x9f\xbf",
    b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xe2\x82", b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf",
    b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\xf0\x9f\x98", b"abcdefgh\xe2\x82\xac\x80",
    b"abcdefghijklmnop\xc3"])
def test_utf8_check_refuses_what_python_refuses(bad):
    _check_kernel([b"ok", "é😀".encode(), bad, b"later"])


def test_utf8_units_match_python_on_random_bytes():
    rng = random.Random(1)
    alphabet = [b"a", b"\x00", "é".encode(), "€".encode(), "😀".encode(), b"\x80", b"\xed\xa0",
                b"\xf4\x90", b"\xe2", b"abcdefgh"]
    for _ in range(3000):
        pieces = [b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
                  for _ in range(rng.randint(1, 5))]
        _check_kernel(pieces)
    valid = [v.encode() for v in VALUES] + [s.encode() for s in _values(500)]
    _check_kernel(valid)


def test_utf8_units_refuses_broken_offsets():
    data = np.frombuffer(b"abcdef", np.uint8)
    with pytest.raises(ValueError, match="outside"):
        _encode.utf8_units(np.array([0, 7], np.int64), data)
    with pytest.raises(ValueError, match="decrease"):
        _encode.utf8_units(np.array([0, 4, 2, 6], np.int64), data)


def test_utf8_units_look_only_at_the_values_bytes():
    """A slice's values (offsets from past the buffer's start, ending before its end) are
    judged on their own bytes: what lies around them is neither checked nor counted."""
    data = np.frombuffer(b"\xff" * 40 + b"ab" + b"x" * 37 + "é".encode() + b"\xff" * 3, np.uint8)
    assert _encode.utf8_units(np.array([40, 41, 42, 79], np.int64), data) == (None, -1)
    units, bad = _encode.utf8_units(np.array([40, 42, 81], np.int64), data)
    assert bad == -1 and units.tolist() == [0, 2, 40]
    assert _encode.utf8_units(np.array([40, 42, 82], np.int64), data)[1] == 1


def test_encode_text_utf8_equals_the_str_encoder():
    vals = VALUES + _values(300)
    enc = [v.encode() for v in vals]
    offsets = np.cumsum([0] + [len(e) for e in enc]).astype(np.int64)
    text = Utf8Text.checked(offsets, b"".join(enc), str)
    assert text.payload() == _encode.encode_text(np.array(vals, object))
    for a, b in [(0, 0), (3, 9), (14, 16), (100, len(vals))]:      # slices, as blocks are cut
        assert text[a:b].payload() == _encode.encode_text(np.array(vals[a:b], object))
        assert text[a:b].copy().payload() == text[a:b].payload()
    joined = Utf8Text.concat([text[0:5], text[5:20].copy(), text[20:]])
    assert joined.payload() == text.payload()


# ---------------------------------------------------------------------------------------------
# byte identity: Arrow in, the same file as from Python str (ML.NET's bytes with zlib)
# ---------------------------------------------------------------------------------------------

def _arrow_forms():
    vals = _values(3000)
    n = np.arange(3000, dtype=np.int32)
    big = ["pad"] * 50 + vals + ["tail"] * 7
    sliced = pa.array(big, pa.string()).slice(50, 3000)             # non-zero offset
    chunked = pa.chunked_array([pa.array(vals[:1], pa.large_string()),
                                pa.array(vals[1:1500], pa.large_string()),
                                pa.array([], pa.large_string()),
                                pa.array(vals[1500:], pa.large_string())])
    return vals, n, {
        "string": pa.table({"s": pa.array(vals, pa.string()), "n": n}),
        "large_string": pa.table({"s": pa.array(vals, pa.large_string()), "n": n}),
        "string_view": pa.table({"s": pa.array(vals, pa.string_view()), "n": n}),
        "sliced": pa.table({"s": sliced, "n": n}),
        "chunked": pa.table({"s": chunked, "n": pa.chunked_array([n[:10], n[10:]])}),
        "record_batch": pa.record_batch({"s": pa.array(vals), "n": pa.array(n)}),
        "sliced_large_chunks": pa.table({"s": pa.chunked_array(
            [pa.array(big, pa.large_string()).slice(50, 1000),
             pa.array(big, pa.large_string()).slice(1050, 2000)]), "n": n}),
        "dictionary": pa.table({"s": pa.array(vals).dictionary_encode(), "n": n}),
    }


@pytest.fixture(scope="module")
def from_str():
    """rows_per_block -> the file written from the same values as Python str (module-scoped:
    made before no_str_encoder patches the str encoder)."""
    vals, _, _ = _arrow_forms()
    return {rpb: _bytes_from_str(vals, rpb) for rpb in (None, 7)}


@pytest.mark.parametrize("form", ["string", "large_string", "string_view", "sliced", "chunked",
                                  "record_batch", "sliced_large_chunks", "dictionary"])
@pytest.mark.parametrize("rows_per_block", [None, 7])
def test_write_arrow_table_bytes_equal_str(from_str, form, rows_per_block, no_str_encoder):
    vals, n, forms = _arrow_forms()
    buf = io.BytesIO()
    types = {"s": idv.Text} if form == "dictionary" else None    # else a key with KeyValues
    idv.write(buf, forms[form], rows_per_block=rows_per_block, types=types, **ZLIB)
    assert buf.getvalue() == from_str[rows_per_block]
    assert idv.read(buf.getvalue())["s"].tolist() == vals


@pytest.mark.parametrize("form", ["string", "chunked", "dictionary"])
def test_write_dict_of_arrow_arrays_equals_the_table(from_str, form, no_str_encoder):
    """idv.write of a dict, or of (name, values) pairs, whose values are the table's Arrow
    columns: the table's types and the same bytes, Text without a str per value."""
    vals, n, forms = _arrow_forms()
    table = forms[form]
    types = {"s": idv.Text} if form == "dictionary" else None
    as_dict = {"s": table.column("s"), "n": table.column("n")}
    for data in (as_dict, list(as_dict.items())):
        buf = io.BytesIO()
        idv.write(buf, data, types=types, **ZLIB)
        assert buf.getvalue() == from_str[None]


def test_write_frames_of_other_arrow_libraries():
    """A polars DataFrame, its Series in a dict or in pairs, and a DuckDB relation (Arrow's
    C stream interface) write the bytes their pyarrow Table writes, through idv.write and
    Writer.write_batch; a polars LazyFrame is refused with what to do."""
    pl = pytest.importorskip("polars", reason="writing a polars frame needs polars")
    duckdb = pytest.importorskip("duckdb", reason="writing a DuckDB relation needs duckdb")
    vals, n, _ = _arrow_forms()
    df = pl.DataFrame({"s": vals, "n": n, "v": [[float(i), 0.5] for i in range(len(n))]})
    table = df.to_arrow()
    want = io.BytesIO()
    idv.write(want, table, **ZLIB)
    con = duckdb.connect()
    con.register("t", table)
    for data in (df, {"s": df["s"], "n": df["n"], "v": df["v"]}, list(df.to_dict().items()),
                 con.sql("select * from t")):
        buf = io.BytesIO()
        idv.write(buf, data, **ZLIB)
        assert buf.getvalue() == want.getvalue()
    with idv.open(want.getvalue()) as f:
        schema = f.schema
    buf = io.BytesIO()
    with idv.Writer(buf, schema, **ZLIB) as w:
        w.write_batch(df.slice(0, 10))
        w.write_batch({"s": df["s"][10:20], "n": df["n"][10:20], "v": df["v"][10:20]})
        w.write_batch(list(df.slice(20).to_dict().items()))
    assert buf.getvalue() == want.getvalue()
    with pytest.raises(TypeError, match=r"not LazyFrame: collect\(\) it first"):
        idv.write(io.BytesIO(), df.lazy())
    if hasattr(pl, "Int128"):        # a type pyarrow cannot import: a TypeError, named
        with pytest.raises(TypeError, match="pyarrow cannot read|no ML.NET type"):
            idv.write(io.BytesIO(), pl.DataFrame({"c": pl.Series([1], dtype=pl.Int128)}))


def test_write_structured_arrays_datasets_and_hugging_face_datasets():
    """A numpy structured array writes its fields as columns; a pyarrow Dataset, an
    idv.arrow_dataset (the .idv's types and metadata kept) and a Hugging Face Dataset (its
    rows as selected) are written as their Tables are."""
    import pyarrow.dataset as pds
    rec = np.array([(1, 2.5), (3, 4.5)], dtype=[("a", "<i4"), ("b", "<f8")])
    buf = io.BytesIO()
    idv.write(buf, rec)
    with idv.open(buf.getvalue()) as f:
        assert [str(c.type) for c in f.columns] == ["Int32", "Double"]
        assert f["a"].read().tolist() == [1, 3] and f["b"].read().tolist() == [2.5, 4.5]
    want, got = io.BytesIO(), io.BytesIO()
    table = pa.table({"n": [1, 2, 3], "s": ["x", "y", "z"]})
    idv.write(want, table, **ZLIB)
    idv.write(got, pds.dataset(table), **ZLIB)
    assert got.getvalue() == want.getvalue()
    again = io.BytesIO()
    idv.write(again, idv.arrow_dataset(idv.sample_path()))
    with idv.open(again.getvalue()) as a, idv.open(idv.sample_path()) as b:
        assert a.schema == b.schema
        assert all(np.array_equal(a[n].read(), b[n].read()) for n in ("Id", "Price", "City"))
        assert a["Title"].read().tolist() == b["Title"].read().tolist()
    datasets = pytest.importorskip("datasets", reason="Hugging Face datasets not installed")
    hf = datasets.Dataset.from_dict({"n": [1, 2, 3], "s": ["x", "y", "z"]}).select([2, 0])
    buf = io.BytesIO()
    idv.write(buf, hf)
    assert idv.read(buf.getvalue())["s"].tolist() == ["z", "x"]


def _batched(table, rows):
    return pa.Table.from_batches(table.to_batches(max_chunksize=rows), table.schema)


def test_streams_are_written_as_their_tables():
    """A RecordBatchReader, a pyarrow Dataset of several files' batches and idv.arrow_dataset
    are written a batch at a time, to the bytes of the Table they hold: texts, a vector, a
    dictionary column (a Dataset's KeyValues gathered first; a reader's held whole for them),
    `types=` and `metadata=` as given."""
    import pyarrow.dataset as pds
    n = 10_000
    rng = np.random.default_rng(5)
    table = pa.table({
        "x": rng.random(n), "i": pa.array(rng.integers(-9, 9, n), pa.int32()),
        "s": [f"s{v}" for v in rng.integers(0, 50, n)],
        "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(3 * n), pa.float32()), 3),
        "k": pa.array([["b", "a", "c"][v] for v in rng.integers(0, 3, n)]).dictionary_encode()})
    options = dict(types={"i": idv.Int64}, metadata={"x": {"Note": "kept"}}, rows_per_block=777,
                   **ZLIB)
    want = io.BytesIO()
    idv.write(want, table, **options)
    plain = table.drop_columns(["k"])
    want_plain = io.BytesIO()
    idv.write(want_plain, plain, **options)
    pieces = pds.dataset([pds.dataset(_batched(table.slice(a, 2_500), 999))
                          for a in range(0, n, 2_500)])
    for data, expected in [(pieces, want), (pa.RecordBatchReader.from_batches(
            table.schema, _batched(table, 1_234).to_batches()), want),
            (pa.RecordBatchReader.from_batches(
                plain.schema, _batched(plain, 1_234).to_batches()), want_plain)]:
        got = io.BytesIO()
        idv.write(got, data, **options)
        assert got.getvalue() == expected.getvalue(), type(data).__name__



def test_an_arrow_dataset_of_idv_files_is_written_as_its_table(tmp_path):
    """idv.arrow_dataset, streamed, gives the bytes of its Table written whole."""
    path = tmp_path / "a.idv"
    idv.write(path, {"x": np.arange(5_000.0), "s": [f"t{i % 7}" for i in range(5_000)]},
              rows_per_block=600)
    again, direct = io.BytesIO(), io.BytesIO()
    idv.write(direct, idv.arrow_dataset(path).to_table(), **ZLIB)
    idv.write(again, idv.arrow_dataset(path), **ZLIB)
    assert again.getvalue() == direct.getvalue()


def test_a_reader_is_written_without_holding_its_batches():
    """Each batch of a RecordBatchReader is written and let go before the next is read: the
    Arrow memory in use stays about a batch, not the stream's 24 MB."""
    schema = pa.schema([("x", pa.float64())])
    peak = []

    def batches():
        for i in range(24):
            peak.append(pa.total_allocated_bytes())
            values = pa.array(np.full(1 << 17, i, np.float32)).cast(pa.float64())  # pool's
            yield pa.record_batch([values], schema=schema)
    start = pa.total_allocated_bytes()
    buf = io.BytesIO()
    idv.write(buf, pa.RecordBatchReader.from_batches(schema, batches()))
    assert idv.read(buf.getvalue())["x"][-1] == 23.0
    assert max(peak) - start < 8 << 20, (max(peak) - start) >> 20


def test_a_streamed_value_refused_names_the_row_of_the_file(tmp_path):
    """A null Text in the third batch of a reader names its row in the file, and the write
    leaves nothing behind."""
    schema = pa.schema([("s", pa.string())])
    batches = [pa.record_batch([pa.array(["a"] * 100)], schema=schema)] * 2 + [
        pa.record_batch([pa.array(["a", None])], schema=schema)]
    dest = tmp_path / "s.idv"
    with pytest.raises(ValueError, match="row 201"):
        idv.write(dest, pa.RecordBatchReader.from_batches(schema, batches))
    assert list(tmp_path.iterdir()) == []


def test_write_dict_of_arrow_arrays_typed_as_a_table():
    """Arrow types as from_arrow gives them (lists, dictionaries, nulls as NaN), by position
    where a name repeats, the caller's types first."""
    buf = io.BytesIO()
    idv.write(buf, [("c", pa.array([1.5, None])), ("k", pa.array(["a", "b"]).dictionary_encode()),
                    ("v", pa.array([[1.0], [2.0, 3.0]])), ("c", pa.array(["x", "y"]))])
    with idv.open(buf.getvalue()) as f:
        assert [str(c.type) for c in f.schema] == [
            "Double", "Key<UInt32, 2>", "Vector<Double>", "Text"]
        assert f["c"].read().tolist() == ["x", "y"]
        assert f["k"].metadata["KeyValues"].tolist() == ["a", "b"]
    buf = io.BytesIO()
    idv.write(buf, {"c": pa.array([1, 2])}, types={0: idv.Single})
    with idv.open(buf.getvalue()) as f:
        assert str(f.schema["c"].type) == "Single"


@pytest.mark.parametrize("dtype", ["str", "string[pyarrow]", "large_string[pyarrow]",
                                   "string[python]", "object"])
def test_write_pandas_strings_bytes_equal_str(from_str, dtype, monkeypatch):
    """Arrow-backed pandas strings (pandas 3's str, string[pyarrow], ArrowDtype) take the Arrow
    path; Python-backed ones (string[python], object) the str path; the bytes are the same."""
    pd = pytest.importorskip("pandas")
    if dtype == "large_string[pyarrow]":
        dtype = pd.ArrowDtype(pa.large_string())
    vals, n, _ = _arrow_forms()
    df = pd.DataFrame({"s": pd.Series(vals, dtype=dtype), "n": n})
    arrow_backed = idv._values.infer.arrow_of(df["s"]) is not None
    assert arrow_backed == (dtype not in ("string[python]", "object"))
    if arrow_backed:
        _refuse_str(monkeypatch)
    buf = io.BytesIO()
    idv.write(buf, df, **ZLIB)
    assert buf.getvalue() == from_str[None]


def test_writer_write_batch_takes_arrow_arrays(from_str, no_str_encoder):
    """write_batch with Arrow arrays, chunked arrays, a pandas Series of pyarrow strings and a
    RecordBatch, in batches that do not fall on block edges: the same bytes."""
    pd = pytest.importorskip("pandas")
    vals, n, _ = _arrow_forms()
    s_view = pa.array(vals, pa.string_view())
    buf = io.BytesIO()
    with idv.Writer(buf, {"s": idv.Text, "n": idv.Int32}, rows_per_block=7, **ZLIB) as w:
        w.write_batch({"s": s_view.slice(0, 5), "n": pa.array(n[:5])})
        w.write_batch(s=pa.chunked_array([vals[5:100], vals[100:1000]]), n=n[5:1000])
        w.write_batch({"s": pd.Series(vals[1000:2000], dtype="string[pyarrow]"),
                       "n": pa.chunked_array([n[1000:2000]])})
        w.write_batch(pa.record_batch({"n": pa.array(n[2000:]), "s": s_view.slice(2000)}))
    assert buf.getvalue() == from_str[7]


def test_writer_joins_arrow_and_str_batches(from_str):
    """A Text column fed Arrow strings and str lists in turn (joined in one block) writes the
    same bytes."""
    vals, n, _ = _arrow_forms()
    buf = io.BytesIO()
    with idv.Writer(buf, {"s": idv.Text, "n": idv.Int32}, **ZLIB) as w:
        w.write_batch({"s": pa.array(vals[:10]), "n": n[:10]})
        w.write_batch({"s": vals[10:20], "n": n[10:20]})
        w.write_batch({"s": pa.array(vals[20:]), "n": n[20:]})
    assert buf.getvalue() == from_str[None]


# ---------------------------------------------------------------------------------------------
# ML.NET writes the same values: the same bytes, and it loads ours with those values
# ---------------------------------------------------------------------------------------------

def test_arrow_text_bytes_equal_mlnet(tmp_path, oracle):
    vals = VALUES + _values(20_000, seed=3)
    table = pa.table({"s": pa.chunked_array([pa.array(vals[:9000], pa.string_view()),
                                             pa.array(vals[9000:], pa.string_view())]),
                      "f": pa.array(np.linspace(0, 1, len(vals), dtype=np.float32))})
    ours = tmp_path / "ours.idv"
    idv.write(ours, table, **ZLIB)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"rows": len(vals), "columns": [
        {"name": "s", "type": "Text", "values": vals},
        {"name": "f", "type": "Single", "values": item_cells(idv.Single,
                                                             table.column("f").to_numpy())}]}))
    theirs = tmp_path / "mlnet.idv"
    oracle.write_spec(spec, theirs, options=["--compression", "deflate",
                                             "--deterministic-block-order"])
    assert ours.read_bytes() == theirs.read_bytes()
    dump = oracle.dump(ours)
    assert [row[0] for row in dump["rows"]] == vals


# ---------------------------------------------------------------------------------------------
# numbers from Arrow's buffers
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("at,item", [(pa.float32(), idv.Single), (pa.float64(), idv.Double),
                                     (pa.int32(), idv.Int32), (pa.uint64(), idv.UInt64),
                                     (pa.int8(), idv.SByte)])
def test_numbers_are_not_copied(at, item):
    from idv._writer.arrow import arrow_column_values
    from idv._writer.columns import Column
    arr = pa.array(np.arange(1000) % 100, at).slice(10, 900)
    values = arrow_column_values(arr, item, "x")
    start = arr.buffers()[1].address + arr.offset * at.byte_width
    assert values.__array_interface__["data"][0] == start
    chunk, rows = Column(0, "x", item).prepare(arr)
    assert rows == 900 and chunk.__array_interface__["data"][0] == start
    assert chunk.tolist() == arr.to_pylist()


def test_text_bytes_are_not_copied():
    from idv._writer.columns import Column
    arr = pa.array(["ab", "é", "😀"] * 10).slice(3)
    chunk, rows = Column(0, "s", idv.Text).prepare(arr)
    assert isinstance(chunk, Utf8Text) and rows == 27
    assert chunk.data.__array_interface__["data"][0] == arr.buffers()[2].address
    assert chunk.to_objects().tolist() == arr.to_pylist()


# ---------------------------------------------------------------------------------------------
# bad input: nulls and invalid UTF-8, named by the row of the file
# ---------------------------------------------------------------------------------------------

def _invalid_utf8(n_before):
    good = [b"ok"] * n_before + [b"a\xc3(", b"z"]
    offsets = np.cumsum([0] + [len(x) for x in good]).astype(np.int32)
    return pa.Array.from_buffers(pa.string(), len(good), [None, pa.py_buffer(offsets.tobytes()),
                                                          pa.py_buffer(b"".join(good))])


@pytest.mark.parametrize("make,match", [
    (lambda: pa.table({"s": pa.array(["a", None])}), r"column 's' row 1: null, but Text"),
    (lambda: pa.table({"s": pa.chunked_array([["a"] * 5, ["b", None]], pa.large_string())}),
     r"column 's' row 6: null"),
    (lambda: pa.table({"s": pa.array(["a", "b", None], pa.string_view())}), r"'s' row 2: null"),
    (lambda: pa.table({"s": pa.array([None, "x", None]).slice(1)}), r"'s' row 1: null"),
    (lambda: pa.table({"s": pa.chunked_array([pa.array(["x"] * 3), _invalid_utf8(4)])}),
     r"column 's' row 7: the bytes b'a\\xc3\(' are not valid UTF-8"),
])
def test_arrow_text_refused(make, match, tmp_path):
    dest = tmp_path / "x.idv"
    with pytest.raises(ValueError, match=match):
        idv.write(dest, make())
    assert list(tmp_path.iterdir()) == []


def test_write_batch_names_the_row_of_the_file(tmp_path):
    dest = tmp_path / "x.idv"
    with idv.Writer(dest, {"s": idv.Text}) as w:
        w.write_batch({"s": pa.array(["a"] * 10)})
        with pytest.raises(ValueError, match=r"column 's' row 13: null"):
            w.write_batch({"s": pa.array(["b", "c", "d", None])})
        with pytest.raises(ValueError, match=r"column 's' row 16: .* not valid UTF-8"):
            w.write_batch({"s": _invalid_utf8(6)})
        w.write_batch({"s": pa.array(["e"])})       # the refused batches left nothing behind
    assert idv.read(dest)["s"].tolist() == ["a"] * 10 + ["e"]


def test_pandas_arrow_strings_with_missing_values_refused():
    pd = pytest.importorskip("pandas")
    for dtype in ("str", "string[pyarrow]"):
        df = pd.DataFrame({"s": pd.Series(["a", "b", None], dtype=dtype)})
        with pytest.raises(ValueError, match=r"column 's' row 2: .*, but Text has no missing value"):
            idv.write(io.BytesIO(), df)


def test_convert_parquet_text_null_names_the_row(tmp_path):
    vals = ["x"] * 70_000 + [None]
    src = tmp_path / "n.parquet"
    pq.write_table(pa.table({"s": vals}), src, row_group_size=30_000)
    with pytest.raises(ValueError, match=r"column 's' row 70000: null, but Text"):
        idv.convert(src, tmp_path / "n.idv")
    assert not (tmp_path / "n.idv").exists()


# ---------------------------------------------------------------------------------------------
# idv convert: Parquet text -> .idv, the same file as from str
# ---------------------------------------------------------------------------------------------

def _refuse_str(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("Text went through Python str")
    monkeypatch.setattr(_encode, "encode_text", refuse)
    monkeypatch.setattr(_encode, "text_units", refuse)


def test_convert_parquet_text_equals_write_from_str(tmp_path, monkeypatch):
    """Parquet strings (row groups that do not fall on block edges) convert to the file that
    idv.write makes from the same values as str (checksums on; DEFLATE by a library whose
    bytes repeat, at its convert level)."""
    vals = _values(100_000, seed=5) + VALUES
    ref = tmp_path / "ref.idv"
    backend, level = idv.compression.convert_deflate(None, _REPEATABLE)
    idv.write(ref, {"s": np.array(vals, object)}, backend=backend, level=level)
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"s": pa.array(vals, pa.large_string())}), src,
                   row_group_size=40_000)
    out = tmp_path / "t.idv"
    _refuse_str(monkeypatch)
    assert idv.convert(src, out, backend=_REPEATABLE) == len(vals)
    assert out.read_bytes() == ref.read_bytes()


def test_cli_convert_level_and_backend(tmp_path):
    """idv convert --backend zlib gives the bytes of idv.write(backend="zlib") from str (ML.NET's
    with checksums off); --backend isal a file of the same values; both options only for .idv
    output."""
    from cli_run import assert_one_line_error, run
    vals = _values(30_000, seed=9) + VALUES
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"s": vals}), src, row_group_size=10_000)
    ref = tmp_path / "ref.idv"
    idv.write(ref, {"s": np.array(vals, object)}, backend="zlib")
    run("convert", src, tmp_path / "z.idv", "--backend", "zlib", "--level", "6", "-q",
        check_rc=0)
    assert (tmp_path / "z.idv").read_bytes() == ref.read_bytes()
    if "isal" in idv.compression.installed():
        run("convert", src, tmp_path / "i.idv", "--backend", "isal", "-q", check_rc=0)
        assert idv.read(tmp_path / "i.idv")["s"].tolist() == vals
    rc, out, err = run("convert", ref, tmp_path / "x.parquet", "--level", "1")
    assert rc == 2
    assert_one_line_error(err, "--level is for an .idv output")
    with pytest.raises(ValueError, match="backend= is for an .idv output, not Parquet"):
        idv.convert(ref, tmp_path / "y.parquet", backend="isal")


def test_convert_default_deflate(tmp_path):
    """convert's default DEFLATE: ISA-L's level 1 where installed, else libdeflate's 1, else
    zlib's 1; a level given keeps idv.write's library, a library given gets its convert
    level. The default's file holds the values in idv.write's blocks with that DEFLATE (its
    bytes compared with a library whose output repeats)."""
    from idv.compression import convert_deflate, installed
    fastest = next(n for n in ("isal", "libdeflate", "zlib") if n in installed())
    assert convert_deflate() == (fastest, 1)
    assert convert_deflate(6) == (None, 6)
    assert convert_deflate(None, "zlib") == ("zlib", 1)
    assert convert_deflate(9, "zlib") == ("zlib", 9)
    vals = _values(20_000, seed=3)
    nums = np.round(np.random.default_rng(3).random(20_000) * 100, 2).astype(np.float32)
    data = {"s": np.array(vals, object), "x": nums}
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"s": vals, "x": nums}), src)
    idv.convert(src, tmp_path / "fast.idv")
    idv.write(tmp_path / "w1.idv", data, backend=fastest, level=1)
    with idv.open(tmp_path / "fast.idv") as f, idv.open(tmp_path / "w1.idv") as w:
        assert [c.lookup["raw"].tolist() for c in f.columns] == \
            [c.lookup["raw"].tolist() for c in w.columns]
        got = f.read()
    assert got["s"].tolist() == vals
    assert np.array_equal(got["x"], nums)
    idv.convert(src, tmp_path / "same.idv", backend=_REPEATABLE)
    idv.write(tmp_path / "w2.idv", data, backend=_REPEATABLE, level=1)
    assert (tmp_path / "same.idv").read_bytes() == (tmp_path / "w2.idv").read_bytes()
    idv.convert(src, tmp_path / "six.idv", level=6)
    idv.write(tmp_path / "w6.idv", data)
    assert (tmp_path / "six.idv").read_bytes() == (tmp_path / "w6.idv").read_bytes()


@pytest.mark.parametrize("missing, chosen", [(("isal",), "libdeflate"),
                                             (("isal", "libdeflate"), "zlib")])
def test_convert_default_deflate_without_the_optional_libraries(missing, chosen, monkeypatch):
    """Without ISA-L the default falls back to libdeflate, without both to zlib (built in),
    each at its convert level; a missing library asked for by name is an ImportError."""
    import dataclasses
    from idv import compression
    if not compression.BACKENDS[chosen].installed:
        pytest.skip(f"{chosen} is not installed")
    for name in missing:
        monkeypatch.setitem(compression.BACKENDS, name,
                            dataclasses.replace(compression.BACKENDS[name], installed=False))
    assert compression.convert_deflate() == (chosen, 1)
    with pytest.raises(ImportError, match=missing[0]):
        compression.convert_deflate(None, missing[0])


# ---------------------------------------------------------------------------------------------
# vectors of Text: Arrow lists of strings
# ---------------------------------------------------------------------------------------------

def _rows(n, seed=11):
    rng = random.Random(seed)
    pool = _values(400, seed) + VALUES[:-2]
    return [[rng.choice(pool) for _ in range(rng.choice([0, 1, 2, 5]))] for _ in range(n)]


@pytest.mark.parametrize("rows_per_block", [None, 3])
def test_list_of_strings_bytes_equal_str(rows_per_block, monkeypatch):
    """list / large_list / list_view of strings (sliced, chunked) -> Vector<Text>, and
    fixed_size_list -> Vector<Text, 3>: the bytes of the same rows given as str."""
    rows = _rows(500)
    fixed = [(r + ["", "", ""])[:3] for r in rows]
    ref = io.BytesIO()
    idv.write(ref, [("v", idv.Ragged.from_list([np.array(r, object) for r in rows],
                                               dtype=object)),
                    ("f", np.array(fixed, object).reshape(len(rows), 3))],
              types={"v": idv.Vector(idv.Text), "f": idv.Vector(idv.Text, 3)},
              rows_per_block=rows_per_block, **ZLIB)
    big = [["pad"]] * 9 + rows
    fixed_arr = pa.FixedSizeListArray.from_arrays(pa.array([x for r in fixed for x in r]), 3)
    forms = {
        "list": pa.array(rows, pa.list_(pa.string())),
        "large_list sliced": pa.array(big, pa.large_list(pa.large_string())).slice(9),
        "chunked string_view": pa.chunked_array([pa.array(rows[:200],
                                                          pa.list_(pa.string_view())),
                                                 pa.array(rows[200:],
                                                          pa.list_(pa.string_view()))]),
    }
    _refuse_str(monkeypatch)
    for name, arr in forms.items():
        buf = io.BytesIO()
        idv.write(buf, pa.table({"v": arr, "f": fixed_arr}), rows_per_block=rows_per_block,
                  **ZLIB)
        assert buf.getvalue() == ref.getvalue(), name
        with idv.Writer(buf := io.BytesIO(), {"v": idv.Vector(idv.Text),
                                              "f": idv.Vector(idv.Text, 3)},
                        rows_per_block=rows_per_block, **ZLIB) as w:
            w.write_batch({"v": arr.slice(0, 7), "f": fixed_arr.slice(0, 7)})
            w.write_batch({"v": arr.slice(7), "f": fixed_arr.slice(7)})
        assert buf.getvalue() == ref.getvalue(), name


def test_list_of_strings_null_item_named():
    table = pa.table({"v": pa.array([["a"], [], ["b", None]], pa.list_(pa.string()))})
    with pytest.raises(ValueError, match=r"column 'v' row 2 item 1: null, but Text"):
        idv.write(io.BytesIO(), table)


@pytest.mark.parametrize("index_type", ["uint8", "uint32", "int8", "int64"])
def test_a_missing_key_of_any_index_type_is_the_missing_key(tmp_path, index_type):
    """A null in a dictionary of unsigned indices (polars' Categorical, DuckDB's ENUM) is the
    missing key 0, as in one of signed indices (it crashed converting -1 to the unsigned
    type)."""
    p = tmp_path / "k.idv"
    arr = pa.DictionaryArray.from_arrays(pa.array([1, None, 0], getattr(pa, index_type)()),
                                         pa.array(["a", "b"]))
    idv.write(p, pa.table({"k": arr}))
    with idv.open(p) as f:
        assert str(f["k"].type) == "Key<UInt32, 2>"
        assert f.read()["k"].tolist() == [2, 0, 1]
    pl = pytest.importorskip("polars", reason="the polars frames need polars")
    idv.write(p, pl.DataFrame({"k": pl.Series(["x", None, "y"], dtype=pl.Categorical)}))
    assert idv.read(p)["k"].tolist() == [1, 0, 2]


def test_columns_of_one_name_keep_each_its_own_type(tmp_path):
    """An Arrow table (or a Parquet file converted) whose names repeat is written as (name,
    values) pairs are: each column its own type, the earlier hidden (both took the last
    column's type: Int64 for a uint8 column, Double for an int64 one)."""
    table = pa.table([pa.array([1, 2], pa.uint8()), pa.array([1.5, 2.0])], names=["a", "a"])
    pq.write_table(table, tmp_path / "t.parquet")
    idv.write(tmp_path / "pairs.idv", [("a", np.array([1, 2], np.uint8)),
                                       ("a", np.array([1.5, 2.0]))])
    idv.write(tmp_path / "table.idv", table)
    idv.convert(tmp_path / "t.parquet", tmp_path / "converted.idv")
    for name in ("pairs", "table", "converted"):
        with idv.open(tmp_path / f"{name}.idv") as f:
            assert [str(c.type) for c in f.columns] == ["Byte", "Double"], name
            assert f[0].read().tolist() == [1, 2] and f[1].read().tolist() == [1.5, 2.0]


def test_the_streaming_writer_maps_dictionaries_and_categoricals_onto_a_keys_labels(tmp_path):
    """Writer.write_batch takes an Arrow dictionary (to_arrow's key columns, polars') or a
    pandas Categorical for a key column whose KeyValues it was given, by value, as idv.write
    maps them (both were refused: a file could not be copied batch by batch from to_arrow);
    without KeyValues it says to give them."""
    pd = pytest.importorskip("pandas", reason="the Categorical batch needs pandas")
    with idv.open(idv.sample_path()) as f:
        meta = {c.index: {k: (c.metadata_types[k], c.metadata[k]) for k in c.metadata_kinds}
                for c in f.columns}
        with idv.Writer(tmp_path / "copy.idv", f.schema, metadata=meta) as w:
            for batch in idv.record_batch_reader(f, batch_size=100):
                w.write_batch(batch)
        assert idv.read(tmp_path / "copy.idv")["City"].tolist() == f.read()["City"].tolist()
    labels = {"k": {"KeyValues": ["a", "b", "c"]}}
    with idv.Writer(tmp_path / "k.idv", [("k", idv.Key(idv.UInt32, 3))], metadata=labels) as w:
        w.write_batch({"k": pa.DictionaryArray.from_arrays(pa.array([1, None, 0], pa.uint8()),
                                                           pa.array(["c", "a"]))})
        w.write_batch({"k": pd.Series(pd.Categorical(["b", None]))})
    assert idv.read(tmp_path / "k.idv")["k"].tolist() == [1, 0, 3, 2, 0]
    w = idv.Writer(tmp_path / "bare.idv", [("k", idv.Key(idv.UInt32, 3))])
    with pytest.raises(TypeError, match="without KeyValues to map it onto; give them in"):
        w.write_batch({"k": pa.DictionaryArray.from_arrays(pa.array([0]), pa.array(["a"]))})
    w.abort()
    assert not (tmp_path / "bare.idv").exists()


def test_a_dictionary_of_string_views_given_text_is_written_as_its_values(tmp_path):
    """polars' Categorical (a dictionary of string views) written as Text is its values, as a
    pandas or Arrow one is (pyarrow has no kernel to decode a dictionary of views)."""
    pl = pytest.importorskip("polars", reason="the polars frames need polars")
    df = pl.DataFrame({"k": pl.Series(["x", None, "y"], dtype=pl.Categorical)})
    idv.write(tmp_path / "k.idv", df, types={"k": idv.Text}, missing_text="")
    assert idv.read(tmp_path / "k.idv")["k"].tolist() == ["x", "", "y"]


def test_list_views_are_written_as_the_rows_they_hold(tmp_path):
    """Arrow list views (rows in any order over their values, shared, sliced) are written as
    the lists pyarrow says they hold: pyarrow's own cast of a view to a list gives an invalid
    array (it crashed the write, or named no column)."""
    views = [pa.array([[1, 2], [3], []], pa.list_view(pa.int32())),
             pa.ListViewArray.from_arrays([1, 0, 0], [2, 1, 3], pa.array([7, 8, 9])),
             pa.array([[1, 2], [3], [], [4, 5, 6]], pa.large_list_view(pa.int64())).slice(1),
             pa.array([["a", "b"], ["c"]], pa.list_view(pa.string()))]
    for view in views:
        idv.write(tmp_path / "v.idv", pa.table({"x": view}))
        got = idv.read(tmp_path / "v.idv")["x"]
        assert [list(row) for row in got] == view.to_pylist()


def test_binary_given_text_is_checked_as_text_naming_its_row(tmp_path):
    """Arrow binary given types=Text is its bytes where they are UTF-8, else the error names
    the column and row, as for any text (pyarrow's cast named neither)."""
    ok = pa.array([b"ok", "\u00e9".encode()], pa.large_binary())
    idv.write(tmp_path / "t.idv", pa.table({"x": ok}), types={"x": idv.Text})
    assert idv.read(tmp_path / "t.idv")["x"].tolist() == ["ok", "\u00e9"]
    with pytest.raises(ValueError, match=r"column 'x' row 1: .*not valid UTF-8"):
        idv.write(tmp_path / "bad.idv", pa.table({"x": pa.array([b"ok", b"\xff"])}),
                  types={"x": idv.Text})
    assert not (tmp_path / "bad.idv").exists()
