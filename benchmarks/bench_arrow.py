#!/usr/bin/env python3
"""Text into Arrow and pandas: idv against pyarrow's Parquet reader, same run, interleaved;
uncompressed numbers handed to Arrow and numpy without copying.

    python3 benchmarks/bench_arrow.py            # full: 1M short strings (bench_read's file)
    python3 benchmarks/bench_arrow.py --quick    # 50k strings, one run of each figure
    python3 benchmarks/bench_arrow.py --json     # machine-readable results on stdout
    python3 benchmarks/bench_arrow.py --only zero  # the zero-copy figures alone

The data are bench_read's text files (``ensure_data``: 5-30 characters, 1 in 8 with a non-ASCII
character, written by ML.NET with DEFLATE and without compression) and their snappy Parquet
twin. Each figure is the best of ``--repeat`` runs, the runs of the functions compared
interleaved (bench_read.race), so a burst of load from elsewhere hits them alike. Every run
includes opening the file. Throughput is MB/s of the text payload (decompressed block bytes).

Goals:
  arrow      idv.to_arrow >= 1x pq.read_table of the same strings (Arrow to Arrow)
  pandas     idv.read_pandas >= 1x pd.read_parquet, both with Arrow-backed strings (pandas 3's
             default str; and dtype_backend="pyarrow")
  objects    idv.read (object array of str) stays >= 1.2x pyarrow's read to objects
  zero copy  bench_read's uncompressed numeric file (11 columns, written by ML.NET, so without
             checksums) and idv's copy of it (with them): to_arrow, record_batch_reader (every
             batch) and read(copy=False), the blocks referenced in the file's memory map (and
             checked against their CRC-32s), >= 2x a plain copy of the file's bytes out of a
             new memory map (bench_read.memcpy_runs); the copying read (idv.read) and, for
             idv's file, the floor (mapping it and computing every block's CRC-32) to compare
  booleans   (no goal) a Boolean column (2M random rows; --quick 100k; written here by idv.write,
             ML.NET's codec: a bit a row) into Arrow and numpy, against pyarrow's read of its
             snappy Parquet twin and the floor: inflating its blocks
  times      (no goal) a DateTime and a DateTimeOffset column (2M rows; --quick 100k; written
             here from pandas in microseconds, the second in Europe/Paris, uncompressed and
             with DEFLATE) into Arrow, pandas and numpy, against pyarrow's and pandas' reads of
             their snappy Parquet twins
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import idv  # noqa: E402
from bench_read import (_DECOMPRESSORS, baseline_decompress, ensure_data,  # noqa: E402
                        machine, memcpy_runs, options, payload_bytes, race, runs_and_log)

MB = 1e6
SECTIONS = ("text", "zero", "booleans", "times")


def objects_then_arrow(path):
    """Text into Arrow through Python objects: every value a str (Column.read), then pa.array
    of those objects, one chunk per block (what text straight into Arrow saves)."""
    import pyarrow as pa
    with idv.open(path) as f:
        col = f["Text"]
        values = col.read()
        step = col.rows_per_block
        return pa.table({"Text": pa.chunked_array(
            [pa.array(values[a:a + step], pa.string()) for a in range(0, len(values), step)],
            pa.string())})


def string_dtype_read(path):
    return idv.read(path, text="StringDType")["Text"]


def check_same_values(p, keys):
    """Not timed: idv and pyarrow must see the same strings, or the comparison is void."""
    import pyarrow.parquet as pq
    want = pq.read_table(p["text"]).column("Text")
    for key in keys:
        got = idv.to_arrow(p[key]).column("Text")
        if not got.equals(want):
            sys.exit(f"bench_arrow: {key} differs from the Parquet twin")


def main(argv=None):
    ap = options(__doc__.split("\n")[0], "small data, one run")
    ap.add_argument("--only", choices=SECTIONS, action="append",
                    help="this section only (repeatable; default: all)")
    args = ap.parse_args(argv)
    only = args.only or SECTIONS
    repeat, log = runs_and_log(args, 9)

    import pandas as pd
    import pyarrow.parquet as pq

    p = ensure_data(args.quick, log)
    keys = ("text_deflate", "text_none")
    check_same_values(p, keys)
    parquet = p["text"]
    figures, targets = {}, []

    def fig(key, label, seconds, nbytes):
        figures[key] = {"label": label, "seconds": seconds, "mb_s": nbytes / MB / seconds}
        log(f"  {label:<58} {seconds * 1e3:8.1f} ms  {nbytes / MB / seconds:8.0f} MB/s")

    def target(name, ratio, goal):
        targets.append({"name": name, "ratio": ratio, "goal": goal, "met": ratio >= goal})
        log(f"  -> {name}: {ratio:.2f}x (goal >= {goal}x) {'met' if ratio >= goal else 'MISSED'}")

    strings = hasattr(np, "dtypes") and hasattr(np.dtypes, "StringDType")
    for key in keys if "text" in only else ():
        path = p[key]
        comp = key.split("_")[1]
        nbytes = payload_bytes(path)
        log(f"text, {comp} file ({nbytes / MB:.1f} MB payload):")
        fns = {"pq": lambda: pq.read_table(parquet),
               "arrow": lambda: idv.to_arrow(path),
               "objects": lambda: objects_then_arrow(path),
               "stream": lambda: _stream(path)}
        if comp == "deflate":     # the floor: only inflating the blocks, as idv's threads do
            lib = "libdeflate" if "libdeflate" in _DECOMPRESSORS else "zlib"
            fns["inflate"] = baseline_decompress(path, lib, idv._resources.threads.default_threads())
        secs = race(fns, repeat)
        fig(f"pq_table_{comp}", "pq.read_table (snappy Parquet -> Arrow)", secs["pq"], nbytes)
        fig(f"idv_arrow_{comp}", "idv.to_arrow (text straight into Arrow)", secs["arrow"],
            nbytes)
        fig(f"idv_arrow_objects_{comp}", "through str objects, then pa.array", secs["objects"],
            nbytes)
        fig(f"idv_stream_{comp}", "pa.table(idv.open(p)) (Arrow C stream)", secs["stream"],
            nbytes)
        if "inflate" in secs:
            fig(f"inflate_only_{comp}", f"only inflating the blocks ({lib}, "
                f"{idv._resources.threads.default_threads()} threads)", secs["inflate"], nbytes)
            log(f"     (pq.read_table / inflating alone: {secs['pq'] / secs['inflate']:.2f}x)")
        target(f"{comp}: to_arrow / pq.read_table", secs["pq"] / secs["arrow"], 1.0)
        figures[f"objects_{comp}"] = {"ratio": secs["pq"] / secs["objects"]}
        log(f"     (through objects: {secs['pq'] / secs['objects']:.2f}x; straight / through "
            f"objects {secs['objects'] / secs['arrow']:.2f}x)")

        secs = race({
            "pd": lambda: pd.read_parquet(parquet),
            "idv": lambda: idv.read_pandas(path),
            "pd_pa": lambda: pd.read_parquet(parquet, dtype_backend="pyarrow"),
            "idv_pa": lambda: idv.read_pandas(path, dtype_backend="pyarrow"),
        }, repeat)
        dtype = str(idv.read_pandas(path)["Text"].dtype)
        fig(f"pd_parquet_{comp}", f"pd.read_parquet (Text dtype {dtype})", secs["pd"], nbytes)
        fig(f"idv_pandas_{comp}", f"idv.read_pandas (Text dtype {dtype})", secs["idv"], nbytes)
        fig(f"pd_parquet_pyarrow_{comp}", "pd.read_parquet(dtype_backend='pyarrow')",
            secs["pd_pa"], nbytes)
        fig(f"idv_pandas_pyarrow_{comp}", "idv.read_pandas(dtype_backend='pyarrow')",
            secs["idv_pa"], nbytes)
        target(f"{comp}: read_pandas / pd.read_parquet ({dtype})", secs["pd"] / secs["idv"], 1.0)
        target(f"{comp}: read_pandas / pd.read_parquet (dtype_backend='pyarrow')",
               secs["pd_pa"] / secs["idv_pa"], 1.0)

        fns = {"pa": lambda: pq.read_table(parquet).column("Text").to_numpy(),
               "idv": lambda: idv.read(path)["Text"]}
        if strings:
            fns["pa_sd"] = lambda: pq.read_table(parquet).column("Text").to_numpy() \
                .astype(np.dtypes.StringDType())
            fns["idv_sd"] = lambda: string_dtype_read(path)
        secs = race(fns, repeat)
        fig(f"pa_objects_{comp}", "pyarrow Parquet -> numpy objects", secs["pa"], nbytes)
        fig(f"idv_objects_{comp}", "idv.read -> numpy objects (str)", secs["idv"], nbytes)
        target(f"{comp}: idv.read objects / pyarrow to objects", secs["pa"] / secs["idv"], 1.2)
        if strings:
            fig(f"pa_stringdtype_{comp}", "pyarrow -> objects -> StringDType", secs["pa_sd"],
                nbytes)
            fig(f"idv_stringdtype_{comp}", "idv.read(text='StringDType')", secs["idv_sd"],
                nbytes)
            figures[f"stringdtype_vs_objects_{comp}"] = {"ratio": secs["idv"] / secs["idv_sd"]}
            log(f"     (StringDType / objects: {secs['idv'] / secs['idv_sd']:.2f}x)")

    if "zero" in only:
        zero_copy(p["numeric_none"], repeat, fig, target, log)
    if "booleans" in only:
        booleans(100_000 if args.quick else 2_000_000, repeat, fig, log)
    if "times" in only:
        times(100_000 if args.quick else 2_000_000, repeat, fig, log)

    report = {"quick": args.quick, "repeat": repeat, "machine": machine(),
              "figures": figures, "targets": targets}
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
    return 0


def booleans(rows, repeat, fig, log):
    """A Boolean column read whole into Arrow and numpy (opening included), against pyarrow's
    Parquet and inflating the blocks alone; the files are made here and removed after."""
    import shutil
    import tempfile
    import pyarrow as pa
    import pyarrow.parquet as pq
    tmp = tempfile.mkdtemp(prefix="bench_arrow_bool")
    try:
        values = np.random.default_rng(3).random(rows) < 0.5
        path, twin = os.path.join(tmp, "b.idv"), os.path.join(tmp, "b.parquet")
        idv.write(path, {"B": values})
        pq.write_table(pa.table({"B": values}), twin, compression="snappy")
        if idv.to_arrow(path).column("B").to_numpy().tolist() != values.tolist():
            sys.exit("bench_arrow: idv's Booleans differ from the values written")
        nbytes = payload_bytes(path)
        log(f"booleans, {rows:,} rows ({nbytes / MB:.2f} MB of bits):")
        lib = "libdeflate" if "libdeflate" in _DECOMPRESSORS else "zlib"
        threads = idv._resources.threads.default_threads()
        secs = race({"pq": lambda: pq.read_table(twin), "arrow": lambda: idv.to_arrow(path),
                     "pq_np": lambda: pq.read_table(twin).column("B").to_numpy(),
                     "read": lambda: idv.read(path)["B"],
                     "inflate": baseline_decompress(path, lib, threads)}, repeat)
        for key, label in (("pq", "pq.read_table (snappy Parquet -> Arrow)"),
                           ("arrow", "idv.to_arrow (the blocks' bits as Arrow's bitmap)"),
                           ("pq_np", "pq.read_table, then to_numpy"),
                           ("read", "idv.read (a byte a row)"),
                           ("inflate", f"only inflating the blocks ({lib}, {threads} threads)")):
            fig(f"bool_{key}", label, secs[key], nbytes)
        log(f"     (to_arrow / pq.read_table: {secs['pq'] / secs['arrow']:.2f}x; read / "
            f"pyarrow to numpy: {secs['pq_np'] / secs['read']:.2f}x)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def times(rows, repeat, fig, log):
    """Time columns into Arrow, pandas and numpy (opening included), against pyarrow's and
    pandas' reads of their Parquet twins: what a time column costs beside Parquet, its ticks
    converted to the unit it was written in. The files are made here and removed after."""
    import shutil
    import tempfile
    import pandas as pd
    import pyarrow.parquet as pq
    tmp = tempfile.mkdtemp(prefix="bench_arrow_times")
    try:
        rng = np.random.default_rng(4)
        at = np.datetime64("2020-01-01T00:00:00", "us") + \
            rng.integers(0, 10**14, rows).astype("timedelta64[us]")
        utc = pd.Series(pd.to_datetime(at).tz_localize("UTC"))
        for kind, series in (("DateTime", pd.Series(at)),
                             ("DateTimeOffset", utc.dt.tz_convert("Europe/Paris"))):
            df = pd.DataFrame({"T": series})
            twin = os.path.join(tmp, kind + ".parquet")
            df.to_parquet(twin)
            for comp in ("none", None):
                path = os.path.join(tmp, f"{kind}_{comp}.idv")
                idv.write(path, df, compression=comp)
                if not idv.read_pandas(path)["T"].equals(df["T"]):
                    sys.exit(f"bench_arrow: idv's {kind} values differ from those written")
                nbytes = payload_bytes(path)
                log(f"{kind}, {rows:,} rows, {'uncompressed' if comp else 'DEFLATE'}:")
                secs = race({"pq": lambda: pq.read_table(twin),
                             "arrow": lambda: idv.to_arrow(path),
                             "pd": lambda: pd.read_parquet(twin),
                             "pandas": lambda: idv.read_pandas(path),
                             "read": lambda: idv.read(path)}, repeat)
                for key, label in (("pq", "pq.read_table (snappy Parquet -> Arrow)"),
                                   ("arrow", "idv.to_arrow"), ("pd", "pd.read_parquet"),
                                   ("pandas", "idv.read_pandas"), ("read", "idv.read")):
                    fig(f"{kind}_{comp or 'deflate'}_{key}", label, secs[key], nbytes)
                log(f"     (to_arrow / pq.read_table: {secs['arrow'] / secs['pq']:.2f}x the "
                    f"time; read_pandas / pd.read_parquet: {secs['pandas'] / secs['pd']:.2f}x)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def zero_copy(path, repeat, fig, target, log):
    """Uncompressed numbers into Arrow and numpy as views of the file's memory map, against a
    plain copy of the file's bytes: ML.NET's file (no checksums: nothing to read at all), and
    idv's copy of it (every block's CRC-32 checked, against the floor of mapping the file
    and computing them)."""
    checked = os.path.splitext(path)[0] + "_idv.idv"
    if not os.path.exists(checked):
        log("writing idv's uncompressed copy of the numeric file (once) ...")
        idv.convert(path, checked, compression="none")
    for key, p in (("mlnet", path), ("idv", checked)):
        _zero_copy_figures(key, p, repeat, fig, target, log)


def _crc_floor(path):
    """The least a checked zero-copy read does: map the file and compute the CRC-32 of each
    block (GIL-free calls, the blocks in as many runs as idv has threads, one a thread), no
    arrays made."""
    import mmap
    from concurrent.futures import ThreadPoolExecutor

    from idv import _compression
    with idv.open(path) as f:
        offsets = np.concatenate([c.lookup["offset"] for c in f.columns]).astype(np.int64)
        disk = np.concatenate([c.lookup["disk"] for c in f.columns]).astype(np.int64)
    order = np.argsort(offsets)
    offsets, disk = offsets[order], disk[order]
    threads = idv._resources.threads.default_threads()
    runs = np.array_split(np.arange(len(offsets)), threads)
    pool = ThreadPoolExecutor(threads)

    def run():
        with open(path, "rb") as fh:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        view = memoryview(mm)
        list(pool.map(lambda r: _compression.crc32_ranges(view, offsets[r], disk[r]), runs))
        view.release()
        mm.close()
    return run


def _zero_copy_figures(key, path, repeat, fig, target, log):
    nbytes = os.path.getsize(path)
    with idv.open(path) as f:
        mapped = [c.name for c in f.columns if c.mappable]
        sums = f.has_checksums
    if not idv.to_arrow(path).equals(idv.to_arrow(open(path, "rb").read())):
        sys.exit("bench_arrow: the zero-copy table differs from the copying one")
    log(f"uncompressed numbers, {key}'s file ({nbytes / MB:.1f} MB, {len(mapped)} columns "
        f"mapped, {'CRC-32s checked' if sums else 'no checksums'}):")
    _fresh, _warm, copy_mapped = memcpy_runs(nbytes, path)

    def batches():
        for _ in idv.record_batch_reader(path):
            pass
    fns = {"copy": copy_mapped, "arrow": lambda: idv.to_arrow(path), "batches": batches,
           "numpy": lambda: idv.read(path, copy=False), "read": lambda: idv.read(path)}
    if sums:
        fns["floor"] = _crc_floor(path)
    secs = race(fns, repeat)
    labels = [("copy", "a copy of the file's bytes out of a new memory map"),
              ("arrow", "idv.to_arrow (views of the map)"),
              ("batches", "idv.record_batch_reader (every batch)"),
              ("numpy", "idv.read(copy=False)"), ("read", "idv.read (copying)")]
    if sums:
        labels.append(("floor", "the floor: map the file, CRC-32 of every block (threads)"))
    for name, label in labels:
        fig(f"zero_copy_{key}_{name}", label, secs[name], nbytes)
    for name, what in (("arrow", "to_arrow"), ("batches", "record_batch_reader"),
                       ("numpy", "read(copy=False)")):
        target(f"zero copy, {key}'s file: {what} / a copy of the file's bytes",
               secs["copy"] / secs[name], 2.0)
    if sums:
        log(f"     (the floor / a copy of the file's bytes: {secs['copy'] / secs['floor']:.2f}x;"
            f" to_arrow / the floor: {secs['floor'] / secs['arrow']:.2f}x)")


def _stream(path):
    import pyarrow as pa
    with idv.open(path) as f:
        return pa.table(f)


if __name__ == "__main__":
    sys.exit(main())
