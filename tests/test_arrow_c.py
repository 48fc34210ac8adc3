"""idv._arrow_c.Spans: spans of a buffer as the chunks of one Arrow array through the Arrow C
stream interface: the values of each span, every span checked against the buffer, the buffer
pinned while any chunk lives and let go when the last one (or an unread stream) goes, from
whichever thread."""
from __future__ import annotations

import gc
import mmap
import pickle
import sys
import threading

import numpy as np
import pytest

from idv._arrow_c import Spans
from idv._values.arrow_types import c_format, imports_c_streams

pa = pytest.importorskip("pyarrow", reason="the Arrow C stream is read by pyarrow")
if not imports_c_streams(pa):
    pytest.skip(f"pyarrow {pa.__version__} makes no ChunkedArray of an Arrow C stream "
                f"(pyarrow 17 does)", allow_module_level=True)

DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_each_span_is_a_chunk_of_its_values(dtype):
    dtype = np.dtype(dtype)
    values = (np.arange(200) * 3 - 100).astype(dtype)
    offsets = np.array([0, 40, 17, 199]) * dtype.itemsize     # any order, any place
    rows = np.array([10, 0, 30, 1])
    chunks = pa.chunked_array(Spans(values, offsets, rows, dtype.itemsize, c_format(dtype)))
    assert chunks.type == pa.from_numpy_dtype(dtype)
    assert [len(c) for c in chunks.chunks] == rows.tolist()
    for c, o, n in zip(chunks.chunks, offsets // dtype.itemsize, rows):
        assert c.null_count == 0
        np.testing.assert_array_equal(c.to_numpy(zero_copy_only=True), values[o:o + n])


def test_chunks_are_views_of_the_buffer_not_copies():
    values = np.arange(100, dtype=np.int64)
    chunk = pa.chunked_array(Spans(values, [80], [5], 8, "l")).chunk(0)
    assert chunk.buffers()[1].address == values.__array_interface__["data"][0] + 80
    values[10] = -1
    assert chunk.to_pylist()[0] == -1


def test_a_pickled_chunk_carries_its_span_not_the_whole_buffer():
    values = np.zeros(1 << 20, np.float32)
    chunk = pa.chunked_array(Spans(values, [4096], [100], 4, "f")).chunk(0)
    assert len(pickle.dumps(chunk)) < 2000


@pytest.mark.parametrize("offsets, rows", [
    ([-8], [1]),                  # before the buffer
    ([0], [101]),                 # past its end
    ([792], [2]),                 # its last item and one more
    ([800 - 3], [1]),             # a part of an item past the end
    ([0, 8], [1]),                # lengths differ
    ([0], [-1]),                  # a negative count
])
def test_a_span_outside_the_buffer_is_refused(offsets, rows):
    with pytest.raises(ValueError, match="outside|offsets"):
        Spans(np.zeros(100, np.int64), np.array(offsets), np.array(rows), 8, "l")


@pytest.mark.parametrize("itemsize, fmt", [(0, "l"), (8, ""), (8, "ll")])
def test_a_bad_item_size_or_format_is_refused(itemsize, fmt):
    with pytest.raises(ValueError, match="format"):
        Spans(np.zeros(10, np.int64), [0], [1], itemsize, fmt)


def _mapped(tmp_path, values):
    p = tmp_path / "values.bin"
    p.write_bytes(values.tobytes())
    with open(p, "rb") as fh:
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def test_the_buffer_stays_pinned_while_any_chunk_lives(tmp_path):
    values = np.arange(1000, dtype=np.float64)
    mm = _mapped(tmp_path, values)
    chunks = pa.chunked_array(Spans(mm, [0, 800], [10, 10], 8, "g"))
    last = chunks.chunk(1)
    del chunks
    gc.collect()
    with pytest.raises(BufferError):
        mm.close()                  # the map would vanish under `last`
    assert last.to_pylist() == values[100:110].tolist()
    del last
    gc.collect()
    mm.close()                      # the last chunk gone: let go


def test_the_buffer_is_let_go_from_another_thread_and_by_an_unread_stream(tmp_path):
    mm = _mapped(tmp_path, np.arange(100, dtype=np.int32))
    base = sys.getrefcount(mm)
    holder = [pa.chunked_array(Spans(mm, [0, 40], [10, 10], 4, "i"))]
    assert sys.getrefcount(mm) > base
    t = threading.Thread(target=holder.clear)       # the chunks freed on another thread
    t.start()
    t.join()
    gc.collect()
    assert sys.getrefcount(mm) == base
    capsule = Spans(mm, [0], [1], 4, "i").__arrow_c_stream__()      # never imported
    del capsule
    gc.collect()
    assert sys.getrefcount(mm) == base
    mm.close()


@pytest.mark.parametrize("dtype", DTYPES + [np.bool_, np.dtype(">i4"), np.dtype("M8[ns]")])
def test_c_formats_name_the_arrow_type_of_each_number(dtype):
    dtype = np.dtype(dtype)
    fmt = c_format(dtype)
    if dtype.kind not in "iuf" or dtype.byteorder == ">":
        assert fmt is None
    else:       # pyarrow reads the format as the type it gives the numpy dtype
        empty = Spans(np.zeros(1, dtype), [0], [0], dtype.itemsize, fmt)
        assert pa.chunked_array(empty).type == pa.from_numpy_dtype(dtype)


def test_arrow_schema_takes_the_open_options_to_arrow_takes(tmp_path):
    import idv
    path = idv.sample_path()
    assert idv.arrow_schema(path, ["Id"], memory_limit="1GB", threads=1) == \
        idv.to_arrow(path, ["Id"], memory_limit="1GB", threads=1).schema
    with pytest.raises(TypeError, match="memory_limt"):
        idv.arrow_schema(path, memory_limt="1GB")
