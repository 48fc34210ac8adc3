#!/usr/bin/env python3
"""Convert benchmark: ``idv convert`` Parquet <-> .idv against pyarrow copying Parquet, same run.

    python3 benchmarks/bench_convert.py            # 2M x 11 numeric columns, 1M short strings
    python3 benchmarks/bench_convert.py --quick    # small data, one run of each figure
    python3 benchmarks/bench_convert.py --json     # machine-readable results on stdout

The data are bench_read's: the numeric and text files written by ML.NET (through the oracle)
and their snappy Parquet twins with the same values, made once in ``benchmarks/_data/`` by
bench_read.ensure_data.

For each dataset, interleaved, best of ``--repeat`` runs:

  pyarrow copy     pq.read_table + pq.write_table (snappy): pyarrow copying the same data
  Parquet -> .idv  idv.convert(x.parquet, x.idv), the defaults (DEFLATE: ISA-L's level 1,
                   else libdeflate's 1, else zlib's 1); and with ``level=6`` (idv.write's
                   default, ML.NET's level) and ``backend="libdeflate", level=2`` (files
                   near ML.NET's size, slower)
  .idv -> Parquet  idv.convert(ML.NET's x.idv, x.parquet): the read path (idv._interop.arrow's
                   record_batch_reader) into pyarrow's ParquetWriter, snappy
  .idv -> .idv     idv.convert(ML.NET's x.idv, y.idv), the defaults: the source's blocks
                   copied as stored (Writer.copy_blocks), decoded only for their statistics;
                   and with the default DEFLATE given (every block decoded and compressed
                   again)
  .idv -> CSV      idv.convert(ML.NET's x.idv, x.csv): the scan into idv._interop.delimited (.NET's
                   text forms), against pyarrow Parquet -> CSV (pyarrow.csv.write_csv of
                   pq.read_table: the same values in pyarrow's text forms)

The ratio is the pyarrow copy's seconds / idv's seconds (>= 1: at least as fast). Output sizes
are reported; an .idv output's also against ML.NET's file of the same data (the goal, on
the scale benchmark's data: at most 1.2x by default; these data can be larger). Sizes alone
(.idv -> .idv, the default and the other settings, against the source's bytes): bench_write's
numeric, mixed and text data (in ML.NET's bytes: idv.write with backend="zlib", level=6,
checksums and statistics off, which gives exactly the file ML.NET's saver writes) and ML.NET's
own files in ``$IDV_SHARED/mlnet-files``.

Peak memory: each conversion runs once more in a child process, which reports
its peak resident memory (VmHWM); the pyarrow copy (the whole table in memory) is measured
the same way for comparison, and each conversion of bench_read's small files too (the fixed
part: libraries, thread pools). With --quick all of a dataset's run in one child, its peak
reset before each (the start-ups were most of the quick mode's time). The values of every
output are checked against the source after the timed runs (not timed).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import idv  # noqa: E402
from bench_read import ensure_data, machine, options, race, runs_and_log  # noqa: E402

MB = 1e6

# the child that measures conversions' peak memory: for each job (what, src, dst, options) it
# prints {"peak", "imported"}, bytes of resident memory: the most while the job ran (VmHWM,
# reset before each job) and before it (the first job: after the imports), a JSON list
_CHILD = r"""
import json, sys
import idv, pyarrow as pa, pyarrow.parquet as pq
def status(key):      # VmHWM is this process's own peak (ru_maxrss can carry the parent's)
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
out = []
for what, src, dst, opts in json.loads(sys.argv[1]):
    with open("/proc/self/clear_refs", "w") as f:      # the peak so far: now
        f.write("5")
    before = status("VmRSS")
    if what == "pyarrow":
        pq.write_table(pq.read_table(src), dst, compression="snappy")
    elif what == "pyarrow csv":
        import pyarrow.csv as pcsv
        pcsv.write_csv(pq.read_table(src), dst)
    else:
        idv.convert(src, dst, **opts)
    # the kernel's counts of resident pages lag by a few: the peak is at least the start
    out.append({"peak": max(status("VmHWM"), before), "imported": before})
