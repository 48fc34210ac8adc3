"""The fixtures in <repo>/testdata are what testdata/regenerate.py says, and ML.NET's.

test_fixtures.py compares our reader with these files' sidecars. This module checks the
fixtures themselves: the committed specs are the ones regenerate.py builds, every sidecar holds
the spec's values (after ML.NET's one documented normalization: a scalar TimeSpan of
long.MinValue ticks reads as 0), sparse rows stayed sparse, the blocks are as many as intended,
and (with the oracle) ML.NET's dump of each committed .idv is the committed sidecar.
"""
from __future__ import annotations

import importlib.util
import json

import pytest

import idv
from expected import ExpectedRagged, assert_column_equal, column_expected, parse_type_string
from reference import TESTDATA_DIR, load_json, regenerated_fixtures

I64_MIN = -2 ** 63


pytestmark = pytest.mark.skipif(not (TESTDATA_DIR / "regenerate.py").exists(),
                                reason=f"{TESTDATA_DIR / 'regenerate.py'} missing")


def _regenerate():
    path = TESTDATA_DIR / "regenerate.py"
    spec = importlib.util.spec_from_file_location("idv_testdata_regenerate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REGEN = None
NAMES = []
if (TESTDATA_DIR / "regenerate.py").exists():
    REGEN = _regenerate()
    NAMES = list(REGEN.FIXTURES)


def _names():
    return NAMES or [pytest.param(None, id="missing")]


def test_manifest_matches_regenerate():
    manifest = load_json(TESTDATA_DIR / "manifest.json")
    assert list(manifest) == NAMES
    on_disk = sorted(p.stem for p in TESTDATA_DIR.glob("*.idv"))
    in_package = sorted(n for n, p in REGEN.PACKAGE_DATA.items() if p.exists())
    assert in_package == sorted(REGEN.PACKAGE_DATA), "a fixture of the package is missing"
    assert on_disk == sorted(set(NAMES) - set(in_package)), \
        "stray or missing .idv files in testdata/"
    for name, entry in manifest.items():
        assert entry["self_check"] == "ok", f"{name}: ML.NET's self-check: {entry['self_check']}"
        assert entry["save_options"] == REGEN.FIXTURES[name][2]
        for key in ("spec", "idv", "sidecar"):
            size = (TESTDATA_DIR / entry[key]).stat().st_size
            assert 0 < size < 100_000, f"{entry[key]}: {size} bytes"


@pytest.mark.parametrize("name", _names())
def test_spec_is_current(name):
    """The committed spec is what regenerate.py builds (else rerun it)."""
    committed = load_json(TESTDATA_DIR / f"{name}.spec.json")
    built = json.loads(json.dumps(REGEN.FIXTURES[name][1]()))
    assert committed == built, f"testdata/{name}.spec.json is stale: run testdata/regenerate.py"


@pytest.mark.parametrize("name", _names())
def test_sidecar_holds_the_spec(name):
    spec = load_json(TESTDATA_DIR / f"{name}.spec.json")
    side = load_json(TESTDATA_DIR / f"{name}.json")
    options = REGEN.FIXTURES[name][2]
    assert side["row_count"] == spec["rows"]
    by_name = {c["name"]: c for c in side["columns"]}
    assert list(by_name) == [c["name"] for c in spec["columns"]]
    for scol in spec["columns"]:
        dcol = by_name[scol["name"]]
        t = parse_type_string(dcol["type_string"])
        want = [_ml_net_reads(scol, c) for c in scol["values"]]
        got = [row[dcol["index"]] for row in side["rows"]]
        read = column_expected(t, got)
        if isinstance(read, ExpectedRagged):
            read = idv.Ragged(read.values, read.offsets)
        assert_column_equal(read, column_expected(t, want),
                            f"{name} {scol['name']}")
        # sparse rows were kept sparse (the point of these fixtures)
        assert [isinstance(c, dict) for c in got] == [isinstance(c, dict) for c in want], \
            f"{name} {scol['name']}: dense/sparse layout changed"
    for tc in side["table_of_contents"]["columns"]:
        if "--max-rows-per-block" in options:
            rpb = int(options[options.index("--max-rows-per-block") + 1])
            assert tc["rows_per_block"] == rpb
            assert -(-spec["rows"] // rpb) >= 3, "fewer than 3 blocks"
        if "--compression" in options:
            comp = options[options.index("--compression") + 1]
            assert tc["compression"] == {"none": "None", "deflate": "Deflate"}[comp]


def test_timespan_min_value():
    """ML.NET 1.5 maps TimeSpan long.MinValue ticks to 0 only in a scalar read (data or
    annotation); vectors keep it, dense or sparse (format reference 4.2)."""
    side = load_json(TESTDATA_DIR / "datetime_vectors.json")
    cols = {c["name"]: c["index"] for c in side["columns"]}
    ts = [row[cols["TS"]] for row in side["rows"]]
    assert I64_MIN not in ts and ts[0] == 0 and ts[7] == I64_MIN + 1
    var = [row[cols["VarTS"]] for row in side["rows"]]
    assert var[0] == [I64_MIN] and var[3] == {"length": 4, "indices": [2], "values": [I64_MIN]}
    ann = {a["kind"]: a["value"] for a in load_json(TESTDATA_DIR / "annotations_more.json")
           ["columns"][0]["annotations"]}
    assert ann["TSMin"] == 0 and ann["TSVec"] == [I64_MIN, 2 ** 63 - 1, 0]


_VOLATILE = ("writer", "mlnet", "file")


def test_sidecars_are_ml_nets_view(oracle):
    """ML.NET's dump of every committed .idv is the committed sidecar."""
    paths = [f.idv_path for f in regenerated_fixtures()]
    assert paths, "no testdata fixtures"
    dumps = oracle.dump_many(paths)
    for p in paths:
        dump = dumps[str(p)]
        assert "error" not in dump, f"ML.NET could not read {p.name}: {dump.get('error')}"
        side = load_json(TESTDATA_DIR / f"{p.stem}.json")
        for key in _VOLATILE:
            dump.pop(key, None)
            side.pop(key, None)
        assert dump == side, f"{p.name}: ML.NET's dump differs from the committed sidecar"


def _ml_net_reads(spec_col, cell):
    """What ML.NET gives back for a spec cell: scalar TimeSpan long.MinValue reads as 0."""
    if spec_col["type"] == "TimeSpan" and "vector" not in spec_col and cell == I64_MIN:
        return 0
    return cell
