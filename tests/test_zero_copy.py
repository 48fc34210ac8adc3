"""Zero copy: uncompressed numbers and keys of a memory-mapped file handed out as views of the
map (to_arrow, record_batch_reader, read(copy=False)): the same values as the copying read,
read-only, valid after the file is closed, still checked against their CRC-32s; every other
source and form copies as before."""
from __future__ import annotations

import gc
import io
import mmap
import threading

import numpy as np
import pytest

import idv
from idv._scan import scan_windows
from idv._storage import source
from idv._values.arrow_types import imports_c_streams
from http_server import RangeServer

pa = pytest.importorskip("pyarrow", reason="to_arrow and record_batch_reader need pyarrow")

# 16 blocks, the last of 40 rows: every block a multiple of 8 bytes, so that all lie aligned
# for their items (blocks that do not are copied)
ROWS, RPB = 1000, 64
NUMBERS = {"i1": np.int8, "u1": np.uint8, "i2": np.int16, "u2": np.uint16, "i4": np.int32,
           "u4": np.uint32, "i8": np.int64, "u8": np.uint64, "r4": np.float32,
           "r8": np.float64}
TYPES = {"k": idv.Key(idv.UInt32, 9), "kv": idv.Key(idv.UInt16, 3)}
KEY_VALUES = {"kv": {"KeyValues": ["a", "b", "c"]}}


def _table(rows=ROWS):
    rng = np.random.default_rng(5)
    data = {n: rng.integers(0, 100, rows).astype(t) for n, t in NUMBERS.items()}
    data["r8"] = rng.standard_normal(rows)
    data["k"] = rng.integers(0, 10, rows).astype(np.uint32)
    data["kv"] = rng.integers(0, 4, rows).astype(np.uint16)
    # fixed-width, but stored in another form than their values: always copied
    data["when"] = np.datetime64("2020-01-01", "ns") + 100 * rng.integers(0, 10**13, rows)
    data["flag"] = rng.integers(0, 2, rows).astype(bool)
    return data


def _write(path, rows=ROWS, rows_per_block=RPB, **kwargs):
    idv.write(path, _table(rows), types=TYPES, metadata=KEY_VALUES, compression="none",
              rows_per_block=rows_per_block, **kwargs)
    return path


@pytest.fixture
def path(tmp_path):
    return _write(tmp_path / "none.idv")


MAPPED = list(NUMBERS) + list(TYPES)


def test_numbers_and_keys_of_an_uncompressed_mapped_file_are_mappable(path):
    with idv.open(path) as f:
        assert [c.name for c in f.columns if c.mappable] == MAPPED
    deflated = path.with_name("deflate.idv")
    idv.write(deflated, _table(), types=TYPES, rows_per_block=RPB)
    with idv.open(deflated) as f:
        assert not any(c.mappable for c in f.columns)


def _in_map(array, f):
    """Whether numpy `array` lies in the bytes of open file `f` (its memory map, or the bytes
    of a small file, read whole)."""
    mapped = np.frombuffer(f.store.view(0, len(f.store.view(0, 0).obj)), np.uint8)
    lo = mapped.__array_interface__["data"][0]
    at = array.__array_interface__["data"][0]
    return lo <= at < lo + len(mapped)


