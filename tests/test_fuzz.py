"""A short, bounded coverage-guided fuzzing session over the read path and verify
(fuzz/fuzz_read.py, atheris). CI runs a few thousand executions from the seed corpus; a longer
run: ``IDV_FUZZ_RUNS=1000000 pytest tests/test_fuzz.py`` (docs/development.md, "Fuzzing")."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HARNESS = REPO / "fuzz" / "fuzz_read.py"
RUNS = int(os.environ.get("IDV_FUZZ_RUNS", "3000"))
# wall-clock cap of the CI session, whatever the runs: a slow machine runs fewer
MAX_SECONDS = int(os.environ.get("IDV_FUZZ_SECONDS", "60"))


def _harness(*args, cwd):
    return subprocess.run([sys.executable, str(HARNESS), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=MAX_SECONDS + 300)


def test_seed_corpus_is_written(tmp_path):
    r = _harness("--seeds", tmp_path / "corpus", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    seeds = sorted(p.name for p in (tmp_path / "corpus").iterdir())
    assert "sample.idv" in seeds and "written_deflate.idv" in seeds and "written_none.idv" in seeds
    assert len(seeds) >= 8


def test_fuzz_session_finds_nothing(tmp_path):
    pytest.importorskip("atheris", reason="atheris (test extra, Linux) is not installed")
    corpus = tmp_path / "corpus"
    assert _harness("--seeds", corpus, cwd=tmp_path).returncode == 0
    r = _harness(corpus, f"-runs={RUNS}", f"-max_total_time={MAX_SECONDS}",
                 "-rss_limit_mb=3072", "-timeout=30", "-print_final_stats=1", cwd=tmp_path)
    findings = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(
        ("crash-", "leak-", "timeout-", "oom-")))
    assert r.returncode == 0 and not findings, (findings, r.stderr[-4000:])
    executed = [line for line in r.stderr.splitlines()
                if line.startswith("stat::number_of_executed_units:")]
    assert executed and int(executed[0].split(":")[-1]) > 100, r.stderr[-2000:]


def test_replay_runs_every_seed_without_libfuzzer(tmp_path):
    corpus = tmp_path / "corpus"
    assert _harness("--seeds", corpus, cwd=tmp_path).returncode == 0
    r = _harness("--replay", corpus, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-4000:]
    n = len(list(corpus.iterdir()))
    assert f"{n} inputs replayed, nothing found" in r.stdout
