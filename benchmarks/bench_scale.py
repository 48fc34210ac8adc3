#!/usr/bin/env python3
"""Scale benchmark: the costs that grow with the shape of the data (random rows, many columns,
many files), each as a ratio to pyarrow on the same data, same run.

    python3 benchmarks/bench_scale.py            # 10M rows, 4,000 columns, 1,000 files
    python3 benchmarks/bench_scale.py --quick    # small data (smoke run)
    python3 benchmarks/bench_scale.py --json     # machine-readable results on stdout

The data is written by this script, once, into the git-ignored benchmarks/_data/ (idv's
default write and pyarrow's default Parquet write of the same values). Every figure is the
best of --repeat runs, its contenders' runs interleaved; ratio = the other's time / idv's
(above 1: idv is faster).

  take          1,000 random rows (in random order) of two columns of a 10M-row file:
                ``IdvFile.take`` against ``pyarrow.dataset(parquet).take``, Lance's ``take``
                (when pylance is installed: its own file of the same data) and the floor
                (inflating just the blocks hit, two threads, libdeflate through its C API:
                fixed-width numbers need no more than a view); again with the file written with
                ``rows_per_block=1024``
  wide open     a file of 4,000 float32 columns x 20,000 rows: ``idv.open`` (and close)
                against ``pq.ParquetFile(...).schema_arrow``
  wide column   one column of it: ``idv.read(path, [c])`` against ``pq.read_table(columns=[c])``;
                and with a filter on it (``c > 0.999``, idv's block statistics against
                Parquet's row-group statistics: neither skips random floats): its cost the
                column's, not the file's width
  wide all      all of it: ``idv.read`` against ``pq.read_table``
  many files    1,000 files of 2,000 rows as one ``idv.dataset``, one column read (the dataset
                opened in the timing): against ``pyarrow.dataset.dataset(folder)``'s
                ``to_table(columns=[c])``

The curves: one shape grown while the rest stays put, each point a ratio to pyarrow on the
same data, so that a cost growing with the shape shows as a falling ratio:

  rows          one long Single column of 1M, 10M, 100M rows (bench_read's long column): the
                whole file read, ``idv.read`` against ``pq.read_table`` into numpy
  columns       10, 1,000, 10,000 Single columns of 2,000 rows: every column read
  files         1, 100, 10,000 files of 2,000 rows: one column of the dataset (opened in the
                timing), against ``pyarrow.dataset``
  width         one Vector<Single, W> column, W from 16 to 1M slots, 16M values in all
                (1M rows of 16 down to 16 rows of 1M): ``idv.read`` (rows x W) against
                ``pq.read_table`` of a fixed-size list into the same numpy array

    python3 benchmarks/bench_scale.py --only curves          # just the curves (long: ~20 min)
    python3 benchmarks/bench_scale.py --only take,wide,many   # the figures above
"""
from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import idv  # noqa: E402
import bench_read  # noqa: E402  (timing, options, the machine's description)

TAKE_ROWS = 1000
TAKE_COLUMNS = ["Ratio", "Score"]
SIZES = {   # quick, full
    "long_rows": (200_000, 10_000_000),
    "wide_columns": (400, 4000),
    "wide_rows": (2000, 20_000),
    "files": (50, 1000),
    "file_rows": (2000, 2000),
}


def size(name, quick):
    return SIZES[name][0 if quick else 1]


def _folder(name, quick):
    d = os.path.join(bench_read.DATA, f"scale_{'quick' if quick else 'full'}", name)
    os.makedirs(d, exist_ok=True)
    return d


def _written(path, write, log):
    """`path`, written by write(tmp) once (through a temporary name: an interrupted write
    leaves nothing that looks done)."""
    if not os.path.exists(path):
        log(f"writing {os.path.relpath(path, HERE)} ...")
        tmp = path + ".tmp"
        write(tmp)
        os.replace(tmp, path)
    return path


