"""Shared test helpers: where the reference material lives, and the ML.NET oracle.

The read-only reference folder (ML.NET-written files, ML.NET's text dumps, the oracle) is
``<repo>/../shared`` unless the environment variable ``IDV_SHARED`` points elsewhere. Tests that
need a file from it, or the oracle, are skipped with the reason when it is not there; nothing is
ever copied from it into the repository.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
REPO_DIR = TESTS_DIR.parent
TESTDATA_DIR = REPO_DIR / "testdata"

# the helper modules next to this file (expected.py, dumpcheck.py) import as top-level modules
# whatever pytest's import mode is
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

ORACLE_TIMEOUT = float(os.environ.get("IDV_ORACLE_TIMEOUT", "300"))


def shared_dir() -> Path:
    """The shared reference folder: $IDV_SHARED, else <repo>/../shared (may not exist)."""
    env = os.environ.get("IDV_SHARED")
    return Path(env).expanduser().resolve() if env else (REPO_DIR.parent / "shared").resolve()


def shared_path(*parts) -> Path:
    """A path inside the shared folder; the test is skipped (with the reason) if it is missing."""
    p = shared_dir().joinpath(*parts)
    if not p.exists():
        pytest.skip(f"reference file missing: {p} (set IDV_SHARED to the shared folder)")
    return p


def skip_param(reason: str):
    """A single parameter that skips with `reason`, for parametrize lists that came out empty."""
    return pytest.param(None, marks=pytest.mark.skip(reason=reason), id="missing")


class OracleFailed(AssertionError):
    """The oracle ran but ML.NET refused the input (exit code 1)."""


class Oracle:
    """Runs ``python3 <shared>/oracle/mlnet_oracle.py`` (the real ML.NET 1.5) in a subprocess."""

    def __init__(self, script: Path, python: str = None):
        self.script = Path(script)
        self.python = python or os.environ.get("IDV_ORACLE_PYTHON", "python3")

    def run(self, *args, check=True) -> subprocess.CompletedProcess:
        proc = subprocess.run([self.python, str(self.script), *map(str, args)],
                              capture_output=True, text=True, timeout=ORACLE_TIMEOUT)
        if check and proc.returncode != 0:
            raise OracleFailed(f"mlnet_oracle.py {' '.join(map(str, args))} exited with "
                               f"{proc.returncode}:\n{proc.stderr.strip()[-4000:]}")
        return proc

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


def find_oracle():
    """(Oracle, None) when `mlnet_oracle.py info` works, else (None, reason)."""
    script = shared_dir() / "oracle" / "mlnet_oracle.py"
    if not script.exists():
        return None, f"ML.NET oracle not found: {script} (set IDV_SHARED to the shared folder)"
    oracle = Oracle(script)
    try:
        proc = oracle.run("info", check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"ML.NET oracle could not run: {e}"
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        return None, (f"ML.NET oracle unavailable (`mlnet_oracle.py info` exited with "
                      f"{proc.returncode}: {msg[-1] if msg else 'no output'}; setup: bash "
                      f"{script.parent / 'setup.sh'})")
    return oracle, None


@pytest.fixture(scope="session")
def shared() -> Path:
    d = shared_dir()
    if not d.is_dir():
        pytest.skip(f"shared reference folder missing: {d} (set IDV_SHARED)")
    return d


@pytest.fixture(scope="session")
def oracle() -> Oracle:
    """The real ML.NET, through mlnet_oracle.py; skips (with the reason) when it cannot run."""
    found, reason = find_oracle()
    if found is None:
        pytest.skip(reason)
    return found
