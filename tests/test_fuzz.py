"""Short, bounded coverage-guided fuzzing sessions (atheris) of each harness in fuzz/: the
read path and verify (fuzz_read.py), remote reads from a lying Range server against local
ones (fuzz_remote.py), zip archives and their specs (fuzz_archive.py); and a replay of each
seed corpus with the corpus kept in git (fuzz/corpus/NAME, grown by fuzz/run.py). Each harness
writes its seed corpus once (one process) and replays it with a sample of its kept corpus (one
process): IDV_FUZZ_REPLAY inputs (40) spread over it, a different sample each day, so that
daily runs replay every kept input within ceil(N / 40) days (N kept inputs: 8 and 9 days for
read and remote today); IDV_FUZZ_REPLAY=0 replays them all.
The read and remote harnesses fuzz from a copy of the seeds within a fixed budget:
IDV_FUZZ_RUNS executions (100), at most IDV_FUZZ_SECONDS seconds (5); the archive harness's
session is fuzz/run.py's, which then merges what it found into an empty corpus. Most of a
session's time is atheris instrumenting idv's modules at import (about 5 s on 2 cores). A
longer run: ``IDV_FUZZ_RUNS=1000000 IDV_FUZZ_SECONDS=7200 IDV_FUZZ_REPLAY=0 pytest
tests/test_fuzz.py`` (docs/development.md, "Fuzzing")."""
from __future__ import annotations

import datetime
import hashlib
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("IDV_FUZZ_RUNS", "100"))
# wall-clock cap of each session, whatever the runs: a slow machine runs fewer
MAX_SECONDS = int(os.environ.get("IDV_FUZZ_SECONDS", "5"))
HARNESSES = ["fuzz_read", "fuzz_remote", "fuzz_archive"]
# kept inputs replayed by default, of each harness (about 40 ms each, some half a second)
REPLAYED = int(os.environ.get("IDV_FUZZ_REPLAY", "40"))
KEPT = REPO / "fuzz" / "corpus"         # NAME: the harness fuzz_NAME.py's kept corpus
MAX_KEPT_BYTES, MAX_KEPT_FILES = 2 << 20, 500     # per harness: the replay stays quick
SEEDS = {"fuzz_read": ["sample.idv", "written_deflate.idv", "written_none.idv"],
         "fuzz_remote": ["None-sample.idv", "shift-written_none.idv", "503-written_none.idv",
                         "etag-written_deflate.idv"],
         "fuzz_archive": ["names.zip", "stored.zip", "huge.zip"]}


@pytest.fixture(scope="module", params=HARNESSES)
def harness(request):
    if request.param == "fuzz_remote":
        pytest.importorskip("aiohttp", reason="remote reads need the remote extra (aiohttp)")
    return REPO / "fuzz" / f"{request.param}.py"


@pytest.fixture(scope="module")
def seeded(harness, tmp_path_factory):
    """(the harness's run of --seeds, the corpus it wrote): once per harness."""
    folder = tmp_path_factory.mktemp(harness.stem)
    r = _run(harness, "--seeds", folder / "corpus", cwd=folder)
    return r, folder / "corpus"