print(json.dumps(out))
"""


def pyarrow_copy(src, dst):
    import pyarrow.parquet as pq

    def run():
        pq.write_table(pq.read_table(src), dst, compression="snappy")
    return run


def pyarrow_csv(src, dst):
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    def run():
        pcsv.write_csv(pq.read_table(src), dst)
    return run


def idv_convert(src, dst, **opts):
    def run():
        idv.convert(src, dst, **opts)
    return run


def other_settings():
    """name -> convert options besides the default (idv.compression.convert_deflate):
    idv.write's default, ML.NET's level 6, and libdeflate's level 2 (files near ML.NET's
    size, at about a third of ISA-L's speed)."""
    out = {"level 6": {"level": 6}}
    if "libdeflate" in idv.compression.installed():
        out["libdeflate 2"] = {"backend": "libdeflate", "level": 2}
    return out


def again():
    """The default DEFLATE given explicitly: an .idv's blocks compressed again, not copied."""
    backend, level = idv.compression.convert_deflate()
    return {"backend": backend, "level": level}


SIZE_GOAL = 1.2        # an .idv output, by default: at most this x ML.NET's file of the data


def size_figures(tmp, rows):
    """.idv -> .idv sizes, per setting, against ML.NET's bytes of the same data: `rows` of
    bench_write's datasets, and ML.NET's own files (whole files, and their blocks alone: a
    small file is mostly its tables, and idv adds its checksums and statistics)."""
    import bench_write
    sources = {}
    for name in ("numeric", "mixed", "text"):
        path = os.path.join(tmp, f"mlnet_{name}.idv")
        idv.write(path, bench_write.dataset(name, rows), backend="zlib", level=6,
                  checksums=False, statistics=False)       # ML.NET's saver's bytes
        sources[name] = path
    shared = os.environ.get("IDV_SHARED", os.path.join(ROOT, "..", "shared"))
    folder = os.path.join(shared, "mlnet-files")
    if os.path.isdir(folder):
        for name in sorted(os.listdir(folder)):
            if name.endswith(".idv"):
                sources[name] = os.path.join(folder, name)
    settings = {"default": {}, "again": again(), **other_settings()}
    out = []
    for name, src in sources.items():
        with idv.open(src) as f:
            blocks = sum(c.nbytes_disk for c in f.columns)
        row = {"data": name, "bytes": os.path.getsize(src), "ratios": {}, "block_ratios": {}}
        for label, o in settings.items():
            dst = os.path.join(tmp, f"size_{label.replace(' ', '')}.idv")
            idv.convert(src, dst, **o)
            row["ratios"][label] = os.path.getsize(dst) / row["bytes"]
            with idv.open(dst) as f:
                got = sum(c.nbytes_disk for c in f.columns)
            row["block_ratios"][label] = got / blocks if blocks else None
        out.append(row)
    return out


def check_outputs(parquet_src, idv_src, outputs):
    """Not timed: every output holds the source's values, or the comparison is void."""
    import pyarrow.parquet as pq
    want = pq.read_table(parquet_src)
    for path in outputs:
        if path.endswith(".csv"):
            import pyarrow.csv as pcsv
            if pcsv.read_csv(path).num_rows != want.num_rows:
                sys.exit(f"bench_convert: {path} does not hold {want.num_rows} rows")
            continue
        got = idv.to_arrow(path) if path.endswith(".idv") else pq.read_table(path)
        for name in want.column_names:
            a, b = want.column(name), got.column(name)
            same = (a.combine_chunks().equals(b.combine_chunks().cast(a.type))
                    if a.type.equals(b.type) or str(a.type) in ("string", "large_string")
                    else np.array_equal(a.to_numpy(), b.to_numpy()))
            if not same:
                sys.exit(f"bench_convert: {path} column {name} differs from {parquet_src}")
    with idv.open(idv_src) as f:
        if f.num_rows != want.num_rows:
            sys.exit(f"bench_convert: {idv_src} has {f.num_rows} rows, the Parquet twin "
                     f"{want.num_rows}")


