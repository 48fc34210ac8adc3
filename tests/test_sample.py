"""The sample bundled with the package: there, ML.NET-written, and holding every common type.

Its values are checked against ML.NET's dump of it with the other fixtures (test_fixtures.py,
through testdata/manifest.json); here: what a new user relies on.
"""
from __future__ import annotations

import os

import cli_run
import idv
from reference import REPO_DIR, load_json


def test_sample_path_is_the_packaged_file():
    path = idv.sample_path()
    assert os.path.isfile(path)
    assert os.path.samefile(path, REPO_DIR / "idv" / "data" / "sample.idv")
    assert os.path.getsize(path) < 100_000


def test_sample_has_every_common_type_in_several_blocks():
    side = load_json(REPO_DIR / "testdata" / "sample.json")
    assert side["header"]["row_count"] == 240
    types = {c["name"]: c["type_string"] for c in side["columns"]}
    with idv.open(idv.sample_path()) as f:
        assert f.num_rows == 240
        assert {c.name: str(c.type) for c in f.columns} == {
            "Id": "Int64", "Listed": "DateTime", "City": "Key<UInt32, 5>", "Bedrooms": "Int32",
            "Area": "Single", "Price": "Double", "Sold": "Boolean", "Title": "Text",
            "Features": "Vector<Single, 4>"}
        assert len(types) == len(f.columns)
        assert f["Title"].num_blocks == 4
        assert f["City"].metadata["KeyValues"].tolist()[:2] == ["Seattle", "Redmond"]
        assert f["Features"].metadata["SlotNames"].tolist() == [
            "Bedrooms", "Area100", "Age10", "DistanceKm"]


def test_cli_sample_prints_the_path_the_other_commands_take():
    rc, out, err = cli_run.run("sample", check_rc=0)
    path = out.strip()
    assert os.path.samefile(path, idv.sample_path()) and err == ""
    rows = cli_run.run_json("head", path, "-n", "2")["data"]
    assert [r[7] for r in rows] == idv.open(path)["Title"][:2].tolist()
