"""The block store (idv._store.blocks) as a reader of several columns uses it, without Column's
read API: a run of a column's blocks decoded into the caller's buffer in the calling thread, blocks
inflated at the caller's offsets, and damage located by column, block and file. A Column reaches
its file only through the file's named interface, and the store knows no Column. """
from __future__ import annotations

import ast

import numpy as np
import pytest

import idv
from idv._resources import threads as _threads
from import_graph import import_graph
from reference import REPO_DIR

ROWS, RPB = 2000, 300


@pytest.fixture
def written(tmp_path):
    rng = np.random.default_rng(3)
    data = {"Id": np.arange(ROWS, dtype=np.int64),
            "Score": rng.random(ROWS, np.float32),
            "Name": [f"row {i}" for i in range(ROWS)],
            "Vec": rng.random((ROWS, 3), np.float32)}
    path = tmp_path / "blocks.idv"
    idv.write(path, data, rows_per_block=RPB)
    return path, data


def _no_pool(monkeypatch):
    def refuse(purpose, threads):
        raise AssertionError(f"the {purpose!r} pool was used")
    monkeypatch.setattr(_threads, "pool", refuse)


def test_a_run_of_blocks_decodes_into_the_callers_buffer_in_the_calling_thread(
        written, monkeypatch):
    path, data = written
    _no_pool(monkeypatch)
    with idv.open(path, threads=2) as f:
        for name in ("Id", "Score"):
            col = f[name]
            r0, r1 = col.block_rows(2)[0], col.block_rows(4)[1]
            nbytes = (r1 - r0) * col.dtype.itemsize
            out = f.store.buffer(nbytes, "a test")[:nbytes].view(col.dtype)
            assert f.store.decode(col.blocks, 2, 5, parallel=False, out=out) is out
            np.testing.assert_array_equal(out, data[name][r0:r1])
            assert col.blocks_decoded == 3
        vec = f.store.decode(f["Vec"].blocks, 1, 3, parallel=False)
        np.testing.assert_array_equal(vec, data["Vec"][RPB:3 * RPB])


def test_blocks_inflate_at_the_callers_offsets(written):
    path, data = written
    with idv.open(path) as f:
        col = f["Score"]
        table = col.lookup[1:4]
        raw = table["raw"].astype(np.int64)
        starts = 64 + np.concatenate([[0], np.cumsum(raw[:-1])])
        dst = np.zeros(64 + int(raw.sum()), np.uint8)
        f.store.inflate(col.blocks, 1, table, dst, starts)
        assert not dst[:64].any()
        np.testing.assert_array_equal(dst[64:].view(np.float32), data["Score"][RPB:4 * RPB])
        assert col.blocks_decoded == 0          # inflating is not decoding a read


class _CountingBackend:
    """The store's DEFLATE library, its decompress_blocks calls counted."""

    def __init__(self, backend):
        self.backend = backend
        self.calls = 0

    def decompress_blocks(self, *args):
        self.calls += 1
        return self.backend.decompress_blocks(*args)

    def __getattr__(self, name):
        return getattr(self.backend, name)


def _pieces(f, wanted):
    """(ColumnBlocks, b0, b1, out) for each (name, b0, b1) of `wanted`, `out` parts of one
    buffer."""
    pieces, sizes = [], []
    for name, b0, b1 in wanted:
        col = f[name]
        r0, r1 = col.block_rows(b0)[0], col.block_rows(b1 - 1)[1]
        sizes.append((r1 - r0) * col.dtype.itemsize)
    buf = f.store.buffer(sum(sizes), "a test")
    at = 0
    for (name, b0, b1), n in zip(wanted, sizes):
        pieces.append((f[name].blocks, b0, b1, buf[at:at + n].view(f[name].dtype)))
        at += n
    return pieces