def peak_memory(jobs, one_child):
    """[(peak, before)]: resident memory of children that make the conversions `jobs`
    ((what, src, dst, options) each), each in a fresh child, or all in one (--quick: the
    same figures, a fraction of the start-ups)."""
    batches = [jobs] if one_child and jobs else [[job] for job in jobs]
    out = []
    for batch in batches:
        proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(batch)],
                              capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=ROOT))
        if proc.returncode != 0:
            sys.exit(f"bench_convert: the memory probe of {batch} failed:\n"
                     f"{proc.stderr[-3000:]}")
        out += [(r["peak"], r["imported"]) for r in json.loads(proc.stdout)]
    return out


def run_dataset(kind, p, small, tmp, repeat, log, one_child):
    """The timings, sizes and peak memory of one dataset; `small`: bench_read's quick files,
    whose conversions' peak memory is the fixed part (the libraries, their thread pools);
    `one_child`: the memory probes in one child (peak_memory)."""
    src_pq, src_idv = p[kind], p[f"{kind}_deflate"]
    out = {name: os.path.join(tmp, f"{kind}_{name}") for name in (
        "copy.parquet", "default.idv", "from_idv.parquet", "from_idv.idv", "from_idv.csv",
        "pyarrow.csv")}
    fns = {"pyarrow copy": pyarrow_copy(src_pq, out["copy.parquet"]),
           "Parquet -> .idv": idv_convert(src_pq, out["default.idv"]),
           ".idv -> Parquet": idv_convert(src_idv, out["from_idv.parquet"]),
           ".idv -> .idv": idv_convert(src_idv, out["from_idv.idv"]),
           ".idv -> CSV": idv_convert(src_idv, out["from_idv.csv"]),
           "pyarrow Parquet -> CSV": pyarrow_csv(src_pq, out["pyarrow.csv"])}
    opts = {"Parquet -> .idv": {}, ".idv -> Parquet": {}, ".idv -> .idv": {}, ".idv -> CSV": {}}
    paths = {"pyarrow copy": out["copy.parquet"], "Parquet -> .idv": out["default.idv"],
             ".idv -> Parquet": out["from_idv.parquet"], ".idv -> .idv": out["from_idv.idv"],
             ".idv -> CSV": out["from_idv.csv"], "pyarrow Parquet -> CSV": out["pyarrow.csv"]}
    key = ".idv -> .idv, again"          # compressed again, with the default DEFLATE
    paths[key] = os.path.join(tmp, f"{kind}_again.idv")
    opts[key] = again()
    fns[key] = idv_convert(src_idv, paths[key], **opts[key])
    for name, o in other_settings().items():
        key = f"Parquet -> .idv, {name}"
        path = os.path.join(tmp, f"{kind}_{name.replace(' ', '')}.idv")
        fns[key] = idv_convert(src_pq, path, **o)
        opts[key] = o
        paths[key] = path
    log(f"{kind}: timing {len(fns)} conversions, best of {repeat}, interleaved ...")
    secs = race(fns, repeat)            # the first round warms up
    check_outputs(src_pq, src_idv, [v for k, v in paths.items() if not k.startswith("pyarrow")])
    jobs, small_jobs = [], {}           # the memory probes: of the data; of the small files
    for name in secs:
        source = src_idv if name.startswith(".idv") else src_pq
        what = {"pyarrow copy": "pyarrow", "pyarrow Parquet -> CSV": "pyarrow csv"}.get(
            name, "idv")
        ext = os.path.splitext(paths[name])[1]
        jobs.append((what, source, paths[name] + ".mem" + ext, opts.get(name, {})))
        small_src = small[f"{kind}_deflate"] if name.startswith(".idv") else small[kind]
        if small_src != source:         # --quick: the small files are the data
            small_jobs[name] = (what, small_src, paths[name] + ".small" + ext,
                                opts.get(name, {}))
    peaks = dict(zip(secs, peak_memory(jobs, one_child)))
    small_peaks = dict(zip(small_jobs, peak_memory(list(small_jobs.values()), one_child)))
    base = secs["pyarrow copy"]
    results = []
    for name, s in secs.items():
        peak, imported = peaks[name]
        results.append({"what": name, "options": opts.get(name), "seconds": s,
                        "ratio": base / s, "output_bytes": os.path.getsize(paths[name]),
                        "size_vs_mlnet": (os.path.getsize(paths[name]) / os.path.getsize(src_idv)
                                          if paths[name].endswith(".idv") else None),
                        "peak_rss": peak, "rss_after_imports": imported,
                        "peak_rss_small_file": small_peaks.get(name, (peak,))[0]})
    return {"dataset": kind, "source_parquet_bytes": os.path.getsize(src_pq),
            "source_idv_bytes": os.path.getsize(src_idv), "results": results}


