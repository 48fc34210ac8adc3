"""The block store (idv.blocks) as a reader of several columns uses it, without Column's read
API: a run of a column's blocks decoded into the caller's buffer in the calling thread, blocks
inflated at the caller's offsets, and damage located by column, block and file. A Column
reaches its file only through the file's named interface, and the store knows no Column.
"""
from __future__ import annotations

import ast

import numpy as np
import pytest

import idv
from idv import _threads
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
    with idv.open(path, checksums=False) as f:
        entry = f["Score"].lookup[2]
    bad = bytearray(path.read_bytes())
    bad[int(entry["offset"]) + 5] ^= 0x10
    path.write_bytes(bytes(bad))
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
    tree = ast.parse((REPO_DIR / "idv" / "column.py").read_text(encoding="utf-8"))
    used = {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "_file"}
    assert used == {"store", "tables", "path", "check_open", "num_rows", "header"}
    graph = import_graph(REPO_DIR / "idv")
    assert not {"idv.column", "idv.reader"} & set(graph["idv.blocks"])
    assert "idv.reader" not in graph["idv.column"]
