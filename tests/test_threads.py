"""idv's thread pools and the interpreter's exit (idv._resources.threads)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_exit_wakes_a_pool_thread_whose_start_was_interrupted():
    """A Ctrl-C landing while a pool starts a thread leaves that thread running but unknown
    to concurrent.futures' exit hook, which would wait for it forever (an `idv convert`
    interrupted early could hang so). Made here by forgetting the thread as the interrupt
    does: the process still exits at once."""
    code = textwrap.dedent("""
        import time
        from concurrent.futures import thread
        from idv._resources import threads
        threads.pool("exit-test", 2).submit(time.sleep, 0.01).result()
        for t in list(thread._threads_queues):
            del thread._threads_queues[t]
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr[-2000:]
