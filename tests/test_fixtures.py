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

import functools
import io
from pathlib import Path

import pytest

import dumpcheck as dc
import idv
from conftest import TESTDATA_DIR, shared_dir, skip_param
from expected import load_json

SAMPLE_DIR = shared_dir() / "oracle" / "fixtures-sample"


class Case:
    def __init__(self, group, name, idv_path, sidecar_path):
        self.group = group
        self.name = name
        self.idv_path = Path(idv_path)
        self.sidecar_path = sidecar_path

    @property
    def id(self):
        return f"{self.group}/{self.name}"

    def __repr__(self):
        return self.id


def _sidecar_of(idv_path):
    for suffix in (".json", ".json.gz"):
        p = idv_path.with_suffix(suffix)
        if p.exists():
            return p
    return None


def _find(group, folder):
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return [Case(group, p.stem, p, _sidecar_of(p)) for p in sorted(folder.glob("*.idv"))]


SAMPLE = _find("sample", SAMPLE_DIR)
TESTDATA = _find("testdata", TESTDATA_DIR)
CASES = SAMPLE + TESTDATA


@functools.lru_cache(maxsize=None)
def sidecar(case):
    assert case.sidecar_path is not None, f"{case.idv_path} has no .json/.json.gz sidecar"
    return load_json(case.sidecar_path)


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
        for col in sidecar(c)["columns"]:
            if wanted(col):
                params.append(pytest.param(c, col["index"],
                                           id=f"{c.id}:{col['index']}:{col['name']}"))
    if not params:
        params.append(pytest.param(None, None, id="missing", marks=pytest.mark.skip(
            reason=f"no fixtures: {SAMPLE_DIR} and {TESTDATA_DIR} hold no .idv files")))
    return params


def _sparse_readable(dcol):
    return dcol["is_vector"] and dcol["item_type"] in dc.SPARSE_ITEMS


def _open(case):
    return dc.open_quietly(case.idv_path)


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
        side = sidecar(case)
        assert side["row_count"] == f["rows"] and len(side["columns"]) == f["columns"]
        assert case.idv_path.stat().st_size == f["bytes"]


# ---- per file -------------------------------------------------------------------------------

@pytest.mark.parametrize("case", _case_params())
def test_header(case):
    with _open(case) as f:
        dc.check_header(f, sidecar(case))


@pytest.mark.parametrize("case", _case_params())
def test_schema(case):
    with _open(case) as f:
        dc.check_schema(f, sidecar(case))


@pytest.mark.parametrize("case", _case_params())
def test_table_of_contents(case):
    with _open(case) as f:
        dc.check_toc(f, sidecar(case))


@pytest.mark.parametrize("case", _case_params())
def test_metadata(case):
    with _open(case) as f:
        dc.check_metadata(f, sidecar(case))


@pytest.mark.parametrize("case", _case_params())
def test_read_dict(case):
    with _open(case) as f:
        dc.check_read_dict(f, sidecar(case))


@pytest.mark.parametrize("case", _case_params())
@pytest.mark.parametrize("source", ["bytes", "file object"])
def test_other_sources(case, source):
    """The same values from an in-memory buffer and from a seekable file object."""
    data = case.idv_path.read_bytes()
    src = data if source == "bytes" else io.BytesIO(data)
    dump = sidecar(case)
    with dc.open_quietly(src) as f:
        dc.check_header(f, dump)
        for col in f.columns:
            dc.check_column_values(col, dump)


# ---- per column -----------------------------------------------------------------------------

@pytest.mark.parametrize("case,index", _column_params())
def test_values(case, index):
    assert index is not None, f"{case.idv_path} has no sidecar"
    dump = sidecar(case)
    with _open(case) as f:
        col = f[index]
        dc.check_column_values(col, dump)


@pytest.mark.parametrize("case,index", _column_params(_sparse_readable))
def test_sparse_read(case, index):
    """Vector columns of numbers, Booleans and keys as CSR: ML.NET's values and sparsity."""
    assert index is not None, f"{case.idv_path} has no sidecar"
    dump = sidecar(case)
    with _open(case) as f:
        dc.check_sparse_read(f[index], dump)


@pytest.mark.parametrize("case,index", _column_params())
def test_access_paths(case, index):
    """Slices across block boundaries, steps, single rows and iter_blocks."""
    assert index is not None, f"{case.idv_path} has no sidecar"
    dump = sidecar(case)
    with _open(case) as f:
        col = f[index]
        dc.check_access_paths(col, dc.expected_column(dump, index))


def _deflated(case):
    return case.sidecar_path is not None and any(
        c["compression"] == "Deflate" for c in sidecar(case)["table_of_contents"]["columns"])


@pytest.mark.parametrize("case", [p for p in _case_params()
                                  if p.values[0] is None or _deflated(p.values[0])])
@pytest.mark.parametrize("backend", ["zlib", "libdeflate", "isal"])
def test_deflate_backends(case, backend):
    """Every DEFLATE library, with more decoding threads than blocks or cores, gives ML.NET's
    values."""
    dump = sidecar(case)
    try:
        f = idv.open(case.idv_path, backend=backend, threads=3)
    except ImportError as e:
        pytest.skip(f"backend {backend} not installed: {e}")
    with f:
        for col in f.columns:
            dc.check_column_values(col, dump)
