"""idv.verify: the file checker as a library, returning a report instead of raising.

The files are test_errors.py's small file, damaged at the byte offsets its lookup tables give
(the command line's report is tested in test_cli.py).
"""
from __future__ import annotations

import io
import json
import struct

import numpy as np
import pytest
from craft import Meta, build, key2_params, parse, text_payload, vbuf_params, vbuf_payload
from test_errors import BLOCKS, ROWS, RPB, good  # noqa: F401 (good: the fixture)

import idv


def _lookup(path, column):
    with idv.open(path) as f:
        return f[column].lookup_offset, f[column].lookup.copy()


def test_a_sound_file(good):
    report = idv.verify(good)
    assert report.ok and report.problems == [] and report.warnings == []
    assert (report.num_rows, report.num_columns, report.path) == (ROWS, 3, str(good))
    assert report.checked == {"columns": 3, "blocks": 3 * BLOCKS,
                              "block_bytes": sum(int(_lookup(good, c)[1]["disk"].sum())
                                                 for c in ("Id", "Features", "Txt")),
                              "lookup_tables": 3, "metadata": 1}
    assert [(c["name"], c["blocks_ok"]) for c in report.columns] == \
        [("Id", BLOCKS), ("Features", BLOCKS), ("Txt", BLOCKS)]
    text = str(report)
    assert text.splitlines()[0] == f"{good}: OK"
    assert text.splitlines()[-1].startswith("checked 3 of 3 columns, 15 blocks")
    assert json.loads(json.dumps(report.to_dict()))["ok"] is True


def test_sources_other_than_paths(good):
    data = good.read_bytes()
    assert idv.verify(data).ok and idv.verify(data).path is None
    with idv.open(good) as f:
        assert idv.verify(f).ok
        assert not f.closed and len(f["Id"].read()) == ROWS    # left open


def test_every_damaged_block_is_a_finding(good):
    _, table = _lookup(good, "Features")
    data = bytearray(good.read_bytes())
    for b in (1, 3):
        o, d = int(table["offset"][b]), int(table["disk"][b])
        data[o:o + d] = b"\xff" * d
    good.write_bytes(bytes(data))
    report = idv.verify(good)
    assert not report.ok
    assert [(p.what, p.column, p.column_index, p.block) for p in report.problems] == \
        [("block", "Features", 1, 1), ("block", "Features", 1, 3)]
    p = report.problems[0]
    assert (p.offset, p.size, p.rows) == (int(table["offset"][1]), int(table["disk"][1]),
                                          (RPB, 2 * RPB - 1))
    assert p.message == "corrupt compressed data"
    assert str(p) == (f"column 1 'Features' block 1 (rows 4-7) at byte {p.offset} "
                      f"({p.size} bytes): corrupt compressed data")
    assert report.columns[1]["blocks_ok"] == BLOCKS - 2
    assert report.checked["blocks"] == 3 * BLOCKS - 2
    assert report.to_dict()["problems"][0] == {
        "what": "block", "column": 1, "name": "Features", "block": 1, "rows": [4, 7],
        "offset": p.offset, "size": p.size, "message": "corrupt compressed data"}


def test_every_bad_lookup_entry_is_a_finding(good):
    lookup_offset, _ = _lookup(good, "Id")
    data = bytearray(good.read_bytes())
    for b in (0, 2, 4):
        struct.pack_into("<q", data, lookup_offset + 16 * b, 10**12)
    report = idv.verify(bytes(data))
    lookups = [p for p in report.problems if p.what == "lookup"]
    assert [(p.column, p.block, p.offset) for p in lookups] == \
        [("Id", b, lookup_offset + 16 * b) for b in (0, 2, 4)]
    assert [w.message for w in report.warnings] == \
        ["blocks not checked: the lookup table is invalid"]
    assert report.columns[0]["blocks_ok"] == 0 and report.columns[1]["blocks_ok"] == BLOCKS


