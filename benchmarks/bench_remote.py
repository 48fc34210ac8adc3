#!/usr/bin/env python3
"""Remote read benchmark: one column of an ML.NET-written file over loopback HTTP vs locally.

    python3 benchmarks/bench_remote.py            # the 2M x 11 numeric file of bench_read.py
    python3 benchmarks/bench_remote.py --quick    # its 100,000-row version, one run
    python3 benchmarks/bench_remote.py --json

The file is bench_read.py's (written by ML.NET through the oracle, kept in benchmarks/_data/).
It is served by tests/http_server.py's server (a Python http.server with Range support on
127.0.0.1, counting the body bytes it sends), run in a process of its own; idv reads it through
fsspec's HTTP (aiohttp).

Figures, per column: the bytes the server sent for ``idv.open(url)`` plus ``f[col].read()``,
over the column's bytes on disk (the goal: at most 1.1; the open's header, tables and tail
guess are in the numerator), and the read's requests. Then, for the largest column and for the
whole file, the time of open + read over HTTP against the same from the local path (memory
map), best of ``--repeat``, runs interleaved. Last, every column over HTTP from a server that
answers each request after 30 ms: a stream of batches (``iter_batches``) against ``to_arrow``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import idv  # noqa: E402
from bench_read import ensure_data, options, race, runs_and_log  # noqa: E402

SERVER = os.path.join(ROOT, "tests", "http_server.py")

GOAL = 1.1
DELAY = 0.03        # seconds a request, for the stream (object storage from a nearby region)


def main(argv=None):
    a = options(__doc__.split("\n")[0], "100,000 rows, one run").parse_args(argv)
    repeat, log = runs_and_log(a, 7)
    path = ensure_data(a.quick, log)["numeric_deflate"]
    with open(path, "rb") as fh:
        data = fh.read()
    with idv.open(path) as f:
        names = f.column_names
        rows = f.num_rows
        disk = {c: f[c].nbytes_disk for c in names}
        local = {c: f[c].read() for c in names}
        frame = 256 + f.header.tail_offset + 8 - f.header.toc_offset + \
            sum(16 * c.num_blocks for c in f.columns)
    columns = []
    with Server(path) as srv:
        url = srv.url
        for c in names:
            srv.stats(reset=True)
            with idv.open(url) as f:
                opened = srv.stats()
                values = f[c].read()
            done = srv.stats()
            if not np.array_equal(values, local[c]):
                sys.exit(f"bench_remote: column {c} read over HTTP differs from the local read")
            total = done["bytes_served"]
            columns.append({"column": c, "disk_bytes": disk[c],
                            "open_bytes": opened["bytes_served"],
                            "open_requests": opened["requests"] + opened["heads"],
                            "read_bytes": total - opened["bytes_served"],
                            "read_requests": done["requests"] - opened["requests"],
                            "ratio": total / disk[c],
                            "ratio_beyond_tables": (total - frame) / disk[c]})

        big = max(names, key=disk.get)

        def one(source):
            def run():
                with idv.open(source) as f:
                    f[big].read()
            return run

        def whole(source):
            def run():
                with idv.open(source) as f:
                    f.read()
            return run
        t_col = race({"http": one(url), "local": one(path)}, repeat)
        t_all = race({"http": whole(url), "local": whole(path)}, repeat)
    stream = stream_and_whole(path, repeat)
    worst = max(columns, key=lambda r: r["ratio"])
    worst_beyond = max(r["ratio_beyond_tables"] for r in columns)
    report = {
        "quick": a.quick, "file": os.path.basename(path), "file_bytes": len(data),
        "rows": rows, "frame_bytes": frame, "columns": columns,
        "worst_ratio": worst["ratio"], "worst_column": worst["column"], "goal": GOAL,
        "worst_ratio_beyond_tables": worst_beyond,
        "timed_column": big, "column_http_s": t_col["http"], "column_local_s": t_col["local"],
        "file_http_s": t_all["http"], "file_local_s": t_all["local"], "repeat": repeat,
        **stream,
    }
    if a.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{report['file']}: {report['rows']} rows, {len(data) / 1e6:.1f} MB, served over "
          f"loopback HTTP; header + TOC + lookup tables: {frame:,} bytes")
    print(f"{'column':<10} {'on disk':>11} {'open':>8} {'read':>11} {'requests':>9} "
          f"{'bytes / disk':>12} {'(- tables)':>10}")
    for r in columns:
        print(f"{r['column']:<10} {r['disk_bytes']:>11,} {r['open_bytes']:>8,} "
              f"{r['read_bytes']:>11,} {r['open_requests'] + r['read_requests']:>9} "
              f"{r['ratio']:>12.4f} {r['ratio_beyond_tables']:>10.4f}")
    print(f"worst bytes / disk: {worst['ratio']:.4f} ({worst['column']}); without the header, "
          f"TOC and lookup tables: {worst_beyond:.4f} (goal <= {GOAL})")
    print(f"open + read of {big!r} ({disk[big] / 1e6:.1f} MB on disk): HTTP "
          f"{t_col['http'] * 1e3:.1f} ms, local {t_col['local'] * 1e3:.1f} ms "
          f"({t_col['http'] / t_col['local']:.1f}x)")
    print(f"open + read of every column: HTTP {t_all['http'] * 1e3:.1f} ms, local "
          f"{t_all['local'] * 1e3:.1f} ms ({t_all['http'] / t_all['local']:.1f}x); best of "
          f"{repeat}")
    print(f"every column at {DELAY * 1e3:.0f} ms a request: a stream of batches "
          f"{stream['stream_s'] * 1e3:.0f} ms in {stream['stream_requests']} requests, "
          f"to_arrow {stream['whole_s'] * 1e3:.0f} ms in {stream['whole_requests']} "
          f"({stream['stream_s'] / stream['whole_s']:.2f}x)")
    return 0


def stream_and_whole(path, repeat):
    """A stream of batches of every column (iter_batches: the scan behind the engines and the
    loaders) against to_arrow of them, over HTTP from a server answering each request after
    DELAY seconds (object storage's latency): time (best of `repeat`, interleaved) and
    requests of each."""
    with Server(path, DELAY) as srv:
        def stream():
            with idv.open(srv.url) as f:
                for _ in f.iter_batches():
                    pass

        def whole():
            with idv.open(srv.url) as f:
                f.to_arrow()
        counts = {}
        for name, fn in (("stream", stream), ("whole", whole)):
            fn()
            srv.stats(reset=True)
            fn()
            counts[name] = srv.stats()["requests"]
        t = race({"stream": stream, "whole": whole}, repeat)
    return {"stream_s": t["stream"], "whole_s": t["whole"], "delay_s": DELAY,
            "stream_requests": counts["stream"], "whole_requests": counts["whole"]}


class Server:
    """tests/http_server.py serving `path` from a child process, each GET answered after
    `delay` seconds."""

    def __init__(self, path, delay=0.0):
        self._proc = subprocess.Popen([sys.executable, SERVER, "--delay", str(delay), path],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        port = int(self._proc.stdout.readline())
        self._base = f"http://127.0.0.1:{port}"
        self.url = f"{self._base}/{os.path.basename(path)}"

    def stats(self, reset=False):
        with urllib.request.urlopen(self._base + ("/__reset__" if reset else "/__stats__")) as r:
            return json.loads(r.read())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._proc.stdin.close()
        self._proc.wait(10)


if __name__ == "__main__":
    sys.exit(main())
