"""Where the reference material lives, and the ML.NET oracle that made it.

The read-only reference folder (ML.NET-written files, their JSON sidecars, ML.NET's text dumps,
model zips, the oracle) is ``<repo>/../shared`` unless the environment variable ``IDV_SHARED``
points elsewhere. A test that needs a file from it, or the oracle, is skipped with the reason
when it is not there; nothing is ever copied from it into the repository. Our own fixtures are
in ``<repo>/testdata``.

Every test finds these files through this module: ``fixture(name)`` and ``sidecar(name)`` for
the sample fixtures, ``shared_path(...)`` for anything else in the folder.
"""
from __future__ import annotations

import functools
import gzip
import json
import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from oracle_server import Server, ServerGone

TESTS_DIR = Path(__file__).resolve().parent
REPO_DIR = TESTS_DIR.parent
TESTDATA_DIR = REPO_DIR / "testdata"

ORACLE_TIMEOUT = float(os.environ.get("IDV_ORACLE_TIMEOUT", "300"))
SET_SHARED = "set IDV_SHARED to the shared folder"


def shared_dir() -> Path:
    """The shared reference folder: $IDV_SHARED, else <repo>/../shared (may not exist)."""
    env = os.environ.get("IDV_SHARED")
    return Path(env).expanduser().resolve() if env else (REPO_DIR.parent / "shared").resolve()


SAMPLE_DIR = shared_dir() / "oracle" / "fixtures-sample"    # ML.NET-written, with sidecars
MLNET_FILES_DIR = shared_dir() / "mlnet-files"               # files from ML.NET's repository
MODEL_ZIPS_DIR = MLNET_FILES_DIR / "model-zips"


def shared_path(*parts) -> Path:
    """A path inside the shared folder; the test is skipped (with the reason) if it is missing."""
    p = shared_dir().joinpath(*parts)
    if not p.exists():
        pytest.skip(f"reference file missing: {p} ({SET_SHARED})")
    return p


def skip_param(reason: str):
    """A single parameter that skips with `reason`, for parametrize lists that came out empty."""
    return pytest.param(None, marks=pytest.mark.skip(reason=reason), id="missing")


