"""Every ML.NET-written fixture reads exactly as ML.NET reads it.

Two sets of files, each .idv with a JSON sidecar of what ML.NET 1.5 reads from it (written by
shared/oracle/mlnet_oracle.py):

* ``sample/...``: shared/oracle/fixtures-sample (29 files, read from the shared folder);
* ``testdata/...``: our own, in <repo>/testdata, built by testdata/regenerate.py for what the
  sample does not cover (many blocks of mixed dense/sparse/empty vectors, text and Boolean
  vectors across blocks, date/time vectors with extreme ticks, wide keys, no compression).

For each: header (version, rows), column names and order (hidden duplicates by index), types,
codec load names, compression, rows per block, offsets, annotations (kinds, types, values) and
every value, bit for bit; then the same values through read(sparse=True), slices, single rows,
iter_blocks, f.read() and the bytes / file-object sources.
"""
from __future__ import annotations

import io

import pytest

import dumpcheck as dc
import idv
from expected import expected_column
from reference import (SAMPLE_DIR, TESTDATA_DIR, fixture_files, load_json, skip_param,
                       regenerated_fixtures)

SAMPLE = fixture_files("sample", SAMPLE_DIR)
TESTDATA = regenerated_fixtures()
CASES = SAMPLE + TESTDATA


def _case_params():
    params = [pytest.param(c, id=c.id) for c in CASES]
    if not SAMPLE:
        params.append(skip_param(f"sample fixtures missing: {SAMPLE_DIR} (set IDV_SHARED)"))
    if not TESTDATA:
        params.append(skip_param(f"no testdata fixtures in {TESTDATA_DIR} "
                                 f"(run testdata/regenerate.py)"))
    return params


def _column_params(wanted=lambda dcol: True):
    """(case, column index) for every column of every fixture that `wanted` accepts."""
    params = []
    for c in CASES:
        if c.sidecar_path is None:
            params.append(pytest.param(c, None, id=f"{c.id}:no-sidecar"))
            continue
        for col in c.sidecar["columns"]:
            if wanted(col):
                params.append(pytest.param(c, col["index"],
                                           id=f"{c.id}:{col['index']}:{col['name']}"))
    if not params:
        params.append(pytest.param(None, None, id="missing", marks=pytest.mark.skip(
            reason=f"no fixtures: {SAMPLE_DIR} and {TESTDATA_DIR} hold no .idv files")))
    return params


def _sparse_readable(dcol):
    return dcol["is_vector"] and dcol["item_type"] in dc.SPARSE_ITEMS


def _deflated(case):
    return case.sidecar_path is not None and any(
        c["compression"] == "Deflate" for c in case.sidecar["table_of_contents"]["columns"])


# ---- the fixture sets themselves ------------------------------------------------------------

def test_sample_manifest_is_complete():
    """Every fixture the sample's manifest lists is here, with its sidecar, and is tested."""
    manifest = SAMPLE_DIR / "manifest.json"
    if not manifest.exists():
        pytest.skip(f"sample fixtures missing: {manifest} (set IDV_SHARED)")
    listed = load_json(manifest)["fixtures"]
    assert len(listed) == 29
    found = {c.name: c for c in SAMPLE}
    assert sorted(found) == sorted(f["name"] for f in listed)
    for f in listed:
        case = found[f["name"]]
        assert case.sidecar_path is not None and case.sidecar_path.name == f["expected"]
        assert f["self_check"] in ("ok", "n/a")   # n/a: pipeline outputs have no spec
        side = case.sidecar
        assert side["row_count"] == f["rows"] and len(side["columns"]) == f["columns"]
        assert case.idv_path.stat().st_size == f["bytes"]


# ---- per file -------------------------------------------------------------------------------

@pytest.mark.parametrize("case", _case_params())
def test_header(case):
    with dc.open_quietly(case.idv_path) as f:
        dc.check_header(f, case.sidecar)


@pytest.mark.parametrize("case", _case_params())
def test_schema(case):
    with dc.open_quietly(case.idv_path) as f:
        dc.check_schema(f, case.sidecar)


@pytest.mark.parametrize("case", _case_params())
def test_table_of_contents(case):
    with dc.open_quietly(case.idv_path) as f:
        dc.check_toc(f, case.sidecar)


@pytest.mark.parametrize("case", _case_params())
def test_metadata(case):
    with dc.open_quietly(case.idv_path) as f:
        dc.check_metadata(f, case.sidecar)


@pytest.mark.parametrize("case", _case_params())
def test_read_dict(case):
    with dc.open_quietly(case.idv_path) as f:
        dc.check_read_dict(f, case.sidecar)


@pytest.mark.parametrize("case", _case_params())
@pytest.mark.parametrize("source", ["bytes", "file object"])
def test_other_sources(case, source):
    """The same values from an in-memory buffer and from a seekable file object."""
    data = case.idv_path.read_bytes()
    src = data if source == "bytes" else io.BytesIO(data)
    dump = case.sidecar
    with dc.open_quietly(src) as f:
        dc.check_header(f, dump)
        for col in f.columns:
            dc.check_column_values(col, dump)


# ---- per column -----------------------------------------------------------------------------

@pytest.mark.parametrize("case,index", _column_params())
def test_values(case, index):
    assert index is not None, f"{case.idv_path} has no sidecar"
    dump = case.sidecar
    with dc.open_quietly(case.idv_path) as f:
        col = f[index]
        dc.check_column_values(col, dump)


@pytest.mark.parametrize("case,index", _column_params(_sparse_readable))
def test_sparse_read(case, index):
    """Vector columns of numbers, Booleans and keys as CSR: ML.NET's values and sparsity."""
    assert index is not None, f"{case.idv_path} has no sidecar"
    dump = case.sidecar
    with dc.open_quietly(case.idv_path) as f:
        dc.check_sparse_read(f[index], dump)


@pytest.mark.parametrize("case,index", _column_params())
def test_access_paths(case, index):
    """Slices across block boundaries, steps, single rows and iter_blocks."""
    assert index is not None, f"{case.idv_path} has no sidecar"
    dump = case.sidecar
    with dc.open_quietly(case.idv_path) as f:
        col = f[index]
        dc.check_access_paths(col, expected_column(dump, index))


@pytest.mark.parametrize("case", [p for p in _case_params()
                                  if p.values[0] is None or _deflated(p.values[0])])
@pytest.mark.parametrize("backend", ["zlib", "libdeflate", "isal"])
def test_deflate_backends(case, backend):
    """Every DEFLATE library, with more decoding threads than blocks or cores, gives ML.NET's
    values."""
    dump = case.sidecar
    try:
        f = idv.open(case.idv_path, backend=backend, threads=3)
    except ImportError as e:
        pytest.skip(f"backend {backend} not installed: {e}")
    with f:
        for col in f.columns:
            dc.check_column_values(col, dump)