def _long_columns(rows):
    rng = np.random.default_rng(11)
    return {"Id": np.arange(rows, dtype=np.int32),
            "Ratio": rng.random(rows, dtype=np.float32),
            "Score": rng.integers(-10**6, 10**6, rows, dtype=np.int32),
            "Price": np.round(rng.lognormal(3, 1, rows), 2)}


def long_files(quick, log):
    """{'idv', 'idv_1024', 'parquet', 'lance' (or None)}: the long file in each form."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    d = _folder("long", quick)
    cols = None

    def data():
        nonlocal cols
        if cols is None:
            cols = _long_columns(size("long_rows", quick))
        return cols
    out = {"idv": _written(os.path.join(d, "long.idv"),
                           lambda p: idv.write(p, data()), log),
           "idv_1024": _written(os.path.join(d, "long_1024.idv"),
                                lambda p: idv.write(p, data(), rows_per_block=1024), log),
           "parquet": _written(os.path.join(d, "long.parquet"),
                               lambda p: pq.write_table(pa.table(data()), p), log),
           "lance": None}
    try:
        import lance
    except ImportError:
        return out
    out["lance"] = _written(os.path.join(d, "long.lance"),
                            lambda p: lance.write_dataset(pa.table(data()), p), log)
    return out


def wide_files(quick, log):
    import pyarrow as pa
    import pyarrow.parquet as pq
    d = _folder("wide", quick)
    n, rows = size("wide_columns", quick), size("wide_rows", quick)

    def data():
        rng = np.random.default_rng(5)
        block = rng.random((rows, n), dtype=np.float32)
        return {f"f{i:04d}": np.ascontiguousarray(block[:, i]) for i in range(n)}
    p = _written(os.path.join(d, "wide.idv"), lambda p: idv.write(p, data()), log)
    q = _written(os.path.join(d, "wide.parquet"),
                 lambda p: pq.write_table(pa.table(data()), p), log)
    return p, q, n


def many_files(quick, log, extra=None):
    """(folder of .idv files, folder of .parquet files): the same rows in each; with `extra`
    "text", a Text column too, "key" a key column of the same key values in every file."""
    return small_files(f"many_{extra}" if extra else "many", size("files", quick),
                       size("file_rows", quick), quick, log, extra)


WORDS = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"])


def small_files(name, n, rows, quick, log, extra=None):
    """(folder of `n` .idv files, folder of `n` .parquet files) of `rows` rows each, the same
    rows in each format; with `extra` "text", a Text column of three words a row too, "key"
    a Key<UInt32, 8> column (KeyValues: the words; Parquet: the words, dictionary-encoded)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    di, dp = _folder(f"{name}_idv", quick), _folder(f"{name}_parquet", quick)
    if len(os.listdir(di)) != n or len(os.listdir(dp)) != n:
        log(f"writing {n} small files (each format) ...")
        rng = np.random.default_rng(5)
        for i in range(n):
            cols = _long_columns(rows)
            cols["Id"] = cols["Id"] + i * rows
            if extra == "text":
                cols["Name"] = [" ".join(w) for w in rng.choice(WORDS, (rows, 3)).tolist()]
            if extra == "key":
                keys = rng.integers(0, len(WORDS), rows)
                idv.write(os.path.join(di, f"part-{i:05d}.idv"),
                          dict(cols, Word=(keys + 1).astype(np.uint32)),
                          types={"Word": idv.Key(idv.UInt32, count=len(WORDS))},
                          metadata={"Word": {"KeyValues": WORDS.tolist()}})
                words = pa.DictionaryArray.from_arrays(pa.array(keys, pa.uint32()),
                                                       pa.array(WORDS))
                pq.write_table(pa.table(dict(cols, Word=words)),
                               os.path.join(dp, f"part-{i:05d}.parquet"))
                continue
            idv.write(os.path.join(di, f"part-{i:05d}.idv"), cols)
            pq.write_table(pa.table(cols), os.path.join(dp, f"part-{i:05d}.parquet"))
    return di, dp


