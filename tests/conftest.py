"""pytest fixtures shared by the test files: the reference folder and the ML.NET oracle.

Plain helper functions live in importable modules next to this file (tests/README.md lists
them); this file only makes them importable and holds the fixtures.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent

# the helper modules next to this file (reference.py, expected.py, ...) import as top-level
# modules whatever pytest's import mode is
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from reference import Oracle, find_oracle, shared_dir  # noqa: E402

# the .NET runtime of every ML.NET oracle the tests and benchmarks start makes no diagnostic
# pipes (it leaves two files in /tmp for each process otherwise)
os.environ.setdefault("COMPlus_EnableDiagnostics", "0")


@pytest.fixture(scope="session")
def shared() -> Path:
    """The shared reference folder; skips when it is missing."""
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
