"""Work in a fresh interpreter under resource limits: an address-space limit (RLIMIT_AS), a
small stack and a wall-clock limit, reporting what was raised, how long it took and the peak
memory. Hostile files and reads too large for memory are tried this way, so that a crash, a
hang or numpy's MemoryError is a test failure, not a dead test run.

``run_limited(work, path)`` runs `work` (Python source with ``path`` in scope; it may assign
``result["..."]``) and ``read_limited(path)`` opens a file and reads everything a user would.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

MEMORY_LIMIT = 1 << 30          # RLIMIT_AS of the child: 1 GiB of address space
STACK_LIMIT = 1 << 20           # the stack the work runs on: 1 MiB
TIME_LIMIT = 60                 # seconds before the child is killed
WORK_SECONDS = 5                # what a refusal may take inside the child

_CHILD = r"""
import json, resource, sys, threading, time, warnings
path, memory, stack = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
import idv

result = {}
kept = []      # values stay alive, as in a user's f.read()

def work():
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
%s
        result["outcome"] = "ok"
    except BaseException as e:
        result["outcome"] = type(e).__name__
        result["message"] = str(e)[:4000]
    result["seconds"] = time.perf_counter() - t0

threading.stack_size(stack)      # the worker and every thread it starts
t = threading.Thread(target=work)
t.start()
t.join()
try:     # this program's peak (ru_maxrss would include the parent's, from before exec)
    with open("/proc/self/status") as status:
        hwm = next(line for line in status if line.startswith("VmHWM:"))
    result["peak_rss"] = int(hwm.split()[1]) * 1024
except OSError:
    result["peak_rss"] = None
print(json.dumps(result), flush=True)
"""

READ_EVERYTHING = """
with idv.open(path) as f:
    str(f.schema)
    for c in f.columns:
        kept.append(c.metadata)
        if c.readable:
            kept.append(c.read())
"""


def child_env():
    """The environment of a child: this checkout first on the path, one BLAS and one polars
    thread."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONIOENCODING"] = "utf-8"
    # thread pools reserve address space we want to measure: BLAS's, and polars' (under the
    # cap, polars' default pool of threads now and then gets the child killed by SIGABRT)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                "POLARS_MAX_THREADS"):
        env[var] = "1"
    env.pop("PYTHONWARNINGS", None)
    return env


def _died(returncode):
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exit code {returncode}"


def run_limited(work, path, *, memory=MEMORY_LIMIT, stack=STACK_LIMIT,
                timeout=TIME_LIMIT) -> dict:
    """Run `work` (Python source; ``path``, ``idv``, ``kept`` and ``result`` in scope) in a
    child process whose address space is limited to `memory`, on a thread with a
    `stack`-byte stack. Returns {"outcome": exception name or "ok", "message", "seconds",
    "peak_rss" (None without /proc), and what `work` put in ``result``}; a crash or a timeout
    fails the test."""
    code = _CHILD % textwrap.indent(textwrap.dedent(work).strip(), " " * 12)
    try:
        r = subprocess.run([sys.executable, "-c", code, str(path), str(memory), str(stack)],
                           capture_output=True, text=True, env=child_env(), timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no answer in {timeout} s")
    assert r.returncode == 0, f"child {_died(r.returncode)}:\n{r.stderr[-3000:]}"
    return json.loads(r.stdout.splitlines()[-1])


def read_limited(path, **limits) -> dict:
    """Open `path` and read everything (schema, metadata, every column) under run_limited's
    limits."""
    return run_limited(READ_EVERYTHING, path, **limits)


def cli_limited(args, *, memory=MEMORY_LIMIT, stack=STACK_LIMIT, timeout=TIME_LIMIT):
    """``python -m idv ARGS`` with the same limits (the stack one on the main thread);
    returns (returncode, stdout, stderr)."""
    import resource

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_STACK, (stack, stack))
    try:
        r = subprocess.run([sys.executable, "-m", "idv", *map(str, args)],
                           capture_output=True, text=True, env=child_env(), cwd=REPO,
                           timeout=timeout, preexec_fn=limits)
    except subprocess.TimeoutExpired:
        pytest.fail(f"idv {' '.join(map(str, args))}: no answer in {timeout} s")
    return r.returncode, r.stdout, r.stderr


def verify_limited(path, **limits):
    """``python -m idv verify PATH`` under cli_limited's limits."""
    return cli_limited(["verify", path], **limits)