def test_pieces_of_many_columns_inflate_in_one_call(written, monkeypatch):
    path, data = written
    _no_pool(monkeypatch)
    wanted = [("Id", 1, 2), ("Score", 0, 1), ("Id", 4, 6), ("Score", 5, 7)]
    with idv.open(path, threads=2) as f:
        counting = f.store.backend = _CountingBackend(f.store.backend)
        pieces = _pieces(f, wanted)
        f.store.inflate_fixed(pieces, parallel=False)
        assert counting.calls == 1
        for (name, b0, b1), (_blocks, _b0, _b1, out) in zip(wanted, pieces):
            np.testing.assert_array_equal(out, data[name][b0 * RPB:min(b1 * RPB, ROWS)])
        assert (f["Id"].blocks_decoded, f["Score"].blocks_decoded) == (3, 3)


@pytest.mark.parametrize("backend", ["zlib", "libdeflate"])
def test_pieces_into_arrays_of_their_own_inflate_in_one_call(written, monkeypatch, backend):
    """Each column read whole into its own array (a wide file's read): one inflate call for
    them all, through a native library's C loop."""
    path, data = written
    _no_pool(monkeypatch)
    if backend not in idv.compression.installed():
        pytest.skip(f"{backend} is not installed")
    wanted = [("Id", 0, 7), ("Score", 0, 7), ("Id", 2, 4)]
    with idv.open(path, threads=2, backend=backend) as f:
        assert f.store.backend.native is not None
        counting = f.store.backend = _CountingBackend(f.store.backend)
        pieces = [(f[name].blocks, b0, b1,
                   np.zeros(min(b1 * RPB, ROWS) - b0 * RPB, f[name].dtype))
                  for name, b0, b1 in wanted]
        f.store.inflate_fixed(pieces, parallel=False)
        assert counting.calls == 1
        for (name, b0, b1), (_blocks, _b0, _b1, out) in zip(wanted, pieces):
            np.testing.assert_array_equal(out, data[name][b0 * RPB:min(b1 * RPB, ROWS)])


def _damage(path, column, block):
    """Flip a bit inside block `block` of `column` of the file at `path`; its lookup entry."""
    with idv.open(path, checksums=False) as f:
        entry = f[column].lookup[block]
    bad = bytearray(path.read_bytes())
    bad[int(entry["offset"]) + 5] ^= 0x10
    path.write_bytes(bytes(bad))
    return entry


@pytest.mark.parametrize("arrays", ["one buffer", "an array each"])
def test_damage_among_many_pieces_names_its_column_and_block(written, arrays):
    path, _ = written
    entry = _damage(path, "Score", 5)
    for checksums in (True, False):
        with idv.open(path, checksums=checksums) as f:
            pieces = _pieces(f, [("Id", 0, 3), ("Score", 1, 2), ("Score", 4, 7)])
            if arrays == "an array each":
                pieces = [(b, b0, b1, out.copy()) for b, b0, b1, out in pieces]
            with pytest.raises(idv.IdvFormatError) as e:
                f.store.inflate_fixed(pieces)
            assert (e.value.column, e.value.column_index, e.value.block, e.value.offset,
                    e.value.path) == ("Score", 1, 5, int(entry["offset"]), f.path)
            if checksums:
                assert "checksum mismatch" in str(e.value)


def test_a_take_inflates_the_blocks_it_hits_of_all_its_columns_in_one_call(written):
    path, data = written
    rows = np.array([1999, 5, 620, 10, 1500])        # blocks 6, 0, 2, 0, 5; 6 is short
    with idv.open(path, threads=1) as f:
        counting = f.store.backend = _CountingBackend(f.store.backend)
        got = f.take(rows, ["Score", "Id"])
        assert counting.calls == 1
        assert (f["Id"].blocks_decoded, f["Score"].blocks_decoded) == (4, 4)
    for name in ("Score", "Id"):
        np.testing.assert_array_equal(got[name], data[name][rows])


def test_damage_hit_by_a_take_names_its_column_and_block(written):
    path, data = written
    entry = _damage(path, "Score", 2)
    for checksums in (True, False):
        with idv.open(path, checksums=checksums, threads=2) as f:
            with pytest.raises(idv.IdvFormatError) as e:
                f.take([1999, 700, 3], ["Id", "Score"])
            assert (e.value.column, e.value.block, e.value.offset, e.value.path) == (
                "Score", 2, int(entry["offset"]), f.path)
            if checksums:
                assert "checksum mismatch" in str(e.value)
            got = f.take([1999, 3], ["Id", "Score"])      # blocks 6 and 0 are sound
            np.testing.assert_array_equal(got["Score"], data["Score"][[1999, 3]])


