#!/usr/bin/env python3
"""Write benchmark: idv.write against ML.NET's own saver (the oracle's bench-write), same data.

    python3 benchmarks/bench_write.py                       # numeric, mixed and text, 2M rows
    python3 benchmarks/bench_write.py --quick               # smoke run: 20,000 rows, one run each
    python3 benchmarks/bench_write.py --datasets numeric --rows 500000 --rounds 1
    python3 benchmarks/bench_write.py --no-mlnet --json     # idv only, machine-readable

Datasets (built with numpy first, not timed):

- numeric: the oracle's synthetic kinds i32, i64, f32, f64, bool, vec8 (I32 = i, I64 = i *
  1000003, F32 = i * 0.25, F64 = i / 7, B = i % 3 == 0, Vec8 = (i + j) / 2 as Single[8]);
- mixed: the oracle's default kinds i32, f32, f64, text (Txt = "row i");
- text: text-heavy: Txt, a categorical Cat (5 words), Words (1-8 words of a 50-word
  vocabulary, some of them non-ASCII) and an Int32 id.

ML.NET gets exactly the same rows: idv writes them uncompressed to a source file, and the
oracle's ``bench-write --from`` loads it into ML.NET's in-memory cache (not timed) and times
its BinarySaver writing it (best of --mlnet-repeat runs per call, the first of which warms
up the JIT). idv's time is one full ``idv.write`` call: checking and converting the input,
encoding, compressing (in threads), writing, fsync and rename. Both write over an existing
file of the same name, as ML.NET's repeats do (--fresh deletes it before each idv run).

The rounds alternate ML.NET and idv so that both see the same background load; the best time
of each over all rounds is reported. Throughput is the uncompressed payload (the blocks'
decompressed bytes, the same for every writer) per second. Sizes are whole files.

The floor of the default write is compressing its blocks and nothing else: every block's
payload (taken from the uncompressed source file, not timed) compressed by the default
library at its default level, the same compressor object the writer uses, in as many threads
(a thread pool, output thrown away). The default write (checksums and statistics included)
is timed against it in the same rounds, and against that floor with its file: the compressed
blocks then written to a new file in one pass, fsynced and renamed, as any writer must at
least do (no checksums or statistics, nothing replaced).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import idv  # noqa: E402

TARGET_SPEEDUP = 3.0          # DEFLATE: idv's default backend vs ML.NET, same data
TARGET_SIZE = 1.01            # ... at a file at most this much larger than ML.NET's
TARGET_NONE = 1e9             # compression none: bytes of payload per second
TARGET_FLOOR = 0.9            # the default write: >= this x its floor (the blocks compressed)


def oracle_path():
    env = os.environ.get("IDV_MLNET_ORACLE")
    if env:
        return env
    shared = os.environ.get("IDV_SHARED", os.path.join(ROOT, "..", "shared"))
    return os.path.join(shared, "oracle", "mlnet_oracle.py")


def dataset(name, rows):
    i = np.arange(rows)
    if name == "numeric":
        return {"I32": i.astype(np.int32), "I64": i * 1000003, "F32": (i * 0.25).astype(np.float32),
                "F64": i / 7.0, "B": i % 3 == 0,
                "Vec8": ((i[:, None] + np.arange(8)) * 0.5).astype(np.float32)}
    if name == "mixed":
        return {"I32": i.astype(np.int32), "F32": (i * 0.25).astype(np.float32), "F64": i / 7.0,
                "Txt": _objects("row %d" % k for k in range(rows))}
    if name == "text":
        rng = np.random.default_rng(0)
        vocab = np.array(["the", "a", "model", "data", "view", "column", "row", "text", "value",
                          "key", "vector", "sparse", "dense", "block", "file", "write", "read",
                          "fast", "slow", "small", "large", "train", "test", "score", "label",
                          "feature", "café", "naïve", "größe", "straße", "日本", "データ", "模型",
                          "über", "façade", "résumé", "ñandú", "zoë", "smörgåsbord", "crème",
                          "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta",
                          "iota", "kappa"], dtype=object)
        nwords = rng.integers(1, 9, rows)
        picks = vocab[rng.integers(0, len(vocab), int(nwords.sum()))]
        ends = np.cumsum(nwords)
        words = _objects(" ".join(picks[e - k:e]) for e, k in zip(ends.tolist(),
                                                                   nwords.tolist()))
        cats = np.array(["red", "green", "blue", "yellow", "black"], dtype=object)
        return {"Id": i.astype(np.int32), "Txt": _objects("row %d" % k for k in range(rows)),
                "Cat": cats[rng.integers(0, 5, rows)], "Words": words}
    raise SystemExit(f"unknown dataset {name!r}")


def _objects(gen):
    items = list(gen)
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def payload_bytes(path):
    with idv.open(path) as f:
        return sum(c.nbytes for c in f.columns)


def compress_floor(src, threads):
    """(a run of the floor, its pool): the payload of every block of `src` (uncompressed)
    compressed by the default library and level, in `threads` threads."""
    with idv.open(src) as f:
        buf = f._source.buffer       # a benchmark's look inside: the file's bytes
        blocks = [bytes(buf[o:o + n]) for c in f.columns
                  for o, n in zip(c.lookup["offset"].tolist(), c.lookup["raw"].tolist())]
        del buf
    compress = idv.compression.backend().compress()
    pool = ThreadPoolExecutor(threads)
    return (lambda: list(pool.map(compress, blocks, chunksize=8))), pool


def with_file(floor, path):
    """The floor, then its blocks written to a new file at `path`, fsynced and renamed."""
    def run():
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.writelines(floor())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    return run


def timed(fn, path, fresh):
    if fresh and os.path.exists(path):
        os.unlink(path)
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def mlnet(src, out, repeat, compression):
    cmd = [sys.executable, oracle_path(), "bench-write", out, "--from", src, "--repeat",
           str(repeat), "--compression", compression, "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        return None, msg[-1] if msg else f"exit code {proc.returncode}"
    res = json.loads(proc.stdout)
    return res["best_s"], None


def run_dataset(name, a, d):
    data = dataset(name, a.rows)
    src = os.path.join(d, f"{name}_src.idv")
    idv.write(src, data, compression="none")
    payload = payload_bytes(src)
    backend = idv.compression.default_backend()
    writers = [(f"idv {backend}", "deflate", backend)]
    if backend != "zlib":
        writers.append(("idv zlib", "deflate", "zlib"))
    writers.append(("idv", "none", None))
    best = {}
    sizes = {}
    errors = {}
    threads = a.threads or idv._resources.threads.default_threads()
    floor, pool = compress_floor(src, threads)
    floor_path = os.path.join(d, f"{name}_floor.bin")
    floor_file = with_file(floor, floor_path)
    for _ in range(a.rounds):
        if not a.no_mlnet:
            for comp in ("deflate", "none"):
                out = os.path.join(d, f"{name}_mlnet_{comp}.idv")
                t, err = mlnet(src, out, a.mlnet_repeat, comp)
                if err:
                    errors[("ML.NET", comp)] = err
                    continue
                key = ("ML.NET", comp)
                best[key] = min(best.get(key, float("inf")), t)
                sizes[key] = os.path.getsize(out)
        for label, comp, be in writers:
            out = os.path.join(d, f"{name}_{label.replace(' ', '_')}_{comp}.idv")
            for _ in range(a.repeat):
                if be == backend and comp == "deflate":     # the default, beside its floor
                    best["floor"] = min(best.get("floor", float("inf")),
                                        timed(floor, None, False))
                    best["floor file"] = min(best.get("floor file", float("inf")),
                                             timed(floor_file, floor_path, True))
                t = timed(lambda: idv.write(out, data, compression=comp, backend=be,
                                            threads=a.threads), out, a.fresh)
                key = (label, comp)
                best[key] = min(best.get(key, float("inf")), t)
            sizes[(label, comp)] = os.path.getsize(out)
    pool.shutdown()
    floor_s = best.pop("floor")
    floor_file_s = best.pop("floor file")
    rows = []
    for (label, comp), t in best.items():
        r = {"writer": label, "compression": comp, "best_s": round(t, 4),
             "MB_per_s": round(payload / t / 1e6, 1), "bytes": sizes[(label, comp)]}
        ref = best.get(("ML.NET", comp))
        if label != "ML.NET" and ref is not None:
            r["speed_vs_mlnet"] = round(ref / t, 2)
            r["size_vs_mlnet"] = round(sizes[(label, comp)] / sizes[("ML.NET", comp)], 4)
        rows.append(r)
    order = {"ML.NET": 0}
    rows.sort(key=lambda r: (r["compression"] != "deflate", order.get(r["writer"], 1)))
    checks = {}
    fast = best.get((f"idv {backend}", "deflate"))
    ref = best.get(("ML.NET", "deflate"))
    if fast and ref:
        checks["deflate_speed_vs_mlnet"] = round(ref / fast, 2)
        checks["deflate_size_vs_mlnet"] = round(sizes[(f"idv {backend}", "deflate")]
                                                / sizes[("ML.NET", "deflate")], 4)
        checks["deflate_ok"] = (ref / fast >= TARGET_SPEEDUP
                                and checks["deflate_size_vs_mlnet"] <= TARGET_SIZE)
    checks["floor_s"] = round(floor_s, 4)
    checks["floor_threads"] = threads
    checks["default_vs_floor"] = round(floor_s / fast, 3)
    checks["floor_ok"] = floor_s / fast >= TARGET_FLOOR
    checks["floor_file_s"] = round(floor_file_s, 4)
    checks["default_vs_floor_file"] = round(floor_file_s / fast, 3)
    checks["none_GB_per_s"] = round(payload / best[("idv", "none")] / 1e9, 2)
    checks["none_ok"] = payload / best[("idv", "none")] >= TARGET_NONE
    return {"dataset": name, "rows": a.rows, "columns": list(data), "payload_bytes": payload,
            "loadavg": os.getloadavg()[0],
            "deflate_backend": backend, "results": rows, "checks": checks,
            "errors": {f"{k[0]} {k[1]}": v for k, v in errors.items()}}


def show(res):
    print(f"\n{res['dataset']}: {res['rows']} rows x {', '.join(res['columns'])}; "
          f"{res['payload_bytes'] / 1e6:.1f} MB of payload")
    for r in res["results"]:
        line = (f"  {r['writer']:16} {r['compression']:8} {r['best_s']:8.3f} s "
                f"{r['MB_per_s']:8.1f} MB/s {r['bytes']:>11} bytes")
        if "speed_vs_mlnet" in r:
            line += f"   {r['speed_vs_mlnet']:5.2f}x ML.NET's speed, size {r['size_vs_mlnet']:.4f}x"
        print(line)
    for k, v in res["errors"].items():
        print(f"  {k}: {v}")
    c = res["checks"]
    if "deflate_speed_vs_mlnet" in c:
        print(f"  DEFLATE target (>= {TARGET_SPEEDUP}x ML.NET at <= {TARGET_SIZE}x its size): "
              f"{c['deflate_speed_vs_mlnet']}x at {c['deflate_size_vs_mlnet']}x -> "
              f"{'met' if c['deflate_ok'] else 'MISSED'}")
    print(f"  default write / its floor ({c['floor_threads']} threads compressing the blocks, "
          f"{c['floor_s']:.3f} s; target >= {TARGET_FLOOR}x): {c['default_vs_floor']}x -> "
          f"{'met' if c['floor_ok'] else 'MISSED'}")
    print(f"  default write / the floor with its file (written, fsynced, renamed: "
          f"{c['floor_file_s']:.3f} s): {c['default_vs_floor_file']}x")
    print(f"  compression none target (>= {TARGET_NONE / 1e9:.0f} GB/s): {c['none_GB_per_s']} "
          f"GB/s -> {'met' if c['none_ok'] else 'MISSED'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="numeric,mixed,text")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: every dataset and writer, 20,000 rows, one run of each "
                         "(the targets are for the full size)")
    ap.add_argument("--rows", type=int, default=None, help="rows per dataset (default 2,000,000)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="alternations of ML.NET and idv (default 2)")
    ap.add_argument("--repeat", type=int, default=None, help="idv runs per round (default 3)")
    ap.add_argument("--mlnet-repeat", type=int, default=None,
                    help="ML.NET runs per call (default 3)")
    ap.add_argument("--threads", type=int, default=None, help="idv threads (default: CPUs)")
    ap.add_argument("--fresh", action="store_true", help="delete idv's output before each run")
    ap.add_argument("--no-mlnet", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    for option, full, quick in (("rows", 2_000_000, 20_000), ("rounds", 2, 1), ("repeat", 3, 1),
                                ("mlnet_repeat", 3, 1)):
        if getattr(a, option) is None:
            setattr(a, option, quick if a.quick else full)
    results = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("IDV_BENCH_DIR")) as d:
        for name in a.datasets.split(","):
            res = run_dataset(name, a, d)
            results.append(res)
            if not a.json:
                show(res)
    if a.json:
        print(json.dumps({"cpus": idv._resources.threads.default_threads(), "quick": a.quick,
                          "results": results}, indent=1))
    elif a.quick:
        print("\n(--quick: small data, per-call overheads dominate; the targets are for the "
              "full size)")


if __name__ == "__main__":
    main()