def _run(harness, *args, cwd):
    return subprocess.run([sys.executable, str(harness), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=MAX_SECONDS + 300)


def test_seed_corpus_is_written(harness, seeded):
    r, corpus = seeded
    assert r.returncode == 0, r.stderr
    seeds = {p.name for p in corpus.iterdir()}
    assert set(SEEDS[harness.stem]) <= seeds, sorted(seeds)
    assert f"{len(seeds)} seeds in {corpus}" in r.stdout


def _kept(harness) -> Path:
    return KEPT / harness.stem.removeprefix("fuzz_")


def test_kept_corpus_is_small_and_named_by_content(harness):
    files = list(_kept(harness).iterdir())
    assert files, f"{_kept(harness)} is empty"
    assert len(files) <= MAX_KEPT_FILES, "python fuzz/run.py NAME --minimize"
    assert sum(f.stat().st_size for f in files) <= MAX_KEPT_BYTES, "too large to replay quickly"
    for f in files:       # as libFuzzer's -merge names them: a file changed by hand is stale
        assert f.name == hashlib.sha1(f.read_bytes()).hexdigest(), f


def _replayed(harness) -> list:
    """REPLAYED of the kept corpus's inputs, evenly spaced in the order of their names (a
    hash: a sample), from an offset that moves each day; every input when REPLAYED is 0."""
    files = sorted(_kept(harness).iterdir())
    if REPLAYED <= 0 or len(files) <= REPLAYED:
        return files
    step = len(files) / REPLAYED            # the offsets 0 .. ceil(step) - 1 cover them all
    start = datetime.date.today().toordinal() % math.ceil(step)
    return [files[start + int(i * step)] for i in range(REPLAYED)]


def test_replay_runs_every_seed_without_libfuzzer(harness, seeded, tmp_path):
    corpus = seeded[1]
    assert seeded[0].returncode == 0
    kept = _replayed(harness)
    r = _run(harness, "--replay", corpus, *kept, cwd=tmp_path)
    assert r.returncode == 0, (r.stdout[-1000:], r.stderr[-4000:])   # the input: its last line
    n = len(list(corpus.iterdir())) + len(kept)
    assert f"{n} inputs replayed, nothing found" in r.stdout


@pytest.mark.parametrize("harness", ["fuzz_read", "fuzz_remote"], indirect=True)
def test_fuzz_session_finds_nothing(harness, seeded, tmp_path):
    """The archive harness's session is fuzz/run.py's (the next test)."""
    pytest.importorskip("atheris", reason="atheris (test extra, Linux) is not installed")
    assert seeded[0].returncode == 0
    corpus = tmp_path / "corpus"            # libFuzzer adds to it: a copy of the seeds
    shutil.copytree(seeded[1], corpus)
    n = len(list(corpus.iterdir()))
    r = _run(harness, corpus, f"-runs={RUNS}", f"-max_total_time={MAX_SECONDS}",
             "-rss_limit_mb=3072", "-timeout=30", "-print_final_stats=1", cwd=tmp_path)
    findings = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(
        ("crash-", "leak-", "timeout-", "oom-")))
    assert r.returncode == 0 and not findings, (findings, r.stderr[-4000:])
    executed = [line for line in r.stderr.splitlines()
                if line.startswith("stat::number_of_executed_units:")]
    assert executed and int(executed[0].split(":")[-1]) > n, r.stderr[-2000:]


def test_session_merges_what_it_found_into_the_corpus(tmp_path):
    """fuzz/run.py: a short session of the archive harness (the fewest seeds) from an empty
    corpus finds nothing and leaves there the inputs libFuzzer's -merge keeps, named by their
    SHA-1."""
    pytest.importorskip("atheris", reason="atheris (test extra, Linux) is not installed")
    kept, work = tmp_path / "corpus", tmp_path / "work"
    r = subprocess.run([sys.executable, str(REPO / "fuzz" / "run.py"), "archive",
                        f"--runs={RUNS}", f"--seconds={MAX_SECONDS}", "--corpus", str(kept),
                        "--work", str(work)],
                       capture_output=True, text=True, timeout=MAX_SECONDS + 300)
    assert r.returncode == 0, (r.stdout, r.stderr[-4000:])
    files = list(kept.iterdir())
    assert files and all(f.name == hashlib.sha1(f.read_bytes()).hexdigest() for f in files)
    ran = int(r.stdout.split(" executions")[0].split()[-1])
    assert ran > len(list((work / "seeds").iterdir())), r.stdout   # beyond the seeds
    assert f"0 -> {len(files)} files" in r.stdout, r.stdout
    assert "findings: none" in r.stdout


# A finding of fuzz_remote.py, fixed: a server that ignores Range (RangeNotSupportedError) and
# then answers 416 to the HEAD and GET of fs.info, which asked the file's size outside the
# translation of errors: fsspec's FileNotFoundError came out (the file exists) instead of
# idv.RemoteError naming the URL. The input: 4 lies, no-range (the HEAD), no-range (the first
# GET of a range), 416, 416 (fs.info's HEAD and GET), and an empty file; it is in the kept
# corpus too.
REMOTE_FINDING = bytes([4, 7, 7, 8, 8])


def test_remote_finding_is_fixed(tmp_path):
    pytest.importorskip("aiohttp", reason="remote reads need the remote extra (aiohttp)")
    finding = tmp_path / "finding"
    finding.write_bytes(REMOTE_FINDING)
    r = _run(REPO / "fuzz" / "fuzz_remote.py", "--replay", finding, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-4000:]
