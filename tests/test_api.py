"""The Python API on real ML.NET-written fixtures.

Expected values come from the JSON sidecars next to each fixture (what ML.NET itself read back,
see shared/oracle/README.md), never from this reader's own output; where a test compares two
ways of reading (slice vs full read, threads, backends), the full read is first checked against
the sidecar.
"""
from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

import idv
from idv._scan import scan
from expected import (EPOCH_TICKS, TICKS_PER_MINUTE, ExpectedRagged, annotation_expected,
                      assert_arrays_equal, assert_equal_reads, column_expected, column_index,
                      expected_type, item_values, type_from_description)
from reference import MODEL_ZIPS_DIR, SAMPLE_DIR, fixture, model_zip_entries, sidecar

SOURCE_FIXTURE = "mixed_smallblocks_deflate"   # 15 blocks per column: gathers several blocks

SOURCE_KINDS = {
    "str path": lambda p: str(p),
    "pathlib path": lambda p: p,
    "bytes": lambda p: p.read_bytes(),
    "bytearray": lambda p: bytearray(p.read_bytes()),
    "memoryview": lambda p: memoryview(p.read_bytes()),
    "memoryview of a larger buffer": lambda p: memoryview(b"junk" + p.read_bytes() + b"junk")[4:-4],
    "numpy uint8 array": lambda p: np.frombuffer(p.read_bytes(), np.uint8),
    "BytesIO": lambda p: io.BytesIO(p.read_bytes()),
    "open file": lambda p: open(p, "rb"),
    "unbuffered file": lambda p: open(p, "rb", buffering=0),
}

SEEK_FIXTURES = ["multiblock_200k_deflate", "multiblock_200k_none", "mixed_smallblocks_none",
                 "mixed_smallblocks_deflate", "mixed_smallblocks_ordered", "mixed_maxbytes"]
# (fixture, column) of every column of the seek fixtures ("?" when the fixture is missing: the
# test then skips)
SEEK_COLUMNS = [(n, c["name"]) for n in SEEK_FIXTURES
                for c in (sidecar(n)["columns"] if (SAMPLE_DIR / f"{n}.idv").exists()
                          else [{"name": "?"}])]


# ---------------------------------------------------------------- sources

@pytest.mark.parametrize("kind", list(SOURCE_KINDS))
def test_sources_read_what_mlnet_reads(kind):
    path = fixture(SOURCE_FIXTURE)
    source = SOURCE_KINDS[kind](path)
    try:
        with idv.open(source) as f:
            assert f.num_columns == len(sidecar(SOURCE_FIXTURE)["columns"])
            assert_matches_sidecar(f, SOURCE_FIXTURE)
            # a slice in the middle also works from every source
            i = column_index(sidecar(SOURCE_FIXTURE), "Txt")
            assert f["Txt"][20:30].tolist() == \
                expected_column(SOURCE_FIXTURE, i)[1][20:30].tolist()
    finally:
        if hasattr(source, "close") and not isinstance(source, (memoryview,)):
            source.close()