def main(argv=None):
    a = options(__doc__.split("\n")[0]).parse_args(argv)
    repeat, log = runs_and_log(a, 5)
    p = ensure_data(a.quick, log)
    small = p if a.quick else ensure_data(True, log)
    R = {"machine": machine(), "quick": a.quick, "repeat": repeat,
         "default_backend": idv.compression.default_backend(),
         "loadavg_start": os.getloadavg(), "datasets": []}
    with tempfile.TemporaryDirectory(prefix="bench_convert_") as tmp:
        for kind in ("numeric", "text"):
            R["datasets"].append(run_dataset(kind, p, small, tmp, repeat, log, a.quick))
        R["sizes"] = size_figures(tmp, 20_000 if a.quick else 2_000_000)
    R["loadavg_end"] = os.getloadavg()
    if a.json:
        print(json.dumps(R, indent=1))
        return 0
    print(f"\n{R['machine']['cpu']}, {R['machine']['cores']} cores; best of {repeat}, "
          f"interleaved; load average {R['loadavg_start'][0]:.1f} at the start, "
          f"{R['loadavg_end'][0]:.1f} at the end")
    for d in R["datasets"]:
        print(f"\n{d['dataset']} (source: Parquet {d['source_parquet_bytes']:,} B, ML.NET's .idv "
              f"{d['source_idv_bytes']:,} B)")
        for r in d["results"]:
            vs = "" if r["size_vs_mlnet"] is None else f" ({r['size_vs_mlnet']:.3f}x ML.NET's)"
            print(f"  {r['what']:<28} {r['seconds']:7.3f} s  {r['ratio']:5.2f}x  output "
                  f"{r['output_bytes']:>12,} B{vs}  peak RSS {r['peak_rss'] / MB:6.0f} MB "
                  f"(small file: {r['peak_rss_small_file'] / MB:.0f} MB)")
    print(f"\n.idv -> .idv, size against ML.NET's file of the same data (the default's goal "
          f"on the scale benchmark's data: <= {SIZE_GOAL}x; in brackets the blocks alone):")
    for r in R["sizes"]:
        cells = ", ".join(f"{k} {v:.3f}x" + ("" if r["block_ratios"][k] is None else
                                              f" ({r['block_ratios'][k]:.3f}x)")
                          for k, v in r["ratios"].items())
        print(f"  {r['data']:<24} {r['bytes']:>12,} B: {cells}")
    print("\nratio: the pyarrow copy's time / this one's (goal >= 1x for idv convert); peak "
          "RSS: a child making the conversion once (after its imports: "
          f"{R['datasets'][0]['results'][0]['rss_after_imports'] / MB:.0f} MB), and the same "
          "for bench_read's small file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
