"""One long-lived ML.NET oracle for a whole test session: ``mlnet_oracle.py``'s own ``main``,
called once per request in a child process that keeps its .NET runtime and ML.NET loaded.

``python oracle_server.py SCRIPT`` loads SCRIPT (the oracle's entry point, untouched) as a module
and then answers requests, one JSON line each on its standard input,
``{"args": [...]}``, with one JSON line ``{"rc": ..., "stdout": ..., "stderr": ...}``: what
``python3 SCRIPT ARGS`` would have exited with and printed. Anything the runtime writes to the
process's own file descriptors 1 and 2 during a request is added to that request's stderr, so
the replies' channel carries nothing else.

``Server`` is the tests' side (reference.Oracle uses it): it starts the child on the first
request, and a request that finds the child dead or past its time limit ends the child (the next
one starts another) and raises ``ServerGone``, which Oracle answers with a one-off process.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import select
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.abspath(__file__)


class ServerGone(Exception):
    """The oracle process died or did not answer in time (it has been ended)."""


class Server:
    """The client of one ``oracle_server.py`` child process."""

    def __init__(self, python, script, timeout):
        self.python, self.script, self.timeout = python, str(script), timeout
        self.proc = None
        self._buffer = b""

    def _start(self):
        self.proc = subprocess.Popen([self.python, HERE, self.script], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._buffer = b""

    def call(self, args) -> tuple:
        """(returncode, stdout, stderr) of the oracle run with `args`."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            self.proc.stdin.write(json.dumps({"args": [str(a) for a in args]}).encode() + b"\n")
            self.proc.stdin.flush()
            reply = json.loads(self._read_line())
        except (OSError, ValueError, ServerGone) as e:
            self.close()
            raise ServerGone(f"the oracle process is gone: {e}") from e
        return reply["rc"], reply["stdout"], reply["stderr"]

    def _read_line(self) -> bytes:
        fd = self.proc.stdout.fileno()
        chunks = [self._buffer]
        while b"\n" not in chunks[-1]:        # a pipe gives 64 KiB at a time: no re-joining
            ready, _, _ = select.select([fd], [], [], self.timeout)
            if not ready:
                raise ServerGone(f"no answer in {self.timeout} s")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise ServerGone("it exited")
            chunks.append(chunk)
        line, _, self._buffer = b"".join(chunks).partition(b"\n")
        return line

    def close(self):
        """End the child (it leaves when its standard input closes)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


# ---- the child's side -------------------------------------------------------------------------

def _load(script):
    import importlib.util
    spec = importlib.util.spec_from_file_location("mlnet_oracle", script)
    module = importlib.util.module_from_spec(spec)
    sys.modules["mlnet_oracle"] = module
    spec.loader.exec_module(module)
    return module


def _answer(oracle, args, native) -> dict:
    """Run the oracle's main(args) as its script would, capturing what it prints."""
    out, err = io.StringIO(), io.StringIO()
    native.seek(0)
    native.truncate()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = oracle.main(args)
        except SystemExit as e:       # argparse's usage errors and --help
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if e.code is not None and not isinstance(e.code, int):
                print(e.code, file=sys.stderr)
        except BaseException:        # what would have ended the script with a traceback
            traceback.print_exc()
            rc = 1
        sys.stdout.flush()
        sys.stderr.flush()
    native.seek(0)
    extra = native.read().decode("utf-8", "replace")
    return {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue() + extra}


def serve(script) -> None:
    replies = os.fdopen(os.dup(1), "w", encoding="ascii")
    # the runtime's own writes to fd 1 and 2 go to a file read back into each reply's stderr
    native = tempfile.TemporaryFile()
    os.dup2(native.fileno(), 1)
    os.dup2(native.fileno(), 2)
    sys.argv = [script]          # the oracle's usage lines name it, not this file
    oracle = _load(script)
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = _answer(oracle, json.loads(line)["args"], native)
        replies.write(json.dumps(reply, ensure_ascii=True) + "\n")
        replies.flush()
    # leave as the script does: without the runtime's shutdown
    os._exit(0)


if __name__ == "__main__":
    serve(sys.argv[1])