@pytest.mark.parametrize("compression", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_source_zipfile_entry(tmp_path, compression):
    path = fixture(SOURCE_FIXTURE)
    zpath = tmp_path / "model.zip"
    with zipfile.ZipFile(zpath, "w", compression) as z:
        z.writestr("README.txt", "not an idv")
        z.write(path, "DataLoaderModel/data.idv")
    with zipfile.ZipFile(zpath) as z, idv.open(z.open("DataLoaderModel/data.idv")) as f:
        assert_matches_sidecar(f, SOURCE_FIXTURE)
        assert f["Vec"][-3:].shape == (3, 4)


def test_source_file_object_at_an_offset(tmp_path):
    """A file object positioned after other data: offsets count from where the IDV starts."""
    path = fixture(SOURCE_FIXTURE)
    fh = io.BytesIO(b"x" * 1000 + path.read_bytes())
    fh.seek(1000)
    with idv.open(fh) as f:
        assert_matches_sidecar(f, SOURCE_FIXTURE, ["Id", "Txt", "Var"])


@pytest.mark.parametrize("archive,entry", model_zip_entries() or [("none", "none")])
def test_model_zip_entries_open_from_stream_and_bytes(archive, entry):
    """ML.NET model zips: Schema.idv / DefaultMap.idv, some behind an int32 length prefix."""
    if archive == "none":
        pytest.skip("no model zips in shared/")
    with zipfile.ZipFile(MODEL_ZIPS_DIR / archive) as z:
        raw = z.read(entry)
        prefixed = raw[:8] != b"CML\x00DVB\x00"
        with idv.open(z.open(entry)) as a, idv.open(raw) as b:
            assert a.num_columns >= 1
            assert a.column_names == b.column_names
            assert str(a.schema) == str(b.schema)
            assert a.header.file_size == len(raw) - (4 if prefixed else 0)
            for name in a.column_names:
                assert_equal_reads(a[name].read(), b[name].read())


def test_non_seekable_object_is_a_type_error():
    data = fixture(SOURCE_FIXTURE).read_bytes()
    with pytest.raises(TypeError, match="seekable"):
        idv.open(_NonSeekable(data))
    with pytest.raises(TypeError, match="seek"):
        idv.open(_ReadOnly(data))
    with pytest.raises(TypeError):
        idv.open(12345)


def test_missing_path_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        idv.open(tmp_path / "absent.idv")


# ---------------------------------------------------------------- lifetime

def test_context_manager_closes_and_reads_after_close_fail():
    path = fixture(SOURCE_FIXTURE)
    i = column_index(sidecar(SOURCE_FIXTURE), "F64")
    with idv.open(path) as f:
        col = f["F64"]
        data = col.read()
        assert not f.closed
    assert f.closed
    assert_same(data, expected_column(SOURCE_FIXTURE, i)[1])   # results outlive the file
    with pytest.raises(ValueError, match="closed"):
        col.read()
    with pytest.raises(ValueError, match="closed"):
        col[3]
    f.close()   # closing twice is harmless
    assert f.closed


def test_close_leaves_the_callers_file_object_open():
    fh = open(fixture(SOURCE_FIXTURE), "rb")
    try:
        f = idv.open(fh)
        f.close()
        assert not fh.closed
        fh.seek(0)
        assert fh.read(8) == b"CML\x00DVB\x00"
    finally:
        fh.close()


@pytest.mark.parametrize("kind", ["mapped", "small", "bytes", "file object", "closed"])
def test_an_open_file_or_its_column_refuses_pickling_saying_what_to_pass(tmp_path, kind):
    """A file handed to a worker process is pickled: the error says to pass the path, not
    which internal object (a memory map, a memoryview, a lock) cannot be pickled."""
    import pickle
    path = tmp_path / "x.idv"
    idv.write(path, {"x": np.arange(100_000 if kind == "mapped" else 10)})
    with open(path, "rb") as fh:
        f = idv.open({"bytes": path.read_bytes(), "file object": fh}.get(kind, path))
        col = f["x"]
        if kind == "closed":
            f.close()
        for obj, name in ((f, "an idv.IdvFile"), (col, "an idv.Column")):
            with pytest.raises(TypeError, match=f"^{name} is not picklable: pass its (file's )?"
                                                f"path"):
                pickle.dumps(obj)
        f.close()


def test_metadata_read_before_close_stays_available():
    with idv.open(fixture("mixed_default")) as f:
        col = f["Key"]
        kv = col.metadata["KeyValues"]
    assert col.metadata["KeyValues"] is kv
    assert kv.tolist() == [f"k{i}" for i in range(7)]


# ---------------------------------------------------------------- schema, names, lookup

@pytest.mark.parametrize("name", ["mixed_default", "keys", "vectors_fixed", "vectors_misc",
                                  "vector_multidim", "scalars_datetime", "scalars_rowid",
                                  "pipeline_hidden", "pipeline_multiclass_scored",
                                  "annotations_custom", "empty_rows"])
@pytest.mark.parametrize("columns_first", [False, True])
def test_schema_types_and_metadata_types(name, columns_first):
    """The schema as ML.NET describes the file, whether its Columns were built before (the
    schema then reads them) or not (columns without annotations: the table of contents)."""
    side = sidecar(name)
    with idv.open(fixture(name)) as f:
        if columns_first:
            f.columns
        schema = f.schema
        assert len(schema) == len(side["columns"]) == f.num_columns
        assert schema.num_rows == side["row_count"]
        for field, c in zip(schema, side["columns"]):
            assert field.index == c["index"]
            assert field.name == c["name"]
            assert field.type == type_from_description(c)
            assert field.hidden == c["hidden"]
            assert list(field.metadata_types) == [a["kind"] for a in c["annotations"]]
            for a in c["annotations"]:
                assert field.metadata_types[a["kind"]] == type_from_description(a)
            assert f.columns[c["index"]].type == type_from_description(c)


def test_schema_prints_one_line_per_column_with_metadata():
    with idv.open(fixture("mixed_default")) as f:
        text = str(f.schema)
    lines = text.splitlines()
    assert lines[0] == "Id: Int32"
    assert "Txt: Text" in lines
    assert "Key: Key<UInt32, 7>" in lines
    assert lines[lines.index("Key: Key<UInt32, 7>") + 1].strip() == \
        "-- metadata: KeyValues: Vector<Text, 7>"
    assert "Vec: Vector<Single, 4>" in lines
    assert "  -- metadata: SlotNames: Vector<Text, 4>" in lines
    assert "Var: Vector<Int16>" in lines
    assert lines[-1] == "DT: DateTime"
    assert len([ln for ln in lines if not ln.startswith(" ")]) == 9


def test_schema_marks_hidden_columns():
    side = sidecar("pipeline_hidden")
    with idv.open(fixture("pipeline_hidden")) as f:
        lines = [ln for ln in str(f.schema).splitlines() if not ln.startswith(" ")]
        rep = repr(f.schema)
    assert len(lines) == len(side["columns"])
    for ln, c in zip(lines, side["columns"]):
        assert ln.startswith(f"{c['name']}: {type_from_description(c)}")
        assert ("hidden" in ln) == c["hidden"]
    assert f"{len(side['columns'])} columns, {side['row_count']} rows" in rep


def test_getitem_by_name_and_index_and_duplicates_take_the_last():
    name = "pipeline_hidden"
    side = sidecar(name)
    with idv.open(fixture(name)) as f:
        assert f.column_names == [c["name"] for c in side["columns"]]
        assert f.column_names.count("Color") == 2
        for c in side["columns"]:
            assert f[c["index"]].name == c["name"]
            assert f[c["index"]].index == c["index"]
            assert f[c["index"]].type == type_from_description(c)
        # duplicate names: the last column, as ML.NET does
        visible = column_index(sidecar(name), "Color")
        assert f["Color"].index == visible
        assert f["Color"].type == type_from_description(side["columns"][visible])
        assert isinstance(f["Color"].type, idv.Key)
        assert f["Size"].type == idv.Double
        assert f[-1].name == side["columns"][-1]["name"]
        assert "Color" in f and "Nope" not in f
        assert list(f) == f.column_names
        with pytest.raises(KeyError, match="Nope"):
            f["Nope"]
        with pytest.raises(IndexError):
            f[len(side["columns"])]
        # the hidden column is still readable by index
        hidden = min(c["index"] for c in side["columns"] if c["name"] == "Color")
        assert_same(f[hidden].read(), expected_column(name, hidden)[1])
        assert_same(f["Color"].read(), expected_column(name, visible)[1])


def test_schema_finds_a_column_by_name_without_a_pass_over_the_others():
    """A name is looked up in one step (a wide file's callers look up every column), the
    last column of a name winning as ML.NET shows them; ``in`` alike."""
    reads = []

    class Named(idv.Field):         # counts the reads of its name
        __slots__ = ("_name",)
        name = property(lambda self: reads.append(1) or self._name,
                        lambda self, v: setattr(self, "_name", v))

    names = [f"c{k}" for k in range(500)] + ["c7"]
    schema = idv.Schema([Named(i, n, idv.Single, "Single", {}, False)
                         for i, n in enumerate(names)], 10)
    reads.clear()
    assert [schema[n].index for n in names[:500]] == [500 if n == "c7" else k
                                                      for k, n in enumerate(names[:500])]
    assert all(n in schema for n in names) and "c500" not in schema and 7 not in schema
    with pytest.raises(KeyError, match="c500"):
        schema["c500"]
    assert schema[3].index == 3
    assert not reads
    with idv.open(fixture("pipeline_hidden")) as f:
        side = sidecar("pipeline_hidden")
        assert f.schema["Color"].index == column_index(side, "Color")
        assert not f.schema["Color"].hidden and "Color" in f.schema
        assert f.schema is f.schema         # made once: a loop over names looks up in one step


def test_read_all_skips_hidden_and_keeps_the_visible_column():
    name = "pipeline_hidden"
    side = sidecar(name)
    data = idv.read(fixture(name))
    visible = [c for c in side["columns"] if not c["hidden"]]
    assert list(data) == [c["name"] for c in visible]
    for c in visible:
        assert_same(data[c["name"]], expected_column(name, c["index"])[1])


def test_read_columns_subset_by_name_and_index():
    name = "mixed_default"
    with idv.open(fixture(name)) as f:
        data = f.read(columns=["Txt", 0, "Vec"])
        assert list(data) == ["Txt", "Id", "Vec"]
        for col in data:
            assert_same(data[col], expected_column(name, column_index(sidecar(name), col))[1])
        single = f.read(columns="DT")
        assert list(single) == ["DT"]
        with pytest.raises(KeyError):
            f.read(columns=["Id", "Nope"])
    shortcut = idv.read(fixture(name), columns=["F32"])
    assert list(shortcut) == ["F32"]
    assert_same(shortcut["F32"], expected_column(name, column_index(sidecar(name), "F32"))[1])


def test_idv_read_shortcut_reads_every_column():
    name = "mixed_smallblocks_none"
    data = idv.read(fixture(name), threads=1)
    side = sidecar(name)
    assert list(data) == [c["name"] for c in side["columns"]]
    for c in side["columns"]:
        assert_same(data[c["name"]], expected_column(name, c["index"])[1])


def test_the_one_call_readers_take_the_options_of_open(tmp_path):
    """idv.read, to_arrow and record_batch_reader open a path with idv.open's options (a
    memory limit, checksums...); a file passed open is read as it was opened, and giving
    options with it is a TypeError."""
    path = tmp_path / "x.idv"
    idv.write(path, {"x": np.arange(100_000, dtype=np.float64)})      # 800 KB read
    readers = [idv.read, idv.to_arrow, lambda p, **kw: idv.to_arrow(p, filter="x >= 0", **kw),
               lambda p, **kw: idv.record_batch_reader(p, **kw).read_all()]
    for read in readers:
        assert len(read(path, memory_limit=10**8, checksums=False)["x"]) == 100_000
        with pytest.raises(idv.MemoryLimitError):       # less than a block
            read(path, memory_limit=1000)
    with idv.open(path, memory_limit=1000) as f:
        for read in readers:
            with pytest.raises(TypeError, match="memory_limit: .*IdvFile was opened with its "
                                                "own .give them to idv.open"):
                read(f, memory_limit=10**8)
            with pytest.raises(idv.MemoryLimitError):       # the limit it was opened with
                read(f)
    with idv.open(path) as f:
        for read in readers:
            assert len(read(f)["x"]) == 100_000
        assert f.num_rows == 100_000            # left open


@pytest.mark.parametrize("name", ["mixed_default", "mixed_none", "mixed_smallblocks_deflate",
                                  "mixed_maxbytes", "multiblock_200k_none", "keys"])
def test_column_layout_matches_the_table_of_contents(name):
    side = sidecar(name)
    n = side["row_count"]
    with idv.open(fixture(name)) as f:
        assert f.version == side["header"]["version"]
        assert f.header.toc_offset == side["header"]["table_of_contents_offset"]
        assert f.header.file_size == side["header"]["file_size"]
        for toc in side["table_of_contents"]["columns"]:
            col = f[toc["column_index"]]
            assert col.codec_name == toc["codec"]
            assert col.compression == toc["compression"]
            assert col.rows_per_block == toc["rows_per_block"]
            blocks = -(-n // toc["rows_per_block"])
            assert col.num_blocks == blocks == len(col.lookup)
            assert col.nbytes_disk == int(col.lookup["disk"].sum())
            if toc["compression"] == "None":
                assert col.nbytes_disk == col.nbytes
            item = type_from_description(side["columns"][toc["column_index"]])
            if item in (idv.Int32, idv.Single, idv.Double, idv.DateTime) \
                    or isinstance(item, idv.Key):
                assert col.nbytes == n * item.dtype.itemsize


# ---------------------------------------------------------------- block-level seeking

@pytest.mark.parametrize("name,col_name", SEEK_COLUMNS)
def test_indexing_and_slicing_decode_only_the_blocks_needed(name, col_name):
    # no cache of decoded blocks: every access counts its own (tests/test_row_access.py has
    # the cache)
    with idv.open(fixture(name), cache_bytes=0) as f:
        col = f[col_name]
        n, rpb = col.num_rows, col.rows_per_block
        assert col.num_blocks > 2, "a seeking test needs several blocks"
        full = _full_checked(f, name, col_name)
        all_rows = np.arange(n)
        for i in _int_keys(n, rpb):
            before = col.blocks_decoded
            got = col[i]
            assert col.blocks_decoded - before == 1, i
            exp = full[i]
            if isinstance(exp, np.ndarray):
                assert_equal_reads(np.asarray(got), exp)
            elif isinstance(exp, float) or (hasattr(exp, "dtype") and exp.dtype.kind == "f"):
                assert np.asarray(got).tobytes() == np.asarray(exp).tobytes(), i
            else:
                assert got == exp, (i, got, exp)
        for key in _slice_keys(n, rpb):
            rows = all_rows[key]
            before = col.blocks_decoded
            got = col[key]
            assert col.blocks_decoded - before == _blocks_of(rows, rpb), key
            assert len(got) == len(rows)
            assert_equal_reads(got, full[key])
        for bad in (n, n + 1, -n - 1, 10**12):
            before = col.blocks_decoded
            with pytest.raises(IndexError):
                col[bad]
            assert col.blocks_decoded == before
        with pytest.raises(TypeError):
            col["0"]
        # what is not row numbers is named by what it holds
        for bad, said in ((np.array([1.0, 2.0]), "a 1-d float64 array"),
                          ([1, "a"], "a list of int and str"), ([[0]], "a list of list")):
            with pytest.raises(TypeError, match=f"or a boolean mask, not {said}$"):
                col[bad]


@pytest.mark.parametrize("name", ["multiblock_200k_deflate", "mixed_smallblocks_deflate"])
def test_numpy_integer_keys_and_slice_bounds(name):
    with idv.open(fixture(name)) as f:
        col = f["Id"]
        full = _full_checked(f, name, "Id")
        n = col.num_rows
        assert col[np.int64(n - 1)] == full[-1]
        assert col[np.int32(-2)] == full[-2]
        s = slice(np.int64(3), np.int64(n - 3), np.int64(5))
        assert_equal_reads(col[s], full[3:n - 3:5])


@pytest.mark.parametrize("name", ["multiblock_200k_deflate", "mixed_smallblocks_none",
                                  "mixed_maxbytes"])
def test_iter_blocks_concatenates_to_read(name):
    side = sidecar(name)
    with idv.open(fixture(name)) as f:
        for c in side["columns"]:
            col = f[c["name"]]
            full = _full_checked(f, name, c["name"])
            before = col.blocks_decoded
            blocks = list(col.iter_blocks())
            assert col.blocks_decoded - before == col.num_blocks == len(blocks)
            sizes = [len(b) for b in blocks]
            assert sizes[:-1] == [col.rows_per_block] * (len(blocks) - 1)
            assert 0 < sizes[-1] <= col.rows_per_block and sum(sizes) == side["row_count"]
            if isinstance(full, idv.Ragged):
                joined = idv.Ragged.concat(blocks)
            else:
                joined = np.concatenate(blocks)
            assert_equal_reads(joined, full)


def test_zero_rows_read_empty_in_every_form():
    name = "empty_rows"
    side = sidecar(name)
    with idv.open(fixture(name)) as f:
        assert f.num_rows == 0
        for c in side["columns"]:
            col = f[c["name"]]
            t, exp = expected_column(name, c["index"])
            got = col.read()
            assert col.num_blocks == 0 and len(got) == 0
            assert list(col.iter_blocks()) == []
            if isinstance(exp, list):
                assert isinstance(got, idv.Ragged)
            else:
                assert_same(got, exp)
            assert len(col[0:10]) == 0
            with pytest.raises(IndexError):
                col[0]
        sp = f["Vec"].read(sparse=True)
        assert sp.shape == (0, 3) and sp.nnz == 0


def test_no_columns_file():
    name = "no_columns"
    with idv.open(fixture(name)) as f:
        assert f.num_rows == sidecar(name)["row_count"] == 5
        assert f.num_columns == 0 and f.column_names == [] and str(f.schema) == ""
        assert f.read() == {}


def test_streams_of_a_file_without_rows_give_no_batch_whatever_its_columns(tmp_path):
    """A file of no rows streams no batch, with columns or without (one without columns gave
    one batch of 0 rows); one of 5 rows and no columns, one batch of them."""
    pytest.importorskip("pyarrow", reason="record_batch_reader gives Arrow batches")
    for name, data, want in (("cols.idv", {"x": np.zeros(0, np.int32)}, []),
                             ("none.idv", {}, []), ("five.idv", None, [5])):
        path = tmp_path / name
        if data is None:
            with idv.Writer(path, {}) as w:
                w.add_empty_rows(5)
        else:
            idv.write(path, data)
        with idv.open(path) as f:
            assert [b.num_rows for b in f.iter_batches()] == want, name
        assert [b.num_rows for b in idv.record_batch_reader(path)] == want, name
        with idv.dataset(path) as ds:
            assert [b.num_rows for b in ds.iter_batches()] == want, name


# ---------------------------------------------------------------- vectors

def test_fixed_vectors_are_n_by_size():
    name = "vectors_fixed"
    side = sidecar(name)
    with idv.open(fixture(name)) as f:
        for c in side["columns"]:
            t, exp = expected_column(name, c["index"])
            got = f[c["name"]].read()
            assert got.shape == (side["row_count"], c["vector_size"])
            assert_same(got, exp)
            assert_same(f[c["name"]][1], exp[1])


def test_multidim_vectors_keep_their_dims():
    name = "vector_multidim"
    with idv.open(fixture(name)) as f:
        t, exp = expected_column(name, column_index(sidecar(name), "Mat2x3"))
        got = f["Mat2x3"].read()
        assert got.shape == (4, 2, 3)
        assert_same(got, exp)
        assert_same(f["Mat2x3"][2], exp[2])
        assert_same(f["Mat2x3"][1:3], exp[1:3])
        # a 0 dim makes it variable: a Ragged of flat rows
        t, exp = expected_column(name, column_index(sidecar(name), "VarBy4"))
        assert f["VarBy4"].type == t and not t.is_fixed and t.dims == (0, 4)
        got = f["VarBy4"].read()
        assert_same(got, exp)
        assert all(len(r) % 4 == 0 for r in got.to_list())


def test_variable_vectors_are_ragged():
    name = "vectors_variable"
    side = sidecar(name)
    with idv.open(fixture(name)) as f:
        for c in side["columns"]:
            t, exp = expected_column(name, c["index"])
            got = f[c["name"]].read()
            assert isinstance(got, idv.Ragged)
            assert len(got) == side["row_count"]
            assert_same(got, exp)
            assert got.lengths.tolist() == [len(e) for e in exp]
            assert got.dtype == exp[0].dtype
            # indexing and slicing
            assert_same(got[0], exp[0])
            assert_same(got[-1], exp[-1])
            with pytest.raises(IndexError):
                got[len(exp)]
            for key in (slice(1, 4), slice(None, None, -1), slice(None, None, 2), slice(3, 3),
                        slice(4, 1, -2)):
                part = got[key]
                assert isinstance(part, idv.Ragged)
                assert_same(part, exp[key])
            assert_same(got[np.array([2, 0])], [exp[2], exp[0]])
            rows = list(got)   # iteration yields one array per row
            assert len(rows) == len(exp)
            for r, e in zip(rows, exp):
                assert_same(r, e)
            assert_same(f[c["name"]][2:5], exp[2:5])


def test_ragged_helpers():
    r = idv.Ragged.from_list([[1, 2], [], [3]], dtype=np.int32)
    assert r.offsets.tolist() == [0, 2, 2, 3] and r.dtype == np.int32
    assert [x.tolist() for x in r.to_list()] == [[1, 2], [], [3]]
    assert idv.Ragged.concat([r, r[1:]]) == idv.Ragged.from_list([[1, 2], [], [3], [], [3]],
                                                                 dtype=np.int32)
    assert r != idv.Ragged.from_list([[1, 2], [3], []], dtype=np.int32)
    with pytest.raises(ValueError):
        idv.Ragged(np.arange(3), [0, 2, 1, 3])
    long = idv.Ragged.from_list([np.zeros(10_000)])
    assert len(repr(long)) < 200


@pytest.mark.parametrize("name", ["vectors_sparse", "pipeline_featurize_text", "vectors_fixed",
                                  "mixed_smallblocks_deflate", "pipeline_keys"])
def test_sparse_read_is_csr_with_the_stored_entries(name):
    sp = pytest.importorskip("scipy.sparse")
    side = sidecar(name)
    with idv.open(fixture(name)) as f:
        checked = 0
        for c in side["columns"]:
            if not c["is_vector"]:
                with pytest.raises(TypeError):
                    f[c["name"]].read(sparse=True)
                continue
            t, exp = expected_column(name, c["index"])
            numeric = isinstance(t.item, idv.Key) or t.item.dtype.kind in "biuf"
            if not numeric:
                with pytest.raises(TypeError):
                    f[c["name"]].read(sparse=True)
                continue
            m = f[c["name"]].read(sparse=True)
            assert sp.issparse(m) and m.format == "csr"
            cells = [row[c["index"]] for row in side["rows"]]
            assert m.nnz == sum(stored_count(cell) for cell in cells)
            lengths = [cell["length"] if isinstance(cell, dict) else len(cell) for cell in cells]
            width = t.size if t.is_fixed else max(lengths, default=0)
            assert m.shape == (side["row_count"], width)
            assert m.dtype == t.item.dtype
            dense = m.toarray()
            if t.is_fixed:
                np.testing.assert_array_equal(dense, exp.reshape(len(exp), -1))
            else:
                for i, e in enumerate(exp):
                    np.testing.assert_array_equal(dense[i, :len(e)], e)
                    assert not dense[i, len(e):].any()
            checked += 1
        assert checked
        # the file-level read: CSR for numeric vectors, read()'s form for the rest
        data = f.read(sparse=True)
        for c in side["columns"]:
            if c["hidden"]:
                continue
            t = type_from_description(c)
            csr = isinstance(t, idv.Vector) and (isinstance(t.item, idv.Key)
                                                 or t.item.dtype.kind in "biuf")
            assert sp.issparse(data[c["name"]]) == csr, c["name"]


def test_sparse_rows_keep_their_indices():
    pytest.importorskip("scipy.sparse")
    name = "vectors_sparse"
    i = column_index(sidecar(name), "SparseF64Big")
    cells = [row[i] for row in sidecar(name)["rows"]]
    with idv.open(fixture(name)) as f:
        m = f["SparseF64Big"].read(sparse=True)
        sliced = f["SparseF64Big"][1:3]
    for r, cell in enumerate(cells):
        row = m.getrow(r)
        if isinstance(cell, dict):
            assert row.indices.tolist() == cell["indices"]
            assert row.data.tolist() == [float(v) for v in cell["values"]]
    assert sliced.shape == (2, 1000)
    assert sliced[0, 0] == -1.0 and sliced[0, 500] == 2.0


# ---------------------------------------------------------------- metadata

@pytest.mark.parametrize("name", ["mixed_default", "keys", "pipeline_keys",
                                  "pipeline_binary_scored", "pipeline_multiclass_scored",
                                  "pipeline_featurize_text", "annotations_custom", "vectors_misc",
                                  "empty_rows"])
def test_metadata_values_match_mlnet(name):
    side = sidecar(name)
    with idv.open(fixture(name)) as f:
        for c in side["columns"]:
            col = f[c["index"]]
            assert col.metadata_kinds == [a["kind"] for a in c["annotations"]]
            meta = col.metadata
            assert list(meta) == [a["kind"] for a in c["annotations"]]
            for a in c["annotations"]:
                exp = annotation_expected(a)
                got = meta[a["kind"]]
                if isinstance(exp, np.ndarray):
                    assert_same(np.asarray(got), exp)
                elif isinstance(exp, np.floating):
                    assert np.asarray(got).tobytes() == exp.tobytes()
                elif isinstance(exp, (np.datetime64, np.void)):
                    assert np.asarray(got).tobytes() == np.asarray(exp).tobytes()
                else:
                    assert got == exp, (c["name"], a["kind"], got, exp)


def test_well_known_metadata_forms():
    with idv.open(fixture("pipeline_keys")) as f:
        onehot = f["ColorOneHot"].metadata
        assert onehot["SlotNames"].tolist() == ["red", "green", "blue", "yellow"]
        assert onehot["IsNormalized"] is True
        ranges = onehot["CategoricalSlotRanges"]
        assert ranges.shape == (1, 2) and ranges.dtype == np.int32
        assert ranges.tolist() == [[0, 3]]
        assert f["ClassOneHot"].metadata["CategoricalSlotRanges"].tolist() == [[0, 2]]
        kv = f["BucketKey"].metadata["KeyValues"]
        assert kv.dtype == np.float32 and kv.tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
        assert f["ColorKey"].metadata["KeyValues"].tolist() == ["red", "green", "blue", "yellow"]
        assert f["Color"].metadata == {}
    with idv.open(fixture("annotations_custom")) as f:
        feat = f["Feat"].metadata
        # declared Vector<Int32, 2>: shaped by its dims; pairs are rows of reshape(-1, 2)
        assert feat["CategoricalSlotRanges"].shape == (2,)
        assert feat["CategoricalSlotRanges"].reshape(-1, 2).tolist() == [[0, 1]]
        assert feat["MySparse"].tolist() == [0, 0, 0, 1.0, 0, 0, 0, 0, 2.0, 0]
        score = f["Score"].metadata
        assert score["ScoreColumnKind"] == "BinaryClassification"
        assert score["MyKeyVec"].tolist() == [0, 9, 1]


NESTED_METADATA = {"CategoricalSlotRanges": [[0, 1], [2, 3]], "Grid": [("a", "b"), ("c", "d")]}


def test_metadata_given_as_nested_lists_is_the_vector_they_spell(tmp_path):
    """A list of equal-length sequences is the fixed vector np.array of it would be."""
    path = tmp_path / "nested.idv"
    idv.write(path, {"v": np.zeros((1, 4), np.float32)}, metadata={"v": NESTED_METADATA})
    with idv.open(path) as f:
        types = {k: str(t) for k, t in f["v"].metadata_types.items()}
        assert types == {"CategoricalSlotRanges": "Vector<Int64, 2, 2>",
                         "Grid": "Vector<Text, 2, 2>"}
        assert f["v"].metadata["CategoricalSlotRanges"].tolist() == [[0, 1], [2, 3]]
        assert f["v"].metadata["Grid"].tolist() == [["a", "b"], ["c", "d"]]
    with pytest.raises(ValueError, match="'Grid': nested sequences of different lengths"):
        idv.write(tmp_path / "ragged.idv", {"v": np.zeros((1, 4), np.float32)},
                  metadata={"v": {"Grid": [[0, 1], [2]]}})
    assert not (tmp_path / "ragged.idv").exists()


def test_metadata_given_as_nested_lists_reads_in_mlnet_as_that_vector(tmp_path, oracle):
    """ML.NET reads the annotation as the vector of the list's shape, items in row order."""
    path = tmp_path / "nested.idv"
    idv.write(path, {"v": np.zeros((1, 4), np.float32)}, metadata={"v": NESTED_METADATA})
    annotations = oracle.dump(path)["columns"][0]["annotations"]
    got = {a["kind"]: (a["type_string"], a["dims"], a["value"]) for a in annotations}
    assert got == {"CategoricalSlotRanges": ("Vector<Int64, 2, 2>", [2, 2], [0, 1, 2, 3]),
                   "Grid": ("Vector<String, 2, 2>", [2, 2], ["a", "b", "c", "d"])}


# ---------------------------------------------------------------- dates, times, row ids

def test_datetime_timespan_datetimeoffset_forms():
    name = "scalars_datetime"
    side = sidecar(name)
    with idv.open(fixture(name)) as f:
        dt = f["DT"].read()
        assert dt.dtype == np.dtype("datetime64[100ns]")
        ticks = [row[column_index(side, "DT")] for row in side["rows"]]
        assert (dt.view(np.int64) + EPOCH_TICKS).tolist() == ticks
        # exact over the whole .NET range once converted for display
        assert str(dt[ticks.index(0)].astype("datetime64[us]")) == "0001-01-01T00:00:00.000000"

        ts = f["TS"].read()
        assert ts.dtype == np.dtype("timedelta64[100ns]")
        assert ts.view(np.int64).tolist() == [row[column_index(side, "TS")] for row in side["rows"]]

        dto = f["DTO"].read()
        assert dto.dtype.names == ("utc", "offset_minutes")
        assert dto["utc"].dtype == np.dtype("datetime64[100ns]")
        cells = [row[column_index(side, "DTO")] for row in side["rows"]]
        assert dto["offset_minutes"].tolist() == [c["offset_minutes"] for c in cells]
        # local clock time = utc + offset, as ML.NET reports the ticks
        offsets = dto["offset_minutes"].astype(np.int64) * TICKS_PER_MINUTE
        local = dto["utc"].view(np.int64) + offsets
        assert (local + EPOCH_TICKS).tolist() == [c["ticks"] for c in cells]
        assert_same(dto, item_values(idv.DateTimeOffset, cells))
        before = f["DTO"].blocks_decoded
        assert dto[3] == f["DTO"][3]
        assert f["DTO"].blocks_decoded == before + 1


def test_rowid_form():
    name = "scalars_rowid"
    side = sidecar(name)
    with idv.open(fixture(name)) as f:
        rid = f["RID"].read()
    assert rid.dtype.names == ("low", "high")
    assert rid["low"].dtype == np.uint64 and rid["high"].dtype == np.uint64
    values = [row[0] for row in side["rows"]]
    assert [(int(h) << 64) | int(lo) for lo, h in zip(rid["low"], rid["high"])] == values
    assert max(values) >= 2**64   # the fixture does use the high half


def test_date_and_rowid_vectors():
    name = "vectors_misc"
    with idv.open(fixture(name)) as f:
        for col_name in ("VecDTO", "VecRowId"):
            t, exp = expected_column(name, column_index(sidecar(name), col_name))
            assert_same(f[col_name].read(), exp)
    name = "vectors_fixed"
    with idv.open(fixture(name)) as f:
        for col_name in ("VecDT", "VecTS"):
            t, exp = expected_column(name, column_index(sidecar(name), col_name))
            assert_same(f[col_name].read(), exp)


# ---------------------------------------------------------------- threads and backends

@pytest.mark.parametrize("name", ["multiblock_200k_deflate", "mixed_smallblocks_deflate",
                                  "vectors_sparse", "pipeline_featurize_text"])
def test_threads_and_backends_give_identical_results(name):
    side = sidecar(name)
    names = [c["name"] for c in side["columns"] if not c["hidden"]]
    with idv.open(fixture(name), threads=1) as f:
        reference = {n: f[n].read() for n in names}
        sparse_ref = {n: f[n].read(sparse=True) for n in names
                      if isinstance(f[n].type, idv.Vector) and f[n].type.item is not idv.Text}
    for n in names:   # the single-threaded read is right to begin with
        assert_same(reference[n], expected_column(name, column_index(sidecar(name), n))[1])
    configs = [dict()] + [dict(backend=b) for b in _installed_backends()] \
        + [dict(threads=4), dict(threads=3, backend="zlib")]
    assert "zlib" in _installed_backends()
    for cfg in configs:
        with idv.open(fixture(name), **cfg) as f:
            for n in names:
                assert_equal_reads(f[n].read(), reference[n])
            for n, ref in sparse_ref.items():
                assert_equal_reads(f[n].read(sparse=True), ref)
            got = idv.read(fixture(name), **cfg)
            for n in got:
                assert_equal_reads(got[n], reference[n])


@pytest.mark.parametrize("backend", ["libdeflate", "isal"])
def test_optional_backends_when_installed(backend):
    from idv import compression
    if backend not in compression.installed():
        pytest.skip(f"{backend} not installed")
    name = "multiblock_200k_none"   # compression None: the backend is not even used
    with idv.open(fixture(name), backend=backend) as f:
        assert f.backend == backend
        _full_checked(f, name, "Name")
    with idv.open(fixture("multiblock_200k_deflate"), backend=backend) as f:
        _full_checked(f, "multiblock_200k_deflate", "X")


def test_unknown_backend_is_an_error():
    path = fixture("mixed_default")
    with pytest.raises(ValueError, match="nope"):
        idv.open(path, backend="nope")
    with pytest.raises(ValueError):
        idv.read(path, backend="")


# ---------------------------------------------------------------- helpers of these tests

def expected_column(name, index):
    """(type, values) of column `index` of a sample fixture, from its sidecar: an array, or for
    variable-size vectors a list of arrays, one per row."""
    side = sidecar(name)
    t = expected_type(side["columns"][index])
    values = column_expected(t, [row[index] for row in side["rows"]])
    return t, values.to_list() if isinstance(values, ExpectedRagged) else values


def stored_count(cell):
    """Entries a vector cell stores: a sparse row its indices, a dense row every slot."""
    return len(cell["indices"]) if isinstance(cell, dict) else len(cell)


def assert_same(got, exp):
    """Equal values, dtype and shape (floats bit for bit, NaN equals NaN); variable-size
    vectors as a list of row arrays."""
    if isinstance(exp, list):
        assert isinstance(got, idv.Ragged), type(got)
        rows = got.to_list()
        assert len(rows) == len(exp)
        for g, e in zip(rows, exp):
            assert_same(g, e)
        return
    assert_arrays_equal(got, exp, "value")


def assert_matches_sidecar(f, name, col_names=None):
    side = sidecar(name)
    assert f.num_rows == side["row_count"]
    for c in side["columns"]:
        if c["hidden"] or (col_names is not None and c["name"] not in col_names):
            continue
        t, exp = expected_column(name, c["index"])
        col = f[c["name"]]
        assert col.type == t
        assert_same(col.read(), exp)


def _int_keys(n, rpb):
    return sorted({0, 1, rpb - 1, rpb, rpb + 1, n // 2, n - 1, -1, -rpb, -n} & set(range(-n, n)),
                  key=lambda k: (k < 0, k))


def _slice_keys(n, rpb):
    return [
        slice(None), slice(0, 1), slice(rpb - 2, rpb + 2), slice(rpb, 2 * rpb), slice(-5, None),
        slice(None, None, -1), slice(n // 2, 3, -3), slice(-1, -2 * rpb - 3, -rpb + 1),
        slice(None, None, rpb), slice(3, None, 2 * rpb + 1), slice(None, None, -(rpb + 1)),
        slice(1, n, 3 * rpb), slice(n - 1, None, -2 * rpb), slice(None, None, n),
        slice(None, None, 7), slice(2, n - 2, 2),
        # empty and out of range
        slice(5, 5), slice(10, 5), slice(n, n + 10), slice(n + 5, n + 50), slice(-10**9, 0),
        slice(0, n, -1),
        # clipped ranges
        slice(-10**9, 3), slice(n - 3, 10**9), slice(-10**9, 10**9, n - 1),
        slice(n + 5, None, -1), slice(n + 5, -10**9, -(rpb * 3 + 2)),
    ]


def _blocks_of(rows, rpb):
    return len(np.unique(np.asarray(rows, np.int64) // rpb))


def _full_checked(f, name, col_name):
    """The full read of a column, verified against ML.NET's values."""
    full = f[col_name].read()
    assert_same(full, expected_column(name, column_index(sidecar(name), col_name))[1])
    return full


def _installed_backends():
    from idv import compression
    return sorted(compression.installed())


class _NonSeekable(io.RawIOBase):
    def __init__(self, data):
        self._inner = io.BytesIO(data)

    def readable(self):
        return True

    def seekable(self):
        return False

    def readinto(self, b):
        return self._inner.readinto(b)


class _ReadOnly:
    """Has read() but no seek()/tell()."""

    def __init__(self, data):
        self._data = data

    def read(self, n=-1):
        return self._data


def test_a_file_and_its_columns_are_freed_without_the_garbage_collector(tmp_path):
    """No reference cycle between a file and its columns: a dataset of thousands of files
    frees each one it closes at once, not in the collector's passes over all of them."""
    import gc
    import weakref

    path = tmp_path / "x.idv"
    idv.write(path, {"x": np.arange(1000, dtype=np.float32), "t": ["a", "bc"] * 500},
              rows_per_block=100)
    gc.collect()
    gc.disable()
    try:
        f = idv.open(path)
        col = f["x"]
        f.read()
        assert col[5:250].tolist() == list(range(5, 250))
        assert col.blocks_decoded > 0
        refs = [weakref.ref(f), weakref.ref(col), weakref.ref(f["t"])]
        f.close()
        del f, col
        assert [r() for r in refs] == [None, None, None]
        # a column outlives the file object it came from, which it does not need
        x = idv.open(path)["x"]
        assert x.read()[999] == 999
        # its table of contents' entries are not even tracked: the collector's passes over a
        # dataset's open files walk fewer objects
        with idv.open(path) as g:
            assert not any(gc.is_tracked(e) for e, _, _ in g.layout.described)
    finally:
        gc.enable()


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "10"])
def test_a_count_is_refused_alike_wherever_it_is_passed(tmp_path, bad):
    """Rows per batch, per block, files open at once: one check, one message, at every entry
    point that takes a count (a bool is not one, nor a float that happens to be whole): a
    TypeError for what is no integer, a ValueError for one out of range."""
    path = tmp_path / "t.idv"
    idv.write(path, {"x": np.arange(10, dtype=np.int32)})
    calls = {
        "batch_size": lambda: idv.record_batch_reader(path, batch_size=bad),
        "rows_per_block": lambda: idv.write(tmp_path / "w.idv", {"x": np.arange(3)},
                                            rows_per_block=bad),
        "max_open_files": lambda: idv.dataset([path], max_open_files=bad),
        "blocks_per_partition": lambda: scan.partitions(idv.dataset([path]), ["x"], bad),
        "threads": lambda: idv.read(path, threads=bad),
        # (the writer's: a file that is not left behind either)
        "threads ": lambda: idv.write(tmp_path / "w.idv", {"x": np.arange(3)}, threads=bad),
    }
    for name, call in calls.items():
        error = ValueError if isinstance(bad, int) and not isinstance(bad, bool) else TypeError
        with pytest.raises(error, match=rf"^{name.strip()} must be a number of \w+ "
                                             rf"\(1 (or more|to \d+)\)"):
            call()
    assert not (tmp_path / "w.idv").exists()
    assert idv.record_batch_reader(path, batch_size=np.int64(4)).read_all().num_rows == 10


def test_filters_pyarrows_spelling_is_refused_naming_filter(tmp_path):
    """pyarrow's and pandas' `filters=` given to a read or to idv.dataset (and so to the
    engines' scans over one) is refused naming the entry point and filter=, before any file
    is opened (not as open()'s unknown argument)."""
    calls = {
        "this read": lambda: idv.to_arrow(idv.sample_path(), filters=[("Id", "==", 1)]),
        "idv.dataset": lambda: idv.dataset(str(tmp_path / "none*.idv"), filters="Id == 1"),
    }
    for where, call in calls.items():
        with pytest.raises(TypeError, match=rf"^unexpected keyword argument 'filters': neither "
                                            rf"an option of {where} nor of idv.open; rows are "
                                            rf"filtered by a read's filter="):
            call()
    with pytest.raises(TypeError, match="'thread': neither an option of idv.dataset"):
        idv.dataset(idv.sample_path(), thread=2)


def test_a_keyword_no_reader_takes_is_named_as_such():
    """A one-call reader passes idv.open's options on; a name that is neither its own nor
    idv.open's is refused as that, not as open()'s."""
    for read in (idv.read, idv.to_arrow, idv.record_batch_reader):
        with pytest.raises(TypeError, match="'safe': neither an option of this read nor of "
                                            "idv.open") if read is idv.read else \
                pytest.raises(TypeError, match="'bogus': neither an option"):
            read(idv.sample_path(), **({"safe": False} if read is idv.read else {"bogus": 1}))
    with idv.open(idv.sample_path()) as f, pytest.raises(TypeError,
                                                         match=r"^IdvFile\.read\(\) .*'safe'"):
        f.read(safe=False)


def test_flags_are_true_or_false_not_truthy(tmp_path):
    """checksums= and safe= take True or False: 'no' would check by truthiness, and None not,
    silently; each is a TypeError naming the argument, on every reader that takes it."""
    path = tmp_path / "x.idv"
    idv.write(path, {"t": np.array(["2020-01-01T00:00:00.0000001"] * 3, "datetime64[ns]")})
    for bad in ("no", None, 0):
        with pytest.raises(TypeError, match="checksums must be True or False"):
            idv.open(path, checksums=bad)
        with pytest.raises(TypeError, match="checksums must be True or False"):
            idv.dataset([path], checksums=bad).read()
    pytest.importorskip("pyarrow", reason="safe= is the Arrow and pandas readers'")
    for read in (idv.to_arrow, idv.read_pandas):
        with pytest.raises(TypeError, match="safe must be True or False"):
            read(path, datetime="us", safe="no")
    assert idv.open(path, checksums=np.bool_(False)).has_checksums is False