def load_json(path):
    """A JSON file of the oracle's (``.json`` or ``.json.gz``)."""
    path = str(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


# ---- the sample fixtures and their sidecars --------------------------------------------------

def sample_names() -> list:
    """The names (stems) of the sample fixtures, sorted; [] without the shared folder."""
    return sorted(p.stem for p in SAMPLE_DIR.glob("*.idv")) if SAMPLE_DIR.is_dir() else []


def sample_params(wanted=lambda name: True) -> list:
    """The sample fixture names `wanted` accepts, as parameters with their names as ids (one
    skipping parameter when there are none)."""
    params = [pytest.param(n, id=n) for n in sample_names() if wanted(n)]
    return params or [skip_param(f"sample fixtures missing: {SAMPLE_DIR} ({SET_SHARED})")]


def fixture(name: str) -> Path:
    """The sample fixture `name` (no suffix); skips the test when it is missing."""
    path = SAMPLE_DIR / f"{name}.idv"
    if not path.exists():
        pytest.skip(f"sample fixture missing: {path} ({SET_SHARED})")
    return path


def sidecar_path(idv_path):
    """The sidecar (``.json`` or ``.json.gz``) next to an .idv file, or None."""
    idv_path = Path(idv_path)
    for suffix in (".json", ".json.gz"):
        p = idv_path.with_suffix(suffix)
        if p.exists():
            return p
    return None


def sidecar(source) -> dict:
    """What ML.NET read from a fixture: a sample fixture's name (skips when it is missing), or
    the path of any .idv that has a sidecar. Loaded once; treat it as read-only."""
    path = fixture(source) if isinstance(source, str) else Path(source)
    found = sidecar_path(path)
    assert found is not None, f"{path} has no .json/.json.gz sidecar"
    return _load_cached(found)


@functools.lru_cache(maxsize=None)
def _load_cached(path):
    return load_json(path)


class FixtureFile:
    """An .idv fixture with the sidecar of what ML.NET read from it, named ``group/name`` in
    test ids."""

    def __init__(self, group, idv_path, sidecar=None):
        self.group = group
        self.idv_path = Path(idv_path)
        self.name = self.idv_path.stem
        self.sidecar_path = Path(sidecar) if sidecar else sidecar_path(self.idv_path)

    @property
    def id(self):
        return f"{self.group}/{self.name}"

    @property
    def sidecar(self) -> dict:
        assert self.sidecar_path is not None, f"{self.idv_path} has no .json/.json.gz sidecar"
        return _load_cached(self.sidecar_path)

    def __repr__(self):
        return self.id


def fixture_files(group, folder) -> list:
    """A FixtureFile for every .idv in `folder` (sorted); [] when the folder is missing."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return [FixtureFile(group, p) for p in sorted(folder.glob("*.idv"))]


def regenerated_fixtures() -> list:
    """A FixtureFile for every fixture in testdata/manifest.json, including the sample bundled
    with the package (its .idv is idv/data/sample.idv, its sidecar in testdata/)."""
    manifest = TESTDATA_DIR / "manifest.json"
    if not manifest.exists():
        return []
    return [FixtureFile("testdata", (TESTDATA_DIR / e["idv"]).resolve(),
                        TESTDATA_DIR / e["sidecar"]) for e in load_json(manifest).values()]


def model_zip_entries() -> list:
    """(zip file name, entry name) of every .idv entry of the model zips; [] without them."""
    if not MODEL_ZIPS_DIR.is_dir():
        return []
    out = []
    for zp in sorted(MODEL_ZIPS_DIR.glob("*.zip")):
        with zipfile.ZipFile(zp) as z:
            out += [(zp.name, n) for n in z.namelist() if n.lower().endswith(".idv")]
    return out


# ---- the ML.NET oracle -----------------------------------------------------------------------

class OracleFailed(AssertionError):
    """The oracle ran but ML.NET refused the input (exit code 1)."""


class Oracle:
    """Runs ``python3 <shared>/oracle/mlnet_oracle.py`` (the real ML.NET 1.5): each call is the
    script's ``main`` run in one long-lived process of the test session (oracle_server.py),
    which keeps .NET and ML.NET loaded; a call that finds that process dead is run as its own
    ``python3 mlnet_oracle.py ARGS``."""

    def __init__(self, script: Path, python: str = None):
        self.script = Path(script)
        self.python = python or os.environ.get("IDV_ORACLE_PYTHON", "python3")
        self.server = Server(self.python, self.script, ORACLE_TIMEOUT)

    def run(self, *args, check=True) -> subprocess.CompletedProcess:
        args = [str(a) for a in args]
        try:
            rc, out, err = self.server.call(args)
            proc = subprocess.CompletedProcess([self.python, str(self.script), *args], rc, out,
                                               err)
        except ServerGone:
            proc = subprocess.run([self.python, str(self.script), *args],
                                  capture_output=True, text=True, timeout=ORACLE_TIMEOUT)
        if check and proc.returncode != 0:
            raise OracleFailed(f"mlnet_oracle.py {' '.join(args)} exited with "
                               f"{proc.returncode}:\n{proc.stderr.strip()[-4000:]}")
        return proc

    def close(self):
        """End the long-lived process (the next call starts another)."""
        self.server.close()

    def info(self) -> dict:
        return json.loads(self.run("info").stdout)

    def dump(self, path, *options) -> dict:
        """ML.NET's view of one .idv file (schema, annotations, every value, TOC)."""
        return json.loads(self.run("dump", path, *options).stdout)

    def dump_many(self, paths, *options) -> dict:
        """{path: dump | {"error": message}} for several files in one ML.NET process."""
        paths = [str(p) for p in paths]
        if len(paths) == 1:
            proc = self.run("dump", paths[0], *options, check=False)
            if proc.returncode == 0:
                return {paths[0]: json.loads(proc.stdout)}
            return {paths[0]: {"error": proc.stderr.strip()}}
        proc = self.run("dump", *paths, *options, check=False)
        if proc.returncode not in (0, 1):
            raise OracleFailed(f"mlnet_oracle.py dump exited with {proc.returncode}:\n"
                               f"{proc.stderr.strip()[-4000:]}")
        return json.loads(proc.stdout)["files"]

    def write_spec(self, spec_path, out_path, sidecar=None, options=()) -> dict:
        args = ["write-spec", spec_path, out_path, *options]
        if sidecar is not None:
            args += ["--sidecar", sidecar]
        return json.loads(self.run(*args).stdout)


@functools.lru_cache(maxsize=None)
def find_oracle():
    """(Oracle, None) when `mlnet_oracle.py info` works, else (None, reason); found once per
    session, so every test shares its Oracle (and its process)."""
    script = shared_dir() / "oracle" / "mlnet_oracle.py"
    if not script.exists():
        return None, f"ML.NET oracle not found: {script} ({SET_SHARED})"
    oracle = Oracle(script)
    try:
        proc = oracle.run("info", check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"ML.NET oracle could not run: {e}"
    if proc.returncode != 0:
        oracle.close()
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        return None, (f"ML.NET oracle unavailable (`mlnet_oracle.py info` exited with "
                      f"{proc.returncode}: {msg[-1] if msg else 'no output'}; setup: bash "
                      f"{script.parent / 'setup.sh'})")
    return oracle, None