# ---------------------------------------------------------------------------------------------
# the floor of take: the blocks hit, inflated (fixed-width numbers need no more than a view)
# ---------------------------------------------------------------------------------------------

def take_floor(f, columns, rows, threads=2):
    """(a run of the floor, its thread pool): the blocks of `columns` of the open file `f` that
    hold `rows`, each inflated once, in `threads` threads."""
    fn = bench_read._DECOMPRESSORS["libdeflate"]      # into a buffer kept per thread
    buf = f._source.buffer           # a benchmark's look inside: the mapping's address
    addr = np.frombuffer(buf, np.uint8).ctypes.data
    pool = ThreadPoolExecutor(threads)

    def run():
        work = []
        for name in columns:
            c = f[name]
            hit = np.unique(rows // c.rows_per_block)
            lk = c.lookup[hit]
            offs, disk, raw = lk["offset"].tolist(), lk["disk"].tolist(), lk["raw"].tolist()
            chunks = np.array_split(np.arange(len(offs)), threads)

            def chunk(ix, offs=offs, disk=disk, raw=raw):
                for i in ix.tolist():
                    fn(buf, addr, offs[i], disk[i], raw[i])
            work += [pool.submit(chunk, ix) for ix in chunks]
        for w in work:
            w.result()
    return run, pool


# ---------------------------------------------------------------------------------------------
# the figures
# ---------------------------------------------------------------------------------------------

def take_figures(files, repeat, quick, log):
    import pyarrow.dataset as pads
    n = size("long_rows", quick)
    rows = np.random.default_rng(3).choice(n, TAKE_ROWS, replace=False)
    pq_ds = pads.dataset(files["parquet"], format="parquet")
    lance_ds = None
    if files["lance"] is not None:
        import lance
        lance_ds = lance.dataset(files["lance"])
    out = {}
    for label, path in (("default", files["idv"]), ("rows_per_block=1024", files["idv_1024"])):
        with idv.open(path) as f:
            got = f.take(rows, TAKE_COLUMNS)
            want = pq_ds.take(rows, columns=TAKE_COLUMNS)
            for c in TAKE_COLUMNS:
                if not np.array_equal(got[c], want[c].to_numpy()):
                    sys.exit(f"bench_scale: take of {c} differs from pyarrow's")
            floor, pool = take_floor(f, TAKE_COLUMNS, rows)
            fns = {"idv": lambda: f.take(rows, TAKE_COLUMNS),
                   "pyarrow": lambda: pq_ds.take(rows, columns=TAKE_COLUMNS),
                   "floor": floor}
            if lance_ds is not None:
                fns["lance"] = lambda: lance_ds.take(rows, columns=TAKE_COLUMNS)
            log(f"racing take ({label}): {', '.join(fns)} ...")
            best = bench_read.race(fns, repeat)
            pool.shutdown()
            rpb = f[TAKE_COLUMNS[0]].rows_per_block
            blocks = f[TAKE_COLUMNS[0]].num_blocks
        out[label] = {"rows_per_block": rpb, "blocks": blocks,
                      "blocks_hit": int(len(np.unique(rows // rpb))),
                      "file_bytes": os.path.getsize(path),
                      "seconds": best,
                      "ratios": {k: best[k] / best["idv"] for k in best if k != "idv"}}
    return out


def wide_figures(paths, repeat, log):
    import pyarrow.parquet as pq
    p, q, n = paths
    one = "f0123" if n > 123 else "f0001"

    def idv_open():
        idv.open(p).close()

    def pq_schema():
        return pq.ParquetFile(q).schema_arrow
    log("racing the wide file: open, one column, all ...")
    best = bench_read.race({
        "idv_open": idv_open, "pq_schema": pq_schema,
        "idv_column": lambda: idv.read(p, [one]),
        "pq_column": lambda: pq.read_table(q, columns=[one]),
        "idv_filtered": lambda: idv.read(p, [one], filter=f"{one} > 0.999"),
        "pq_filtered": lambda: pq.read_table(q, columns=[one], filters=[(one, ">", 0.999)]),
    }, repeat)
    best.update(bench_read.race({"idv_all": lambda: idv.read(p),
                                 "pq_all": lambda: pq.read_table(q)}, max(1, repeat // 2)))
    return {"columns": n, "seconds": best,
            "ratios": {"open": best["pq_schema"] / best["idv_open"],
                       "one column": best["pq_column"] / best["idv_column"],
                       "one column filtered": best["pq_filtered"] / best["idv_filtered"],
                       "all": best["pq_all"] / best["idv_all"]},
            "per_column_open_us": 1e6 * best["idv_open"] / n}


def many_figures(folders, repeat, log):
    import pyarrow.dataset as pads
    di, dp = folders
    col = "Price"

    def idv_read():
        with idv.dataset(di) as ds:
            return ds.read([col])[col]

    def pa_read():
        return pads.dataset(dp, format="parquet").to_table(columns=[col])
    if not np.array_equal(idv_read(), pa_read()[col].to_numpy()):
        sys.exit("bench_scale: the datasets' columns differ")
    log(f"racing the dataset of {len(os.listdir(di))} files ...")
    best = bench_read.race({"idv": idv_read, "pyarrow": pa_read}, repeat)
    return {"files": len(os.listdir(di)), "seconds": best,
            "ratio": best["pyarrow"] / best["idv"], "forms": many_forms(folders, repeat, log)}


def many_forms(folders, repeat, log):
    """{form: {seconds, ratio}}: every column of the dataset as an Arrow table (to_arrow, and
    the Arrow C stream that pa.table, polars and DuckDB read) and as a pandas DataFrame, each
    against pyarrow.dataset's table (and its to_pandas)."""
    import pyarrow as pa
    import pyarrow.dataset as pads
    di, dp = folders

    def table():
        return pads.dataset(dp, format="parquet").to_table()

    def ours(form):
        with idv.dataset(di) as ds:
            return {"to_arrow": ds.to_arrow, "stream": lambda: pa.table(ds),
                    "to_pandas": ds.to_pandas}[form]()
    theirs = {"to_arrow": table, "stream": table, "to_pandas": lambda: table().to_pandas()}
    def plain(t):       # keys (dictionaries, categories) as their values: the forms compare
        if form == "to_pandas":
            return t.astype({n: str for n in t.columns if t[n].dtype == "category"})
        return pa.table([c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c
                         for c in t.combine_chunks().columns], names=t.column_names)
    out = {}
    for form, other in theirs.items():
        got, want = ours(form), other()
        if not plain(got).equals(plain(want)):
            sys.exit(f"bench_scale: the datasets' {form} differ")
        log(f"racing the dataset's {form} ...")
        best = bench_read.race({"idv": lambda form=form: ours(form), "pyarrow": other}, repeat)
        out[form] = {"seconds": best, "ratio": best["pyarrow"] / best["idv"]}
    return out


# ---------------------------------------------------------------------------------------------
# the curves: one shape grown, a ratio to pyarrow at each point
# ---------------------------------------------------------------------------------------------

CURVES = {   # quick, full
    "rows": ((100_000,), (1_000_000, 10_000_000, 100_000_000)),
    "columns": ((10, 100), (10, 1000, 10_000)),
    "files": ((1, 10), (1, 100, 10_000)),
    "width": ((16, 1024), (16, 256, 4096, 65_536, 1 << 20)),
}
CURVE_ROWS = 2000            # rows of each file of the columns and files curves
WIDTH_VALUES = (1 << 20, 1 << 24)      # values of the width curve's column: quick, full


def _columns_files(n, log, quick):
    import pyarrow as pa
    import pyarrow.parquet as pq
    d = _folder("curve_columns", quick)

    def data():
        rng = np.random.default_rng(n)
        block = np.round(rng.random((CURVE_ROWS, n), dtype=np.float32) * 100, 1)
        return {f"c{i:05d}": np.ascontiguousarray(block[:, i]) for i in range(n)}
    return (_written(os.path.join(d, f"{n}.idv"), lambda p: idv.write(p, data()), log),
            _written(os.path.join(d, f"{n}.parquet"),
                     lambda p: pq.write_table(pa.table(data()), p), log))


def _width_files(w, log, quick):
    import pyarrow as pa
    import pyarrow.parquet as pq
    d = _folder("curve_width", quick)
    rows = WIDTH_VALUES[0 if quick else 1] // w

    def data():
        rng = np.random.default_rng(w)
        return np.round(rng.random((rows, w), dtype=np.float32) * 100, 1)

    def parquet(p):
        arr = pa.FixedSizeListArray.from_arrays(pa.array(data().reshape(-1)), w)
        pq.write_table(pa.table({"V": arr}), p)
    return (_written(os.path.join(d, f"{w}.idv"), lambda p: idv.write(p, {"V": data()}), log),
            _written(os.path.join(d, f"{w}.parquet"), parquet, log))


def _read_parquet(q):
    import pyarrow.parquet as pq
    t = pq.read_table(q)
    return [c.to_numpy() for c in t.columns]


def _read_vectors(q, w):
    import pyarrow.parquet as pq
    col = pq.read_table(q).column("V").combine_chunks()
    return col.flatten().to_numpy().reshape(-1, w)


def _point(fns, same, repeat):
    """Best seconds of idv's and pyarrow's runs, interleaved, after checking that both give
    the same values."""
    got, want = fns["idv"](), fns["pyarrow"]()
    if not same(got, want):
        sys.exit("bench_scale: idv's and pyarrow's values differ")
    best = bench_read.race(fns, repeat)
    return {"seconds": best, "ratio": best["pyarrow"] / best["idv"]}


def curve_figures(quick, repeat, log):
    """{curve: [{shape, seconds, ratio}]}: each curve's points, smallest shape first."""
    out = {}
    for name, point in (("rows", _rows_point), ("columns", _columns_point),
                        ("files", _files_point), ("width", _width_point)):
        out[name] = []
        for shape in CURVES[name][0 if quick else 1]:
            log(f"curve {name}: {shape:,} ...")
            out[name].append({"shape": shape, **point(shape, quick, repeat, log)})
    return out


def _rows_point(rows, quick, repeat, log):
    p, q = bench_read.long_column(rows, log)
    return _point({"idv": lambda: idv.read(p)["Price"], "pyarrow": lambda: _read_parquet(q)[0]},
                  np.array_equal, repeat)


def _columns_point(n, quick, repeat, log):
    p, q = _columns_files(n, log, quick)
    return _point({"idv": lambda: list(idv.read(p).values()),
                   "pyarrow": lambda: _read_parquet(q)},
                  lambda a, b: all(np.array_equal(x, y) for x, y in zip(a, b)), repeat)


def _files_point(n, quick, repeat, log):
    import pyarrow.dataset as pads
    di, dp = small_files(f"curve_files_{n}", n, CURVE_ROWS, quick, log)

    def idv_read():
        with idv.dataset(di) as ds:
            return ds.read(["Price"])["Price"]
    return _point({"idv": idv_read, "pyarrow": lambda: pads.dataset(
        dp, format="parquet").to_table(columns=["Price"])["Price"].to_numpy()},
                  np.array_equal, max(1, repeat // 2) if n >= 1000 else repeat)


def _width_point(w, quick, repeat, log):
    p, q = _width_files(w, log, quick)
    return _point({"idv": lambda: idv.read(p)["V"], "pyarrow": lambda: _read_vectors(q, w)},
                  np.array_equal, repeat)


SECTIONS = ("take", "wide", "many", "curves")
_UNITS = {"rows": "rows", "columns": "columns", "files": "files", "width": "slots"}


def show_curves(curves):
    for name, points in curves.items():
        cells = ", ".join(f"{p['shape']:,} {_UNITS[name]}: {p['seconds']['idv'] * 1e3:.1f} ms "
                          f"({p['ratio']:.2f}x)" for p in points)
        print(f"curve {name}: {cells}")


def main(argv=None):
    ap = bench_read.options(__doc__.split("\n")[0])
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help=f"sections to run, comma-separated, of {', '.join(SECTIONS)} "
                         f"(default: all)")
    a = ap.parse_args(argv)
    only = a.only.split(",")
    unknown = [x for x in only if x not in SECTIONS]
    if unknown:
        ap.error(f"unknown section(s) {unknown}; known: {', '.join(SECTIONS)}")
    repeat, log = bench_read.runs_and_log(a, 7, quick=2)
    report = {"quick": a.quick, "repeat": repeat, "machine": bench_read.machine(),
              "loadavg_start": os.getloadavg()}
    if "take" in only:
        report["take"] = take_figures(long_files(a.quick, log), repeat, a.quick, log)
    if "wide" in only:
        report["wide"] = wide_figures(wide_files(a.quick, log), repeat, log)
    if "many" in only:
        report["many_files"] = many_figures(many_files(a.quick, log), repeat, log)
        for extra in ("text", "key"):
            report["many_files"][f"forms_{extra}"] = many_forms(
                many_files(a.quick, log, extra), repeat, log)
    if "curves" in only:
        report["curves"] = curve_figures(a.quick, repeat, log)
    report["loadavg_end"] = os.getloadavg()
    if a.json:
        print(json.dumps(report, indent=1))
        return
    print(f"best of {repeat}, ratio = the other's time / idv's; load average "
          f"{report['loadavg_start'][0]:.1f} at the start, {report['loadavg_end'][0]:.1f} at "
          f"the end")
    for label, r in report.get("take", {}).items():
        s = r["seconds"]
        others = ", ".join(f"{k} {s[k] * 1e3:.1f} ms ({v:.2f}x)" for k, v in r["ratios"].items())
        print(f"take {TAKE_ROWS} rows ({label}: {r['blocks_hit']} of {r['blocks']} blocks hit, "
              f"file {r['file_bytes'] / 1e6:.1f} MB): idv {s['idv'] * 1e3:.1f} ms; {others}")
    if "wide" in report:
        w = report["wide"]
        s = w["seconds"]
        print(f"{w['columns']} columns: open {s['idv_open'] * 1e3:.1f} ms "
              f"({w['ratios']['open']:.2f}x; {w['per_column_open_us']:.1f} us a column), "
              f"one column {s['idv_column'] * 1e3:.1f} ms ({w['ratios']['one column']:.2f}x), "
              f"filtered {s['idv_filtered'] * 1e3:.1f} ms "
              f"({w['ratios']['one column filtered']:.2f}x), "
              f"all {s['idv_all'] * 1e3:.0f} ms ({w['ratios']['all']:.2f}x)")
    if "many_files" in report:
        m = report["many_files"]
        print(f"{m['files']} files, one column: idv {m['seconds']['idv'] * 1e3:.0f} ms "
              f"({m['ratio']:.2f}x pyarrow.dataset)")
        for kind, what in (("forms", "every column"), ("forms_text", "with text"),
                           ("forms_key", "with a key")):
            for form, r in m[kind].items():
                print(f"{m['files']} files, {what}, {form}: idv "
                      f"{r['seconds']['idv'] * 1e3:.0f} ms ({r['ratio']:.2f}x)")
    if "curves" in report:
        show_curves(report["curves"])


if __name__ == "__main__":
    main()