def test_text_blocks_and_their_room(written):
    path, data = written
    with idv.open(path) as f:
        col = f["Name"]
        room = col.text_room(0, 2)
        spans = f.store.decode_text(col.blocks, 0, 2, out=np.empty(room, np.uint8))
        assert len(spans) == 2 and col.blocks_decoded == 2
        with pytest.raises(ValueError, match=f"out= takes {room} contiguous bytes"):
            f.store.decode_text(col.blocks, 0, 2, out=np.empty(room + 1, np.uint8))


def test_damage_found_by_the_store_names_the_column_the_block_and_the_file(written):
    path, _ = written
    entry = _damage(path, "Score", 2)
    with idv.open(path) as f:
        blocks = f["Score"].blocks
        with pytest.raises(idv.IdvFormatError, match="checksum mismatch") as e:
            f.store.decode(blocks, 0, 4, parallel=False)
        assert (e.value.column, e.value.column_index, e.value.block, e.value.offset,
                e.value.path) == ("Score", 1, 2, int(entry["offset"]), f.path)
    with pytest.raises(ValueError, match="closed"):
        f.store.decode(blocks, 0, 1)


def test_column_reaches_its_file_through_the_named_interface():
    """column.py uses only these attributes of its file; the store's module imports neither
    the column's nor the reader's, and the column's not the reader's (the file is passed
    in)."""
    tree = ast.parse((REPO_DIR / "idv" / "_reader" / "column.py").read_text(encoding="utf-8"))
    used = {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "_file"}
    assert used == {"store", "tables", "path", "check_open", "num_rows", "header"}
    graph = import_graph(REPO_DIR / "idv")
    assert not {"idv._reader.column", "idv._reader.reader"} & set(graph["idv._store.blocks"])
    assert "idv._reader.reader" not in graph["idv._reader.column"]


def test_inflating_into_several_buffers_checks_each_block_against_its_own():
    """_compression.inflate_blocks_across: block i into dsts[dst_of[i]], each range checked
    against that buffer (not the largest), a buffer number outside the list refused."""
    from idv import _compression
    parts = [bytes(range(40)), bytes(50 * [7])]
    stored = [_compression.deflate_raw(p) for p in parts]
    src = np.frombuffer(b"".join(stored), np.uint8)
    offsets = np.array([0, len(stored[0])], np.int64)
    disk = np.array([len(s) for s in stored], np.int32)
    raw = np.array([len(p) for p in parts], np.int32)
    small, large = np.zeros(48, np.uint8), np.zeros(200, np.uint8)
    got = _compression.inflate_blocks_across(_compression.DEFLATE, [src], None, offsets, disk,
                                             raw, [small, large], np.array([0, 1], np.int32),
                                           np.array([8, 100], np.int64))
    assert got == (-1, None)
    assert bytes(small[8:]) == parts[0] and bytes(large[100:150]) == parts[1]
    # 50 bytes at 8 fit the large buffer, not the small one it is sent to
    bad = _compression.inflate_blocks_across(_compression.DEFLATE, [src], None, offsets, disk,
                                             raw, [small, large], np.array([0, 0], np.int32),
                                           np.array([0, 8], np.int64))
    assert bad == (1, "block lies outside the file or the output")
    with pytest.raises(ValueError, match="destination 2 of 2"):
        _compression.inflate_blocks_across(_compression.DEFLATE, [src], None, offsets, disk,
                                           raw, [small, large], np.array([0, 2], np.int32),
                                         np.array([0, 0], np.int64))
    with pytest.raises((BufferError, ValueError)):        # a read-only destination
        _compression.inflate_blocks_across(_compression.DEFLATE, [src], None, offsets, disk,
                                           raw, [small, b"x" * 200], np.array([0, 1], np.int32),
                                         np.array([0, 0], np.int64))
