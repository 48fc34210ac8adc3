#!/usr/bin/env python3
"""PyTorch loaders benchmark: idv.torch's datasets in a DataLoader against a pyarrow Parquet
IterableDataset and an in-memory numpy array, same run.

    python3 benchmarks/bench_torch.py            # 2M rows: an Int64 id and a Vector<Single, 16>
    python3 benchmarks/bench_torch.py --quick    # 100k rows
    python3 benchmarks/bench_torch.py --json     # machine-readable results on stdout

The rows are written once (into the git-ignored benchmarks/_data/) by idv.write (8,192 rows
per block, DEFLATE) and, from the same Arrow table, by pyarrow.parquet (row groups of 65,536
rows, pyarrow's default compression). Figures, each an epoch of a DataLoader with 2 workers
started by fork, batches of 4,096 rows as dicts of tensors, best of --repeat, interleaved:

  iterable   idv.torch.IdvIterableDataset (not shuffled) against a Parquet IterableDataset
             whose workers split the row groups between them (each reads its row groups with
             pyarrow and cuts them into batches of 4,096 rows)
  map        idv.torch.IdvMapDataset read by batches of shuffled indices (a BatchSampler over a
             RandomSampler, ``ds[indices]``) against the same sampler over numpy arrays held in
             memory (the rows already decoded)
"""
from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import idv  # noqa: E402
import bench_read  # noqa: E402  (options, timing, machine description)

import torch  # noqa: E402
from torch.utils.data import (BatchSampler, DataLoader, Dataset, IterableDataset,  # noqa: E402
                              RandomSampler, get_worker_info)
import idv.torch  # noqa: E402

BATCH = 4096
WORKERS = 2
ROW_GROUP = 65_536
WIDTH = 16


def ensure_data(quick, log):
    """(.idv path, Parquet path) of the rows, written once."""
    import pyarrow.parquet as pq
    rows = 100_000 if quick else 2_000_000
    base = os.path.join(bench_read.DATA, f"torch_{'quick' if quick else 'full'}")
    paths = base + ".idv", base + ".parquet"
    if not all(os.path.exists(p) for p in paths):
        os.makedirs(bench_read.DATA, exist_ok=True)
        log(f"writing {rows} rows ...")
        rng = np.random.default_rng(0)
        idv.write(paths[0], {"id": np.arange(rows, dtype=np.int64),
                             "vec": rng.random((rows, WIDTH), np.float32)})
        pq.write_table(idv.to_arrow(paths[0]), paths[1], row_group_size=ROW_GROUP)
    return paths


class ParquetBatches(IterableDataset):
    """A plain Parquet IterableDataset: the row groups split between the workers in runs,
    each read by pyarrow and cut into batches of dicts of tensors."""

    def __init__(self, path, batch_size):
        self.path = path
        self.batch_size = batch_size

    def __iter__(self):
        import pyarrow.parquet as pq
        f = pq.ParquetFile(self.path)
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        groups = np.array_split(np.arange(f.num_row_groups), workers)[worker]
        for g in groups:
            for b in f.read_row_group(int(g), columns=["id", "vec"]).to_batches(self.batch_size):
                vec = b.column(1).values.to_numpy().reshape(-1, WIDTH)
                yield {"id": torch.from_numpy(b.column(0).to_numpy()),
                       "vec": torch.from_numpy(vec)}


class NumpyRows(Dataset):
    """The same rows held in memory: a batch of indices is a fancy index of the arrays."""

    def __init__(self, path):
        got = idv.read(path)
        self.id, self.vec = got["id"], got["vec"]

    def __len__(self):
        return len(self.id)

    def __getitem__(self, rows):
        return {"id": torch.from_numpy(self.id[rows]), "vec": torch.from_numpy(self.vec[rows])}


def epoch(loader, rows):
    """One epoch's batches drained; checks that every row came."""
    n = 0
    for batch in loader:
        n += len(batch["id"])
    assert n == rows, (n, rows)


def loader(ds, **kwargs):
    return DataLoader(ds, batch_size=None, num_workers=WORKERS, multiprocessing_context="fork",
                      **kwargs)


def main(argv=None):
    a = bench_read.options(__doc__.split("\n")[0]).parse_args(argv)
    repeat, log = bench_read.runs_and_log(a, 3)
    warnings.simplefilter("ignore", DeprecationWarning)    # fork with threads: the point here
    # pyarrow's arrays are read-only: torch shares them all the same (and says so)
    warnings.filterwarnings("ignore", "The given NumPy array is not writable")
    idv_path, pq_path = ensure_data(a.quick, lambda m: print(m, file=sys.stderr))
    with idv.open(idv_path) as f:
        rows = f.num_rows
    iterable = {
        "idv": loader(idv.torch.IdvIterableDataset(idv_path, ["id", "vec"], batch_size=BATCH)),
        "parquet": loader(ParquetBatches(pq_path, BATCH)),
    }
    t = bench_read.race({k: lambda lo=lo: epoch(lo, rows) for k, lo in iterable.items()},
                        repeat)
    mapped = {"idv": idv.torch.IdvMapDataset(idv_path, ["id", "vec"]), "numpy": NumpyRows(idv_path)}
    samplers = {k: BatchSampler(RandomSampler(ds), BATCH, drop_last=False)
                for k, ds in mapped.items()}
    m = bench_read.race({k: lambda k=k: epoch(loader(mapped[k], sampler=samplers[k]), rows)
                         for k in mapped}, repeat)
    figures = {"idv_iterable_rows_s": rows / t["idv"],
               "parquet_iterable_rows_s": rows / t["parquet"],
               "idv_map_rows_s": rows / m["idv"], "numpy_map_rows_s": rows / m["numpy"]}
    figures["iterable_vs_parquet"] = t["parquet"] / t["idv"]
    figures["map_vs_numpy"] = m["numpy"] / m["idv"]
    report = {"quick": a.quick, "repeat": repeat, "machine": bench_read.machine(), "rows": rows,
              "batch": BATCH, "workers": WORKERS, "figures": figures}
    if a.json:
        print(json.dumps(report, indent=1))
        return
    print(f"{rows} rows (id, Vector<Single, {WIDTH}>), batches of {BATCH}, {WORKERS} fork "
          f"workers, best of {repeat}:")
    print(f"  IdvIterableDataset      {figures['idv_iterable_rows_s'] / 1e6:6.2f} M rows/s "
          f"({figures['iterable_vs_parquet']:.2f}x the Parquet IterableDataset's)")
    print(f"  Parquet IterableDataset {figures['parquet_iterable_rows_s'] / 1e6:6.2f} M rows/s")
    print(f"  IdvMapDataset, shuffled {figures['idv_map_rows_s'] / 1e6:6.2f} M rows/s "
          f"({figures['map_vs_numpy']:.2f}x numpy arrays in memory)")
    print(f"  numpy arrays, shuffled  {figures['numpy_map_rows_s'] / 1e6:6.2f} M rows/s")


if __name__ == "__main__":
    main()