def test_damaged_metadata_is_a_finding(good):
    with idv.open(good) as f:
        m = f["Txt"].metadata_entries()[0]
    data = bytearray(good.read_bytes())
    data[m.offset:m.offset + m.size] = b"\x07" * m.size
    report = idv.verify(bytes(data))
    assert [(p.what, p.column, p.metadata_kind, p.offset, p.size) for p in report.problems] == \
        [("metadata", "Txt", "Note", m.offset, m.size)]
    assert report.checked["metadata"] == 0


def test_overlapping_blocks_are_a_finding(good):
    lookup_offset, table = _lookup(good, "Id")
    data = bytearray(good.read_bytes())
    struct.pack_into("<q", data, lookup_offset + 16, int(table["offset"][0]))
    report = idv.verify(bytes(data))
    # refused when the file opens (idv._storage.layout), before any block is decoded
    assert [p.what for p in report.problems] == ["file"]
    assert "column 0 'Id' block 1" in report.problems[0].message
    assert "overlaps column 0 'Id' block 0" in report.problems[0].message


def test_a_file_that_cannot_be_opened_is_one_finding(good, tmp_path):
    cut = tmp_path / "cut.idv"
    cut.write_bytes(good.read_bytes()[:300])
    report = idv.verify(cut)
    assert not report.ok and report.num_rows is None and report.columns == []
    assert [(p.what, p.column, p.offset) for p in report.problems] == [("file", None, None)]
    assert report.problems[0].message.startswith("byte 32: tail offset ")
    assert str(report).splitlines() == [f"{cut}: 1 problem",
                                        f"  file: {report.problems[0].message}"]
    with pytest.raises(FileNotFoundError):
        idv.verify(tmp_path / "missing.idv")


def test_an_unknown_codec_is_a_warning(good):
    data = bytearray(good.read_bytes())
    at = data.rindex(b"\x05Int32")
    data[at + 1:at + 6] = b"Int3X"
    with pytest.warns(idv.IdvWarning):
        report = idv.verify(bytes(data))
    assert report.ok and report.problems == []
    assert [(w.what, w.column, w.message) for w in report.warnings] == \
        [("column", "Id", "not checked: unknown codec 'Int3X'")]
    assert report.summary == "OK, 1 warning"
    assert report.checked["columns"] == 2 and report.checked["lookup_tables"] == 3


def test_key_values_and_slot_names_of_another_size_are_problems():
    """A file written elsewhere with a KeyValues of another size than its key's count, and
    SlotNames of another size than its vector: readers ignore them, verify reports them."""
    out = io.BytesIO()
    idv.write(out, {"Color": np.array([1, 2], np.uint32), "v": np.ones((2, 3), np.float32)},
              types={"Color": idv.Key(idv.UInt32, count=2)},
              metadata={"Color": {"KeyValues": ["red", "blue"]},
                        "v": {"SlotNames": ["a", "b", "c"]}},
              checksums=False, statistics=False)
    assert idv.verify(out.getvalue()).ok
    model = parse(out.getvalue())
    model.cols[0].params = key2_params("UInt32", 3)        # Key<UInt32, 3>, two KeyValues
    model.cols[1].meta = [Meta("SlotNames", "VBuffer", vbuf_params("TextSpan", (2,)), 0,
                               vbuf_payload(1, 2, [-1], [], text_payload(["a", "b"])))]
    report = idv.verify(build(model)[0])
    assert not report.ok
    found = [(p.what, p.column, p.metadata_kind, p.message) for p in report.problems]
    assert found == [
        ("metadata", "Color", "KeyValues",
         "KeyValues holds 2 values, but Key<UInt32, 3> needs 3 (one per key)"),
        ("metadata", "v", "SlotNames",
         "SlotNames holds 2 values, but Vector<Single, 3> needs 3 (one per slot)")]
    assert report.checked["metadata"] == 0
