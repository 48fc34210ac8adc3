#!/usr/bin/env python3
"""A fuzzing session that accumulates: fuzz one harness from its kept corpus
(``fuzz/corpus/NAME``, in git) and the seeds, into a scratch folder, then merge what the
session found back into the kept corpus with libFuzzer's ``-merge=1`` (only the inputs that add
coverage are added, named by the SHA-1 of their bytes), so that the next session, on any
machine, starts where this one stopped.

    nice -n 19 python fuzz/run.py read --runs 100000 --seconds 3600
    nice -n 19 python fuzz/run.py archive --asan /tmp/idv-asan --seconds 600   # fuzz/asan.sh
    python fuzz/run.py remote --minimize      # merge the kept corpus into an empty folder

Findings (``crash-*``, ``oom-*``, ``timeout-*``) stay in the scratch folder (``--work``, a new
temporary folder by default), which is printed with the executions counted; the exit status is
1 when there is a finding. One process at a time: no ``-jobs``/``-workers``.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
HARNESSES = ("read", "remote", "archive")
LIMITS = ["-rss_limit_mb=3072", "-timeout=30"]
FINDINGS = ("crash-", "leak-", "oom-", "timeout-")


def corpus(name: str) -> Path:
    """The kept corpus of harness `name`."""
    return FUZZ / "corpus" / name


def command(name: str, asan: str | None) -> list:
    """How to start harness `name`: its path first, as libFuzzer's -merge starts it again by
    argv[0] (the script is executable, run by the `python3` first on PATH), under fuzz/asan.sh
    when `asan` names its build folder."""
    script = str(FUZZ / f"fuzz_{name}.py")
    return [str(FUZZ / "asan.sh"), asan, script] if asan else [sys.executable, script]


def run(cmd: list, cwd: Path, log: Path) -> int:
    """Run `cmd` in `cwd` with this Python's folder first on PATH, its output into `log`."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}"
               f"{os.environ.get('PATH', '')}")
    with open(log, "w") as out:
        return subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                              check=False).returncode


def executions(log: Path) -> int:
    """The executions a libFuzzer session reports (-print_final_stats=1)."""
    found = re.findall(r"^stat::number_of_executed_units:\s*(\d+)", log.read_text(
        errors="replace"), re.M)
    return int(found[-1]) if found else 0


def merge(base: list, into: Path, sources: list, work: Path) -> None:
    """libFuzzer's -merge=1 of `sources` into `into`: the inputs that add coverage."""
    into.mkdir(parents=True, exist_ok=True)
    rc = run(base + ["-merge=1", *LIMITS, str(into), *map(str, sources)], work,
             work / "merge.log")
    if rc:
        sys.exit(f"the merge failed ({rc}): see {work / 'merge.log'}")


def session(args) -> int:
    kept = Path(args.corpus) if args.corpus else corpus(args.harness)
    work = Path(args.work or tempfile.mkdtemp(prefix=f"idv-fuzz-{args.harness}-"))
    seeds, new = work / "seeds", work / "new"
    new.mkdir(parents=True, exist_ok=True)
    kept.mkdir(parents=True, exist_ok=True)
    base = command(args.harness, args.asan)
    subprocess.run([sys.executable, base[-1], "--seeds", str(seeds)], check=True,
                   stdout=subprocess.DEVNULL)
    before = len(list(kept.iterdir()))
    ran = 0
    if not args.minimize:
        run(base + [str(new), str(kept), str(seeds), f"-runs={args.runs}",
                    f"-max_total_time={args.seconds}", *LIMITS, "-print_final_stats=1"],
            work, work / "fuzz.log")
        ran = executions(work / "fuzz.log")
        merge(base, kept, [new, seeds], work)
    else:
        fresh = work / "minimized"
        merge(base, fresh, [kept, seeds], work)
        shutil.rmtree(kept)
        shutil.copytree(fresh, kept)
    files = list(kept.iterdir())
    findings = sorted(p.name for p in work.iterdir() if p.name.startswith(FINDINGS))
    print(f"{args.harness}: {ran} executions{' under ASan' if args.asan else ''}; {kept}: "
          f"{before} -> {len(files)} files, {sum(f.stat().st_size for f in files)} bytes; "
          f"findings: {', '.join(findings) or 'none'}; logs in {work}")
    return 1 if findings else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("harness", choices=HARNESSES)
    p.add_argument("--runs", type=int, default=-1, help="executions (-1: until --seconds)")
    p.add_argument("--seconds", type=int, default=600, help="the session's wall-clock cap")
    p.add_argument("--asan", metavar="DIR", help="run under fuzz/asan.sh with DIR's build")
    p.add_argument("--work", help="the scratch folder (default: a new temporary one)")
    p.add_argument("--corpus", help="the corpus to grow (default: fuzz/corpus/HARNESS)")
    p.add_argument("--minimize", action="store_true",
                   help="no fuzzing: merge the kept corpus and the seeds into an empty folder "
                        "and keep that")
    return session(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