def test_read_without_copying_equals_the_copying_read(path):
    want = idv.read(path)
    with idv.open(path) as f:
        got = f.read(copy=False)
    assert list(got) == list(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
        assert got[name].dtype == want[name].dtype


def test_a_column_of_one_block_is_a_read_only_view_valid_after_close(tmp_path):
    p = _write(tmp_path / "one.idv", rows_per_block=ROWS)
    want = idv.read(p)
    with idv.open(p) as f:
        assert f["r8"].num_blocks == 1
        got = f.read(MAPPED, copy=False)
        assert all(_in_map(got[n], f) for n in MAPPED)
    del f
    gc.collect()
    for name in MAPPED:
        assert not got[name].flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            got[name][0] = 1
        np.testing.assert_array_equal(got[name], want[name])
    # through idv.read: the file closed before the values are seen
    np.testing.assert_array_equal(idv.read(p, ["i8"], copy=False)["i8"], want["i8"])


def test_a_column_of_several_blocks_is_copied_as_numpy_needs_one_buffer(path):
    with idv.open(path) as f:
        got = f.read(["r4"], copy=False)["r4"]
        assert not _in_map(got, f) and got.flags.writeable
        assert f["r4"].blocks_decoded == f["r4"].num_blocks


@pytest.fixture(params=["C stream", "from_buffers"])
def made_by(request, monkeypatch):
    """How the chunks on the map are made: pyarrow's import of an Arrow C stream of them
    (idv._arrow_c), or one from_buffers call each (pyarrow before 17)."""
    if request.param == "from_buffers":
        monkeypatch.setattr(idv._interop.arrow_columns, "imports_c_streams", lambda pa: False)
    elif not imports_c_streams(pa):
        pytest.skip(f"pyarrow {pa.__version__} makes no ChunkedArray of a C stream")
    return request.param


def test_arrow_arrays_are_chunks_on_the_map_read_only_and_valid_after_close(path, made_by):
    want = idv.to_arrow(path.read_bytes())        # bytes: copied, one chunk a column
    with idv.open(path) as f:
        got = f.to_arrow()
        batches = list(idv.record_batch_reader(f))
        base = np.frombuffer(f.store.view(0, 16), np.uint8).__array_interface__["data"][0]
        for name in NUMBERS:
            chunks = got.column(name).chunks
            assert len(chunks) == f[name].num_blocks
            offsets = f[name].lookup["offset"]
            assert [c.buffers()[1].address - base for c in chunks] == offsets.tolist()
            assert not any(c.buffers()[1].is_mutable for c in chunks)
        k = list(got.schema.names).index("r8")
        assert batches[3].column(k).buffers()[1].address - base == \
            int(f["r8"].lookup["offset"][3])
    del f
    gc.collect()
    assert got.equals(want)
    assert pa.Table.from_batches(batches).equals(want.combine_chunks())
    assert got.column("kv").type == want.column("kv").type      # a dictionary of KeyValues


def test_record_batches_of_rows_and_sizes_equal_the_copying_reader(path, made_by):
    data = path.read_bytes()
    for kwargs in ({"rows": slice(100, 700, 3)}, {"batch_size": 100}):
        got = pa.Table.from_batches(list(idv.record_batch_reader(path, **kwargs)))
        want = pa.Table.from_batches(list(idv.record_batch_reader(data, **kwargs)))
        assert got.equals(want)


def test_views_of_the_map_are_made_in_the_calling_thread(path, monkeypatch):
    """A mapped column's pieces are not handed to the scan's threads (views take
    microseconds holding the GIL); the other columns' still are."""
    monkeypatch.setattr(scan_windows, "INLINE_BYTES", 0)
    where = {}
    decode = scan_windows.Windows._decoded

    def recorded(self, task):
        for piece in task:
            where.setdefault(self.readers[piece[0]].col.name, set()).add(threading.get_ident())
        return decode(self, task)
    monkeypatch.setattr(scan_windows.Windows, "_decoded", recorded)
    with idv.open(path, threads=2) as f:
        got = pa.Table.from_batches(list(idv.record_batch_reader(f, ["r8", "when", "i4",
                                                                     "flag"])))
    here = threading.get_ident()
    assert where["r8"] == where["i4"] == {here}
    assert here not in where["when"] | where["flag"]
    assert got.equals(idv.to_arrow(path.read_bytes(), ["r8", "when", "i4", "flag"]))


def _damage(path, column, block):
    """Flip a bit in block `block` of `column`: its lookup entry."""
    with idv.open(path) as f:
        entry = f[column].lookup[block]
    bad = bytearray(path.read_bytes())
    bad[int(entry["offset"]) + 3] ^= 0x04
    path.write_bytes(bytes(bad))
    return entry


@pytest.mark.parametrize("how", ["read", "to_arrow", "record_batch_reader", "threads"])
def test_a_damaged_block_is_still_caught_by_its_checksum(tmp_path, how, monkeypatch):
    rpb = ROWS if how == "read" else RPB        # numpy: a view where one block holds a column
    block = 0 if how == "read" else 5
    path = _write(tmp_path / "none.idv", rows_per_block=rpb)
    entry = _damage(path, "i4", block)
    if how == "threads":        # the blocks' CRC-32s computed in spans, on two threads
        monkeypatch.setattr(idv._store.block_checks, "_CRC_SPAN_BYTES", 64)
        how = "to_arrow"
    with idv.open(path, threads=2) as f, \
            pytest.raises(idv.IdvFormatError, match="checksum") as e:
        assert f["i4"].mappable
        if how == "read":
            f.read(["r8", "i4"], copy=False)
        elif how == "to_arrow":
            f.to_arrow(["r8", "i4"])
        else:
            list(idv.record_batch_reader(f, ["r8", "i4"]))
    assert (e.value.column, e.value.block, e.value.offset) == ("i4", block,
                                                               int(entry["offset"]))
    with idv.open(path, checksums=False) as f:       # unchecked: the values as they lie
        got = f.to_arrow(["i4"]).column("i4").to_numpy()
    assert got[block * rpb] != _table()["i4"][block * rpb]


def test_files_without_checksums_are_mapped_too(tmp_path):
    p = _write(tmp_path / "unchecked.idv", checksums=False)
    with idv.open(p) as f:
        assert not f.has_checksums
        assert [c.name for c in f.columns if c.mappable] == MAPPED
        got = f.to_arrow()
    assert got.equals(idv.to_arrow(p.read_bytes()))


def test_sources_that_are_not_a_mapped_file_copy(path):
    data = path.read_bytes()
    want = idv.read(path)
    with RangeServer({"/none.idv": data}) as srv:
        sources = {"bytes": data, "file object": io.BytesIO(data), "url": srv.url("/none.idv")}
        for what, source in sources.items():
            with idv.open(source) as f:
                assert not any(c.mappable for c in f.columns), what
                got = f.read(copy=False)
                assert f.to_arrow().equals(idv.to_arrow(path)), what
            for name in MAPPED:
                assert got[name].flags.writeable, what
                np.testing.assert_array_equal(got[name], want[name])


def test_a_small_file_is_read_whole_and_handed_out_without_copying(tmp_path, monkeypatch):
    p = _write(tmp_path / "small.idv", rows=200, rows_per_block=200)
    assert p.stat().st_size <= source.SMALL_FILE_BYTES
    want = idv.read(p)
    with idv.open(p) as f:
        assert isinstance(f.store.view(0, 0).obj, bytes)       # read whole, not mapped
        got = f.read(MAPPED, copy=False)
        assert all(_in_map(got[n], f) and not got[n].flags.writeable for n in MAPPED)
        with open(p, "r+b") as fh:           # its bytes are in memory: nothing to fault
            fh.truncate(1024)
        again = f.read(["r8"], copy=False)["r8"]
    np.testing.assert_array_equal(again, want["r8"])
    monkeypatch.setattr(source, "SMALL_FILE_BYTES", 0)
    _write(p, rows=200, rows_per_block=200)
    with idv.open(p) as f:
        assert isinstance(f.store.view(0, 0).obj, mmap.mmap)
        got = f.read(MAPPED, copy=False)
        assert all(_in_map(got[n], f) for n in MAPPED)


def test_a_file_truncated_while_open_is_refused_before_it_is_mapped(path, monkeypatch):
    monkeypatch.setattr(source, "SMALL_FILE_BYTES", 0)       # mapped, however small
    with idv.open(path) as f:
        with open(path, "r+b") as fh:
            fh.truncate(1024)
        with pytest.raises(idv.IdvFormatError, match="truncated while open"):
            f.read(["r8"], copy=False)
        with pytest.raises(idv.IdvFormatError, match="truncated while open"):
            f.to_arrow(["r8"])
