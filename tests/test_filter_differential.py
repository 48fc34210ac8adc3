"""Filters against an independent reference: every read path that takes a filter keeps exactly
the rows filter_reference.py says (exact comparisons, docs/filters.md), with and without block
statistics, over files of several blocks; the engines' own query languages (polars, DuckDB,
Spark) give through idv the rows the same engine gives over the same data in memory.

Why: statistics and pushdown are optimisations, so the rows a filter keeps must depend on
neither, nor on the door the filter came in by (tuples, a string, a pyarrow expression).

Run:  pytest tests/test_filter_differential.py      (derandomized: about 30 s on 2 cores)
      IDV_FILTER_EXAMPLES=500 pytest tests/test_filter_differential.py
          (random data, that many examples per property: minutes)
      pytest tests/test_filter_differential.py -m "not slow"   (all but the Spark test: a
          session start and some 20 jobs; it skips without pyspark or Java)

The random examples run once per module and every path is checked on each; a difference does
not stop the search. Differences are reported grouped by kind (form, column type, operator,
literal type, outcome), each narrowed to one comparison of its predicate when one alone
differs, with the data it was seen on.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import importlib.util
import io
import itertools
import json
import math
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("hypothesis")
pytest.importorskip("pyarrow")
import pyarrow.compute as pc  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import idv  # noqa: E402
from filter_reference import (EPOCH_TICKS, KINDS, MAX_TICKS, ROW, TICKS_PER_MINUTE,  # noqa
                              TS_MAX, TS_MIN, Col, Refused, Table, cmp, expected_rows,
                              predicates, tables, to_dnf, to_expression, to_polars, to_sql,
                              to_string, write_table)

EXAMPLES = int(os.environ.get("IDV_FILTER_EXAMPLES", "0") or 0)
PREDICATES_PER_FILE = 4


def _settings(default_examples):
    """Derandomized by default (a fixed, bounded run); random with IDV_FILTER_EXAMPLES. No
    shrinking: the examples only collect differences (narrowed by hand, see mismatches)."""
    return settings(max_examples=EXAMPLES or default_examples, deadline=None,
                    derandomize=not EXAMPLES, database=None,
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=list(HealthCheck))


# ---- files --------------------------------------------------------------------------------

class Files:
    """One table written twice, with statistics (rid = row) and without (rid = n + row)."""

    def __init__(self, directory, table: Table, rows_per_block: int):
        self.table = table
        self.stats = Path(directory) / "stats.idv"
        self.plain = Path(directory) / "plain.idv"
        write_table(self.stats, table, statistics=True, rows_per_block=rows_per_block)
        write_table(self.plain, table, statistics=False, rows_per_block=rows_per_block,
                    offset=table.n)

    def each(self):
        """(label, path, offset of its rid) for both files."""
        return [("statistics", self.stats, 0), ("no statistics", self.plain, self.table.n)]


@contextlib.contextmanager
def written(table: Table, rows_per_block: int):
    d = tempfile.mkdtemp(prefix="idv-filter-")
    try:
        yield Files(d, table, rows_per_block)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def kinds_of(table: Table) -> dict:
    return {name: c.kind for name, c in table.columns.items()}


FORMS = ("tuples", "string", "col_string", "expression")


def forms_of(pred, table: Table, wanted=FORMS):
    """{form: filter} for each wanted form the predicate has."""
    kinds = kinds_of(table)
    make = {"tuples": lambda: to_dnf(pred), "string": lambda: to_string(pred, kinds),
            "col_string": lambda: to_string(pred, kinds, force_col=True),
            "expression": lambda: to_expression(pred, kinds)}
    out = {form: make[form]() for form in wanted}
    return {k: v for k, v in out.items() if v is not None}


def _us_exact(table: Table) -> Table:
    """The table with its times on whole microseconds. The Arrow dataset (datetime='us',
    safe=True) refuses to floor finer ticks when it converts a column: a documented refusal,
    not a filter's answer."""
    def whole(v):
        w = (v // 10) * 10
        return w + 10 if w < TS_MIN else w
    cols = {}
    for name, c in table.columns.items():
        if c.kind in ("DT", "TS"):
            c = Col(c.kind, [whole(v) for v in c.values])
        elif c.kind == "DZ":
            c = Col(c.kind, [(whole(u), m) for u, m in c.values])
        cols[name] = c
    return Table(table.n, cols)


# ---- the paths ----------------------------------------------------------------------------

def _ints(values) -> list[int]:
    return [int(v) for v in values]


def path_read(p, f, offset):
    return _ints(idv.read(p, [ROW], filter=f)[ROW])


def path_read_all_columns(p, f, offset):
    """Every column, checked against the unfiltered read at the rows kept."""
    whole = idv.read(p)
    got = idv.read(p, filter=f)
    rows = _ints(got[ROW])
    at = np.array([r - offset for r in rows], dtype=np.int64)
    for name, values in whole.items():
        want, have = values[at], got[name]
        if want.dtype == object:
            assert list(want) == list(have), f"column {name!r} holds other values"
        else:
            assert want.tobytes() == np.ascontiguousarray(have).tobytes(), \
                f"column {name!r} holds other values"
    return rows


def path_open_read(p, f, offset):
    with idv.open(p) as file:
        return _ints(file.read([ROW], filter=f)[ROW])


def path_open_to_arrow(p, f, offset):
    with idv.open(p) as file:
        return file.to_arrow([ROW], filter=f).column(ROW).to_pylist()


def path_to_arrow(p, f, offset):
    return idv.to_arrow(p, [ROW], filter=f).column(ROW).to_pylist()


def path_record_batch_reader(p, f, offset):
    return idv.record_batch_reader(p, [ROW], filter=f, batch_size=2).read_all() \
        .column(ROW).to_pylist()


def path_iter_batches(p, f, offset):
    with idv.open(p) as file:
        return [v for b in file.iter_batches([ROW], batch_size=3, filter=f)
                for v in b.column(ROW).to_pylist()]


def path_read_pandas(p, f, offset):
    df = idv.read_pandas(p, [ROW], filter=f)
    assert list(df.index) == list(range(len(df))), "a filtered frame is indexed from 0"
    return _ints(df[ROW])


def path_open_to_pandas(p, f, offset):
    with idv.open(p) as file:
        return _ints(file.to_pandas([ROW], filter=f)[ROW])


def path_arrow_dataset_to_table(p, f, offset):
    return idv.arrow_dataset(p).to_table(columns=[ROW], filter=f).column(ROW).to_pylist()


def path_arrow_dataset_count_rows(p, f, offset):
    return idv.arrow_dataset(p).count_rows(filter=f)


class CliError(Exception):
    def __init__(self, rc, message):
        super().__init__(f"exit code {rc}: {message.strip()}")
        self.rc, self.message = rc, message


def path_cli(p, f, offset):
    """``idv cat FILE --where F`` in this process, its JSON lines read back."""
    from idv.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["cat", str(p), "--where", f, "--columns", ROW, "--format", "jsonl"])
    if rc:
        raise CliError(rc, err.getvalue())
    return [json.loads(line)[ROW] for line in out.getvalue().splitlines() if line.strip()]


def path_dask(p, f, offset):
    import idv.dask
    df = idv.dask.read_idv(str(p), columns=[ROW], filter=f).compute(scheduler="synchronous")
    rows = _ints(df[ROW])
    assert [int(i) for i in df.index] == [r - offset for r in rows], \
        "partitions are indexed by row number"
    return rows


def path_torch_iterable(p, f, offset):
    import idv.torch
    ds = idv.torch.IdvIterableDataset(str(p), [ROW], batch_size=5, filter=f)
    return [int(v) for batch in ds for v in batch[ROW]]


def path_torch_map(p, f, offset):
    import idv.torch
    ds = idv.torch.IdvMapDataset(str(p), [ROW], filter=f)
    return _ints(ds[list(range(len(ds)))][ROW]) if len(ds) else []


def path_huggingface(p, f, offset):
    import idv.huggingface
    return _ints(idv.huggingface.load(str(p), [ROW], filter=f)[ROW])


def dataset_read(paths, f):
    with idv.dataset([str(p) for p in paths]) as ds:
        return _ints(ds.read([ROW], filter=f)[ROW])


def dataset_to_arrow(paths, f):
    with idv.dataset([str(p) for p in paths]) as ds:
        return ds.to_arrow([ROW], filter=f).column(ROW).to_pylist()


# name -> (function, the forms it takes, how many of an example's predicates it checks:
# the slower paths fewer)
SINGLE_PATHS = {
    "read": (path_read, FORMS, 4),
    "read_all_columns": (path_read_all_columns, FORMS, 2),
    "open.read": (path_open_read, FORMS, 4),
    "open.to_arrow": (path_open_to_arrow, ("tuples", "string"), 4),
    "to_arrow": (path_to_arrow, FORMS, 4),
    "record_batch_reader": (path_record_batch_reader, ("tuples", "string", "expression"), 4),
    "iter_batches": (path_iter_batches, ("tuples", "string"), 4),
    "read_pandas": (path_read_pandas, FORMS, 4),
    "open.to_pandas": (path_open_to_pandas, ("tuples", "string"), 4),
    "arrow_dataset.to_table": (path_arrow_dataset_to_table, ("expression",), 4),
    "arrow_dataset.count_rows": (path_arrow_dataset_count_rows, ("expression",), 4),
    "cli": (path_cli, ("string", "col_string"), 2),
    "dask": (path_dask, ("tuples", "string", "expression"), 1),
    "torch.IdvIterableDataset": (path_torch_iterable, ("tuples", "string", "expression"), 2),
    "torch.IdvMapDataset": (path_torch_map, ("tuples", "string", "expression"), 2),
    "huggingface.load": (path_huggingface, ("tuples", "string", "expression"), 1),
}
DATASET_PATHS = {       # over both files: [with statistics, without]
    "dataset.read": (dataset_read, FORMS, 4),
    "dataset.to_arrow": (dataset_to_arrow, FORMS, 4),
}
PATHS = list(SINGLE_PATHS) + list(DATASET_PATHS)
NEEDS = {"torch.IdvIterableDataset": "torch", "torch.IdvMapDataset": "torch",
         "huggingface.load": "datasets"}     # the extra a path's reader is imported with


def _missing(name):
    """The package path `name` needs that is not installed (None: none)."""
    needed = NEEDS.get(name)
    return needed if needed and importlib.util.find_spec(needed) is None else None
ALL_FORMS_PATHS = ("read",)     # every form; the other paths one form a predicate, in turn


def _spec(name):
    return SINGLE_PATHS.get(name) or DATASET_PATHS[name]


def run_path(name, files: Files, f):
    """[(label, rows or count or the exception raised)] for one filter through one path."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", idv.IdvWarning)
        if name in DATASET_PATHS:
            runs = [("stats+plain", lambda: DATASET_PATHS[name][0]([files.stats, files.plain],
                                                                    f))]
        else:
            fn = SINGLE_PATHS[name][0]
            runs = [(label, lambda p=p, o=o: fn(p, f, o)) for label, p, o in files.each()]
        for label, run in runs:
            try:
                out.append((label, run()))
            except Exception as e:      # reported as a difference, with its type and message
                out.append((label, e))
    return out


def want_for(name, files: Files, rows):
    """What a path should give for the reference's rows, per file."""
    n = files.table.n
    if name in DATASET_PATHS:
        return {"stats+plain": rows + [n + r for r in rows]}
    if name == "arrow_dataset.count_rows":
        return {"statistics": len(rows), "no statistics": len(rows)}
    return {"statistics": list(rows), "no statistics": [n + r for r in rows]}


def _pyarrow_in_memory(name, p, f):
    """What pyarrow's own filter gives over the Arrow dataset's table in memory (the rows'
    ids, or their count), or the exception pyarrow raises: an expression is pyarrow's, so
    its rules are the Arrow dataset's, which pushdown and statistics must not change."""
    whole = idv.arrow_dataset(p).to_table()
    try:
        kept = whole.filter(f)
    except Exception as e:      # noqa: BLE001 - the answer to match
        return e
    return kept.num_rows if name.endswith("count_rows") else kept.column(ROW).to_pylist()


def _check_arrow(name, files: Files, f, exact):
    """[(label, expected, got)] where the Arrow dataset's answer is not pyarrow's in memory
    (both raising counts as agreeing). Where pyarrow refuses a value its own cast of the
    column cannot hold (ArrowInvalid: a UInt64 beyond int64 compared with an int, a time
    beyond nanoseconds' years with a nanosecond timestamp), a comparison idv takes is
    answered exactly, `exact` (per file: the reference's rows or count), with or without
    statistics alike."""
    import pyarrow as pa
    out = []
    for (label, got), (_, p, _) in zip(run_path(name, files, f), files.each()):
        want = _pyarrow_in_memory(name, p, f)
        if isinstance(want, Exception) and isinstance(got, Exception):
            continue
        if isinstance(want, pa.ArrowInvalid) and got == exact[label]:
            continue
        if isinstance(got, Exception) or isinstance(want, Exception) or got != want:
            out.append((label, want, got))
    return out


def _check(name, files: Files, pred, f):
    """[(label, expected, got)] where one filter through one path differs from the
    reference (the Arrow dataset: from pyarrow's own answer over the same data)."""
    table = files.table
    try:
        rows = expected_rows(table.columns, pred, table.n)
    except Refused as e:       # the strategies and cases make valid filters only
        raise AssertionError(f"harness: the reference refuses {pred!r}: {e}")
    want = want_for(name, files, rows)
    if name.startswith("arrow_dataset"):
        return _check_arrow(name, files, f, want)
    return [(label, want[label], got) for label, got in run_path(name, files, f)
            if isinstance(got, Exception) or got != want[label]]


def _atoms(pred):
    out, stack = [], [pred]
    while stack:
        p = stack.pop()
        if p[0] in ("cmp", "isnull", "notnull"):
            out.append(p)
        elif p[0] == "not":
            stack.append(p[1])
        else:
            stack.extend(reversed(p[1]))
    return out


def _signature(form, pred, table, got):
    """What a difference is about, to group the examples of one difference."""
    outcome = type(got).__name__ if isinstance(got, Exception) else "rows"
    if pred[0] == "cmp":
        lits = pred[3] if pred[2] in ("in", "not in") else [pred[3]]
        types = "/".join(sorted({type(x).__name__ for x in lits})) or "empty list"
        return (form, table.columns[pred[1]].kind, pred[2], types, outcome)
    if pred[0] in ("isnull", "notnull"):
        return (form, table.columns[pred[1]].kind, pred[0], "", outcome)
    return (form, "compound", "", "", outcome)


def _show(got):
    return f"{type(got).__name__}: {got}" if isinstance(got, Exception) else got


def mismatches(name, files: Files, pred, forms):
    """[(signature, text)]: each difference between a path and the reference for one
    predicate in the given forms, narrowed to a single comparison of the predicate when one
    alone already differs."""
    table = files.table
    out = []
    for form, f in forms.items():
        found = _check(name, files, pred, f)
        if not found:
            continue
        shown_pred, shown_f = pred, f
        atoms = _atoms(pred)
        for atom in atoms if len(atoms) > 1 else []:
            g = forms_of(atom, table, (form,)).get(form)
            narrowed = g is not None and _check(name, files, atom, g)
            if narrowed:
                found, shown_pred, shown_f = narrowed, atom, g
                break
        for label, want, got in found:
            out.append((_signature(form, shown_pred, table, got),
                        f"{name} [{form}, {label}] filter={shown_f!r}\n"
                        f"    expected {want}\n    got      {_show(got)}"))
    return out


def describe(table: Table) -> str:
    lines = [f"{table.n} rows"]
    for name, c in table.columns.items():
        extra = f" KeyValues={c.key_values!r} ({c.key_raw})" if c.kind == "KEY" else ""
        lines.append(f"    {name!r} {c.kind}{extra}: {c.values!r}")
    return "\n".join(lines)


def report(problems):
    """One example of each kind of difference, and how often it was seen."""
    groups = {}
    for sig, text, data in problems:
        groups.setdefault(sig, [0, text, data])[0] += 1
    lines = [f"{len(groups)} kinds of difference in {len(problems)} checks:"]
    for sig, (count, text, data) in groups.items():
        lines.append(f"- {' '.join(x for x in sig if x)} ({count}x), e.g.:\n  {text}\n"
                     f"  data: {data}")
    return "\n".join(lines)


# ---- the property test: every path against the reference ---------------------------------

@st.composite
def files_and_predicates(draw, kinds=KINDS):
    table = draw(tables(kinds))
    rows_per_block = draw(st.integers(1, 6))
    preds = [draw(predicates(table)) for _ in range(PREDICATES_PER_FILE)]
    return table, rows_per_block, preds


@pytest.fixture(scope="module")
def sweep():
    """Random typed data (written with and without statistics) and predicates, each checked
    through every path: {path: [(signature, text, data)]}."""
    problems = {name: [] for name in PATHS}
    turn = itertools.count()

    @_settings(14)
    @given(case=files_and_predicates())
    def run(case):
        table, rows_per_block, preds = case
        us = _us_exact(table)
        with contextlib.ExitStack() as stack:
            files = stack.enter_context(written(table, rows_per_block))
            us_files = files if us == table else stack.enter_context(written(us, rows_per_block))
            for name in [n for n in PATHS if not _missing(n)]:
                fs = us_files if name.startswith("arrow_dataset") else files
                _, takes, count = _spec(name)
                for pred in preds[:count]:
                    forms = forms_of(pred, fs.table, takes)
                    if forms and name not in ALL_FORMS_PATHS:
                        form = list(forms)[next(turn) % len(forms)]
                        forms = {form: forms[form]}
                    problems[name].extend(
                        (sig, f"rows_per_block={rows_per_block} {text}", describe(fs.table))
                        for sig, text in mismatches(name, fs, pred, forms))
    run()
    return problems


@pytest.mark.parametrize("name", PATHS)
def test_every_path_keeps_the_reference_rows(sweep, name):
    """Each path, in the forms it takes, with and without statistics, keeps exactly the rows
    of the reference on random data and predicates."""
    if _missing(name):
        pytest.skip(f"{name} needs {_missing(name)}, which is not installed")
    assert not sweep[name], report(sweep[name])


# ---- the engines: pushdown never changes their answer -------------------------------------

def _outcome(fn):
    try:
        return fn()
    except Exception as e:
        return ("error", type(e).__name__)


def _same_answer(problems, where, query, want, got):
    """An engine's refusal in memory must be a refusal through idv too; else equal rows."""
    if isinstance(want, tuple):
        if not isinstance(got, tuple):
            problems.append(f"{where} {query}: in memory {want}, through idv {got}")
    elif got != want:
        problems.append(f"{where} {query}\n    in memory   {want}\n    through idv {got}")


def test_polars_scan_equals_polars_in_memory():
    """scan_idv's predicate pushdown and statistics give polars' own answer (polars' rules:
    its casts, its NaN) over the same data in memory."""
    pl = pytest.importorskip("polars")
    from idv.polars import scan_idv
    problems = []

    @_settings(10)
    @given(case=files_and_predicates(tuple(k for k in KINDS if k != "DZ")))
    def run(case):
        table, rows_per_block, preds = case
        table = _us_exact(table)
        kinds = kinds_of(table)
        with written(table, rows_per_block) as files:
            for label, p, _ in files.each():
                memory = pl.from_arrow(idv.to_arrow(p, datetime="us"))
                for pred in preds:
                    e = to_polars(pred, kinds)
                    if e is None:
                        continue
                    want = _outcome(lambda: memory.filter(e)[ROW].to_list())
                    got = _outcome(
                        lambda: scan_idv(p).filter(e).select(ROW).collect()[ROW].to_list())
                    _same_answer(problems, f"[{label}] {describe(table)}\n   ", e, want, got)
    run()
    assert not problems, "\n".join(problems[:10])


def test_duckdb_over_arrow_dataset_equals_duckdb_in_memory():
    """DuckDB's WHERE pushed into idv.arrow_dataset gives DuckDB's answer over the Arrow table
    of the same dataset."""
    duckdb = pytest.importorskip("duckdb")
    problems = []

    @_settings(10)
    @given(case=files_and_predicates(tuple(k for k in KINDS if k not in ("DZ", "TS"))))
    def run(case):
        table, rows_per_block, preds = case
        table = _us_exact(table)
        kinds = kinds_of(table)
        with written(table, rows_per_block) as files:
            con = duckdb.connect()
            for label, p, _ in files.each():
                ds = idv.arrow_dataset(p)
                mem = ds.to_table()
                con.register("mem", mem)
                con.register("ds", ds)
                for pred in preds:
                    where = to_sql(pred, kinds)
                    if where is None:
                        continue
                    q = f'select "{ROW}" from {{}} where {where} order by "{ROW}"'
                    want = _outcome(lambda: [r[0] for r in con.sql(q.format("mem")).fetchall()])
                    got = _outcome(lambda: [r[0] for r in con.sql(q.format("ds")).fetchall()])
                    _same_answer(problems, f"[{label}] {describe(table)}\n   ", where, want, got)
            con.close()
    run()
    assert not problems, "\n".join(problems[:10])


# ---- explicit cases -----------------------------------------------------------------------

F32_01 = float(np.float32(0.1))
F64_MAX = 1.7976931348623157e308
B = 638396640000000000                         # 2024-01-01 in ticks
REGRESSION = Table(8, {
    "big_u64": Col("U8", [2**63, 2**63 + 5, 2**64 - 1, 0, 5, 7, 2**63, 1]),
    "txt": Col("TX", ["ab", "ab\x00", "abc", "ab\x00\x00", "", "\x00", "ab", "b"]),
    "flag": Col("BL", [True, False, True, True, False, False, True, False]),
    "single": Col("R4", [F32_01, 16777216.0, 1.0, float("nan"), 0.5, -0.0, F32_01, 16777216.0]),
    "int64": Col("I8", [1, 2, 0, -1, 5, 1, 2, 3]),
    "int8": Col("I1", [-128, 127, 0, 44, -1, 1, 100, 2]),
    "uint8": Col("U1", [0, 255, 1, 44, 200, 3, 4, 255]),
    "animal": Col("KEY", [1, 2, 3, 0, 3, 1, 2, 0], ["cat", "dog", "cat"], "U4"),
    "double": Col("R8", [-math.inf, -F64_MAX, -1e308, 0.0, math.inf, math.nan, F64_MAX, 5e-324]),
})
# times of 100 ns ticks, some finer than a microsecond, and .NET's extremes (a file of their
# own: the Arrow dataset refuses to convert such ticks, see test_case)
TIMES = Table(8, {
    "when": Col("DT", [B, B + 1, B + 2, B + 10, B - 1, 0, MAX_TICKS, B + 1]),
    "span": Col("TS", [0, 1, 2, 15, -1, TS_MAX, TS_MIN, 10]),
    "zoned": Col("DZ", [(B, 0), (B, 60), (B + 10, -90), (840 * TICKS_PER_MINUTE, 0),
                        (MAX_TICKS - 840 * TICKS_PER_MINUTE, 0), (B - 10, 840), (B, -840),
                        (EPOCH_TICKS, 0)]),
})
B_NS = (B - EPOCH_TICKS) * 100                 # B in nanoseconds since 1970


def _aware(*args, minutes):
    return dt.datetime(*args, tzinfo=dt.timezone(dt.timedelta(minutes=minutes)))


ALL_ROWS = list(range(8))
# group -> [(predicate, the rows the rule keeps)]
CASES = {
    "uint64 at and above 2**63": [
        (cmp("big_u64", ">", -1), ALL_ROWS),
        (cmp("big_u64", "<", -1), []),
        (cmp("big_u64", ">=", 2**63), [0, 1, 2, 6]),
        (cmp("big_u64", "in", (5, -1)), [4]),
    ],
    "text with trailing NULs": [
        (cmp("txt", "==", "ab\x00"), [1]),
        (cmp("txt", "==", "ab"), [0, 6]),
        (cmp("txt", "in", ["ab\x00\x00", "\x00"]), [3, 5]),
        (cmp("txt", "<", "ab\x00"), [0, 4, 5, 6]),
    ],
    "boolean against numbers": [
        (cmp("flag", ">", 0.5), [0, 2, 3, 6]),
        (cmp("flag", "==", 0.5), []),
        (cmp("flag", "==", True), [0, 2, 3, 6]),
    ],
    "single against double literals": [
        (cmp("single", "==", 0.1), []),
        (cmp("single", "==", np.float32(0.1)), [0, 6]),
        (cmp("single", "==", 16777217), []),
        (cmp("single", "==", 16777216), [1, 7]),
    ],
    "nan and missing": [
        (cmp("single", "!=", float("nan")), ALL_ROWS),
        (("not", cmp("single", "==", float("nan"))), ALL_ROWS),
        (cmp("single", "==", -0.0), [5]),
        (("isnull", "single"), [3]),
        (("isnull", "animal"), [3, 7]),
    ],
    "floats against numbers beyond the finite floats": [
        (cmp("double", ">", -(2**1024)), [1, 2, 3, 4, 6, 7]),
        (cmp("double", ">=", -(2**1024)), [1, 2, 3, 4, 6, 7]),
        (cmp("double", "<", -(2**1024)), [0]),
        (cmp("double", "<", 2**1024), [0, 1, 2, 3, 6, 7]),
        (cmp("double", ">", 2**1024), [4]),
        (cmp("double", "==", -(2**1024)), []),
        (cmp("single", ">", -(2**1024)), [0, 1, 2, 4, 5, 6, 7]),
    ],
    "int64 against fractions": [
        (cmp("int64", "in", [1.5]), []),
        (cmp("int64", "==", 1.5), []),
        (cmp("int64", "<", 1.5), [0, 2, 3, 5]),
    ],
    "members out of the type's range": [
        (cmp("int8", "in", [300, -129, 128]), []),
        (cmp("int8", "not in", [300, -129, 128]), ALL_ROWS),
        (cmp("int8", "<", 300), ALL_ROWS),
        (cmp("int8", "==", 300), []),
        (cmp("uint8", "in", [-1, 256, 300]), []),
        (cmp("uint8", "in", [255, -1]), [1, 7]),
    ],
    "times at 100 ns": [
        (cmp("when", "==", np.datetime64(B_NS + 50, "ns")), []),
        (cmp("when", "==", np.datetime64(B_NS + 100, "ns")), [1, 7]),
        (cmp("when", "<", np.datetime64(B_NS + 150, "ns")), [0, 1, 4, 5, 7]),
        (cmp("when", ">", np.datetime64(B_NS + 150, "ns")), [2, 3, 6]),
        (cmp("when", ">=", dt.datetime(2024, 1, 1)), [0, 1, 2, 3, 6, 7]),
        (cmp("when", "in", [np.datetime64(B_NS + 200, "ns"), np.datetime64(B_NS + 1, "ns")]),
         [2]),
        (cmp("span", "==", np.timedelta64(150, "ns")), []),
        (cmp("span", ">", np.timedelta64(150, "ns")), [2, 3, 5, 7]),
        (cmp("span", "<", dt.timedelta(microseconds=1)), [0, 1, 2, 4, 6]),
        (cmp("zoned", "==", _aware(2024, 1, 1, 1, 0, minutes=60)), [0, 1, 6]),
        (cmp("zoned", "<", _aware(2024, 1, 1, minutes=0)), [3, 5, 7]),
    ],
    "ISO strings for DateTime": [
        (cmp("when", "==", "0001-01-01T00:00:00"), [5]),
        (cmp("when", "<", "1000-01-01"), [5]),
        (cmp("when", ">", "9000-01-01"), [6]),
        (cmp("when", ">=", "2024-01-01"), [0, 1, 2, 3, 6, 7]),
        (cmp("when", "==", "2024-01-01T00:00:00.000001"), [3]),
    ],
    "zoned literals beyond years 1 and 9999 in UTC": [
        (cmp("zoned", "<", _aware(1, 1, 1, 0, 59, 59, 999999, minutes=60)), []),
        (cmp("zoned", ">", _aware(1, 1, 1, 0, 59, 59, 999999, minutes=60)), ALL_ROWS),
        (cmp("zoned", "!=", _aware(9999, 12, 31, 23, 0, minutes=-120)), ALL_ROWS),
        (cmp("zoned", "<", _aware(9999, 12, 31, 23, 0, minutes=-120)), ALL_ROWS),
    ],
    "key by label and by number": [
        (cmp("animal", "==", "cat"), [0, 2, 4, 5]),
        (cmp("animal", "!=", "cat"), [1, 3, 6, 7]),
        (cmp("animal", "in", ["dog"]), [1, 6]),
        (cmp("animal", "==", 0), [3, 7]),
        (cmp("animal", "==", 3), [2, 4]),
    ],
}
TIME_GROUPS = ("times at 100 ns", "ISO strings for DateTime",
               "zoned literals beyond years 1 and 9999 in UTC")


def _table_of(group):
    return TIMES if group in TIME_GROUPS else REGRESSION


def test_the_reference_agrees_with_the_cases():
    """The reference states each case's rows itself (so a failure below is the path's)."""
    for group, cases in CASES.items():
        table = _table_of(group)
        for pred, rows in cases:
            assert expected_rows(table.columns, pred, table.n) == rows, (group, pred)


@pytest.fixture(scope="module")
def regression_files():
    with written(REGRESSION, 3) as files:
        yield files


@pytest.fixture(scope="module")
def times_files():
    with written(TIMES, 3) as files:
        yield files


# the Arrow dataset reads times in microseconds and refuses ticks finer than that: the time
# cases (100 ns apart) are not its, and the random sweep checks it on whole microseconds
CASE_PATHS = [(g, n) for g in CASES for n in PATHS
              if not (n.startswith("arrow_dataset") and g in TIME_GROUPS)]


@pytest.mark.parametrize("group, name", CASE_PATHS)
def test_case(regression_files, times_files, group, name):
    """Each case through the path (read: every form; others: the forms in turn)."""
    files = times_files if group in TIME_GROUPS else regression_files
    problems = []
    takes = _spec(name)[1]
    for i, (pred, _) in enumerate(CASES[group]):
        forms = forms_of(pred, files.table, takes)
        if forms and name not in ALL_FORMS_PATHS:
            form = list(forms)[i % len(forms)]
            forms = {form: forms[form]}
        problems += [text for _, text in mismatches(name, files, pred, forms)]
    assert not problems, "\n".join(problems)


def test_polars_bool_against_a_fraction_equals_polars_in_memory(regression_files):
    """polars' own answer to ``flag > 0.5``, ``flag == 0.5``, ``single == 0.1``, with and
    without statistics."""
    pl = pytest.importorskip("polars")
    from idv.polars import scan_idv
    names = [ROW, "flag", "single"]
    for label, p, _ in regression_files.each():
        memory = pl.from_arrow(idv.to_arrow(p, names))
        for e in (pl.col("flag") > 0.5, pl.col("flag") == 0.5, pl.col("single") == 0.1):
            want = memory.filter(e)[ROW].to_list()
            got = scan_idv(p).select(names).filter(e).collect()[ROW].to_list()
            assert got == want, (label, str(e))


def test_count_rows_counts_nul_ended_text(regression_files):
    for label, p, _ in regression_files.each():
        ds = idv.arrow_dataset(p)
        assert ds.count_rows(filter=pc.field("txt") == "ab\x00") == 1, label
        assert ds.count_rows(filter=pc.field("txt") == "ab") == 2, label
        assert ds.count_rows(filter=pc.field("txt").isin(["ab\x00\x00", "\x00"])) == 2, label


# ---- refused filters ----------------------------------------------------------------------

# id -> (column, op, literal, the string form)
BAD = {
    "int vs '5'": ("int64", "==", "5", "int64 == '5'"),
    "int == [1, 2]": ("int64", "==", [1, 2], "int64 == [1, 2]"),
    "int in b'ab'": ("int64", "in", b"ab", "int64 in b'ab'"),
    "text vs 5": ("txt", "==", 5, "txt == 5"),
    "int == dict": ("int64", "==", {"a": 1}, "int64 == {'a': 1}"),
    "key < 'cat'": ("animal", "<", "cat", "animal < 'cat'"),
}
ERROR_PATHS = ["read", "open.read", "to_arrow", "record_batch_reader", "read_pandas",
               "dataset.read", "dask", "cli"]


def _refusal(name, files: Files, f):
    """The exception one path raises for a filter, or None."""
    try:
        if name in DATASET_PATHS:
            DATASET_PATHS[name][0]([files.stats, files.plain], f)
        else:
            SINGLE_PATHS[name][0](files.stats, f, 0)
    except Exception as e:
        return e
    return None


@pytest.mark.parametrize("name", ERROR_PATHS)
@pytest.mark.parametrize("bad", list(BAD))
def test_a_literal_that_cannot_compare_is_refused(regression_files, name, bad):
    """TypeError or ValueError naming the column, the operator and the literal."""
    column, op, lit, text = BAD[bad]
    with pytest.raises(Refused):
        expected_rows(REGRESSION.columns, cmp(column, op, lit), REGRESSION.n)
    forms = {"string": text} if name == "cli" else {"tuples": [(column, op, lit)], "string": text}
    for form, f in forms.items():
        e = _refusal(name, regression_files, f)
        if name == "cli":
            assert isinstance(e, CliError), f"{form}: {f!r} gave {e!r}"
            message = e.message
        else:
            assert isinstance(e, (TypeError, ValueError)), f"{form}: {f!r} gave {e!r}"
            message = str(e)
        assert column in message and op in message and (repr(lit) in message
                                                         or str(lit) in message), \
            f"{form}: {f!r}: the message should name {column!r}, {op!r} and {lit!r}: {message}"


@pytest.mark.parametrize("name", ERROR_PATHS)
def test_deeply_nested_not_is_a_value_error(regression_files, name):
    f = "not " * 1000 + "(int64 > 0)"
    e = _refusal(name, regression_files, f)
    if name == "cli":
        assert isinstance(e, CliError) and "Recursion" not in e.message, e
    else:
        assert isinstance(e, ValueError) and not isinstance(e, RecursionError), repr(e)


def test_deeply_nested_not_expression_is_a_value_error(regression_files):
    e = pc.field("int64") > 0
    for _ in range(1000):
        e = ~e
    with pytest.raises(ValueError):
        idv.read(regression_files.stats, [ROW], filter=e)


# ---- take is not a filter -----------------------------------------------------------------

def _take_file(p, idx):
    with idv.open(p) as f:
        return f.take(idx)


def _take_dataset(p, idx):
    with idv.dataset([str(p)]) as ds:
        return ds.take(idx)


TAKES = {"IdvFile.take": _take_file, "Dataset.take": _take_dataset,
         "arrow_dataset.take": lambda p, idx: idv.arrow_dataset(p).take(idx)}
NOT_INDICES = {"[True, False]": [True, False], "numpy bool mask": np.array([True, False]),
               "[1.0]": [1.0], "['1']": ["1"], "[[0]]": [[0]],
               "object array of ints": np.array([0, 1], dtype=object)}


@pytest.mark.parametrize("how", list(TAKES))
@pytest.mark.parametrize("idx", list(NOT_INDICES))
def test_take_refuses_what_is_not_row_numbers(regression_files, how, idx):
    """A boolean mask is a filter, not rows 1 and 0; floats, strings and nested lists are not
    row numbers either."""
    with pytest.raises(TypeError):
        TAKES[how](regression_files.stats, NOT_INDICES[idx])


def _column_rows(p, idx):
    with idv.open(p) as f:
        return f[ROW][idx]


@pytest.mark.parametrize("how", [*TAKES, "column[rows]"])
@pytest.mark.parametrize("big", [2**63, 2**64 - 1])
def test_row_numbers_beyond_int64_are_refused_alike(regression_files, how, big):
    """Unsigned row numbers of 2**63 and more (which a cast to int64 makes negative: rows from
    the end) are out of range on every path that takes row numbers, named as given."""
    read = TAKES.get(how, _column_rows)
    with pytest.raises(IndexError, match=f"row {big} out of range"):
        read(regression_files.stats, np.array([1, big], np.uint64))
    got = read(regression_files.stats, np.array([1], np.uint64))      # in range: as int64
    assert np.asarray(got if how == "column[rows]" else got[ROW]).tolist() == [1]


# ---- Spark --------------------------------------------------------------------------------

def test_spark_pushdown_equals_spark_in_memory(spark):
    """Spark's answer through the idv source (filters pushed, statistics used: the test
    session's Spark, conftest.py) equals Spark's over a DataFrame of the same rows made in
    memory, each query on a DataFrame of its own (the queries of a file in one job: a union);
    without pushdown (the default), one DataFrame queried again and again."""
    from decimal import Decimal
    from functools import reduce

    import idv.spark
    from pyspark.sql import DataFrame, functions as F
    d = tempfile.mkdtemp(prefix="idv-filter-spark-")
    try:
        when = np.datetime64("2024-01-01") + np.arange(8).astype("timedelta64[h]")
        for i, stats in enumerate((True, False)):
            write_table(Path(d) / f"{i}.idv", REGRESSION, statistics=stats, rows_per_block=2)
        idv.write(str(Path(d) / "when.idv"), {ROW: np.arange(8), "when": when},
                  rows_per_block=2)
        queries = [F.col("big_u64") > -1, F.col("big_u64") < F.lit(Decimal(2**63 + 1)),
                   F.col("single") == 0.1, F.col("single") > 1.0,
                   F.col("flag") > 0.5, F.col("txt") == "ab\x00",
                   F.col("int8").isin(1, 300), ~(F.col("int64") == 2),
                   (F.col("int64") == 3) | (F.col("uint8") >= 200)]
        problems = []

        def load(name):
            return spark.read.format("idv").option("blocksPerPartition", 1) \
                .load(str(Path(d) / name))

        def rows(frame, q):
            return sorted(r[0] for r in frame.where(q).select(ROW).collect())

        def outcomes(frame, qs):
            """The outcome of each query on a `frame()` of its own: those Spark accepts in one
            job (a union of them, each tagged), each alone when that job fails."""
            planned = [_outcome(lambda: frame().where(q).select(F.lit(i).alias("query"), ROW))
                       for i, q in enumerate(qs)]
            out = {i: p for i, p in enumerate(planned) if isinstance(p, tuple)}   # refused
            runs = {i: p for i, p in enumerate(planned) if i not in out}
            try:
                got = {i: [] for i in runs}
                for query, row in reduce(DataFrame.unionAll, runs.values()).collect():
                    got[query].append(row)
                out.update((i, sorted(g)) for i, g in got.items())
            except Exception:
                out.update((i, _outcome(lambda: rows(frame(), qs[i]))) for i in runs)
            return [out[i] for i in range(len(qs))]
        for name, qs in [("0.idv", queries), ("1.idv", queries),
                         ("when.idv", [F.col("when") < dt.datetime(2024, 1, 1, 3),
                                       F.col("when") >= dt.datetime(2024, 1, 1, 6, 30)])]:
            df = load(name)
            memory = spark.createDataFrame(df.collect(), df.schema)
            # a DataFrame a query: Spark reuses a pushed reader (docs/spark.md)
            wants, gots = outcomes(lambda: memory, qs), outcomes(lambda: load(name), qs)
            for q, want, got in zip(qs, wants, gots):
                _same_answer(problems, name, q, want, got)
        assert not problems, "\n".join(problems)
        # pushdown off (the default): one DataFrame, queried again and again
        spark.conf.set(idv.spark.PUSHDOWN_CONF, "false")
        idv.spark.register(spark)
        df = load("0.idv")
        memory = spark.createDataFrame(df.collect(), df.schema)
        for q, want in zip(queries, outcomes(lambda: memory, queries)):
            _same_answer(problems, "0.idv (no pushdown)", q, want, _outcome(lambda: rows(df, q)))
        assert df.count() == memory.count()
        assert not problems, "\n".join(problems)
    finally:
        spark.conf.set(idv.spark.PUSHDOWN_CONF, "true")        # the session as it was
        idv.spark.register(spark, pushdown=True)
        shutil.rmtree(d, ignore_errors=True)


def test_engines_compare_the_floored_times_they_are_given():
    """Times read floored to microseconds (datetime='auto-us' floors every finer tick, with
    a warning): a predicate pushed into scan_idv keeps the rows polars keeps of the frame it
    is given, and the tree idv takes from a pyarrow expression (engine_filters.from_arrow,
    as the Arrow dataset reads it) the rows pyarrow keeps of the floored table, with and
    without statistics."""
    pl = pytest.importorskip("polars", reason="the polars comparison needs polars")
    from idv._engines import engine_filters
    from idv.polars import scan_idv
    problems = []

    @_settings(10)
    @given(case=files_and_predicates(("DT", "TS", "I4")))
    def run(case):
        table, rows_per_block, preds = case
        kinds = kinds_of(table)
        with written(table, rows_per_block) as files, warnings.catch_warnings():
            warnings.simplefilter("ignore", idv.IdvWarning)
            for label, p, _ in files.each():
                where = f"[{label}] {describe(table)}\n   "
                lf = scan_idv(p, datetime="auto-us")
                memory = lf.collect()
                with idv.open(p) as f:
                    types = {c.name: c.type for c in f.schema}
                    unit, safe = f.time_unit(list(types), "auto-us", True)
                floored = engine_filters.floored(types, unit, safe)
                arrow = idv.to_arrow(p, datetime=unit, safe=safe)
                for pred in preds:
                    e = to_polars(pred, kinds)
                    if e is not None:
                        want = _outcome(lambda: memory.filter(e)[ROW].to_list())
                        got = _outcome(lambda: lf.filter(e).collect()[ROW].to_list())
                        _same_answer(problems, where, e, want, got)
                    x = to_expression(pred, kinds)
                    tree, exact, _ = (None, False, None) if x is None else \
                        engine_filters.from_arrow(x, types, floored)
                    if not exact:
                        continue
                    want = _outcome(lambda: arrow.filter(x)[ROW].to_pylist())
                    if not isinstance(want, tuple):     # else pyarrow refused its own cast
                        got = idv.read(p, [ROW], filter=tree)[ROW].tolist()
                        _same_answer(problems, where, x, want, got)
    run()
    assert not problems, "\n".join(problems[:10])


# a key whose KeyValues label each key once (an Arrow dictionary, a polars Categorical), and
# one whose KeyValues repeat a label (raw numbers to the engines)
LABELLED = Table(8, {
    "pet": Col("KEY", [1, 2, 3, 0, 3, 1, 2, 3], ["cat", "dog", ""], "U1"),
    "animal": Col("KEY", [1, 2, 3, 0, 3, 1, 2, 0], ["cat", "dog", "cat"], "U4"),
    "double": Col("R8", [-math.inf, -F64_MAX, -1e308, 0.0, math.inf, math.nan, F64_MAX, 5e-324]),
})


def _engine_trees(p, types, labels, x, e):
    """The trees idv takes (None where not whole) from pyarrow expression `x` and polars
    expression `e` over the key labels `labels` (engine_filters.label_columns)."""
    from idv._engines import engine_filters
    tree, exact, _ = engine_filters.from_arrow(x, types, frozenset(), labels)
    polars_tree, polars_exact = (None, False) if e is None else engine_filters.from_polars(
        json.loads(e.meta.serialize(format="json")), types, frozenset(), labels)
    return tree if exact else None, polars_tree if polars_exact else None


def _labels_agree(problems, table, preds, files):
    """Where idv takes a predicate whole from pyarrow or polars, its rows are the engine's
    own over the Arrow table read (its dictionaries: missing keys null); `preds` given as the
    reference's predicates or pyarrow expressions. The trees taken, by predicate."""
    pl = pytest.importorskip("polars", reason="the polars comparison needs polars")
    from idv._engines import engine_filters
    kinds, taken = kinds_of(table), {}
    for label, p, _ in files.each():
        where = f"[{label}] {describe(table)}\n   "
        arrow = idv.to_arrow(p)
        memory = pl.from_arrow(arrow)
        labels = engine_filters.label_columns(arrow.schema)
        with idv.open(p) as f:
            types = {c.name: c.type for c in f.schema}
        for pred in preds:
            x = pred if isinstance(pred, pc.Expression) else to_expression(pred, kinds)
            e = None if isinstance(pred, pc.Expression) else to_polars(pred, kinds)
            if x is None:
                continue
            tree, polars_tree = taken[str(pred)] = _engine_trees(p, types, labels, x, e)
            for engine, t, want in [
                    ("pyarrow", tree, lambda: arrow.filter(x)[ROW].to_pylist()),
                    ("polars", polars_tree, lambda: memory.filter(e)[ROW].to_list())]:
                if t is not None:
                    got = _outcome(lambda: idv.read(p, [ROW], filter=t)[ROW].tolist())
                    _same_answer(problems, f"{where} {engine}", pred, _outcome(want), got)
    return taken


def test_engines_compare_key_labels_as_idv_does():
    """A key the engines see as its Text labels compared with a str (==, !=, in; a label that
    is no key's; the missing key, null to them): the tree idv takes from a pyarrow or polars
    expression keeps the engine's rows, with and without statistics, on random keys and
    labels (KeyValues that repeat a label are raw numbers to the engines, and stay theirs)."""
    problems = []

    @_settings(10)
    @given(case=files_and_predicates(("KEY", "I4")))
    def run(case):
        table, rows_per_block, preds = case
        with written(table, rows_per_block) as files:
            _labels_agree(problems, table, preds, files)
    run()
    assert not problems, "\n".join(problems[:10])


def test_a_pyarrow_null_test_keeps_the_rows_pyarrow_keeps(tmp_path):
    """is_null() / is_valid() of a pyarrow Expression mean Arrow's null on every path that
    takes one, as pyarrow over to_arrow's table says: NaN only with nan_is_null=True, a key's
    0 only where KeyValues label it (a dictionary), no other value; idv's own isnull(x), NaN
    and a key's 0 always, stays so."""
    import idv.types as T
    path = tmp_path / "n.idv"
    idv.write(path, {ROW: np.arange(6), "d": np.array([np.nan, 1, 2, np.nan, 4, 5]),
                     "f": np.array([1, np.nan, 2, 3, 4, 5], np.float32),
                     "k": np.array([1, 0, 2, 1, 0, 2], np.uint32),
                     "pet": np.array([0, 1, 2, 2, 0, 1], np.uint32)},
              types={"k": T.Key(T.UInt32, 2), "pet": T.Key(T.UInt32, 2)},
              metadata={"pet": {"KeyValues": ["cat", "dog"]}}, rows_per_block=2)
    memory = idv.to_arrow(path)
    problems = []
    for c in ("d", "f", "k", "pet"):
        f = pc.field(c)
        for e in (f.is_null(), f.is_null(nan_is_null=True), f.is_valid(), ~f.is_null(),
                  ~f.is_null(nan_is_null=True), f.is_null() | (pc.field(ROW) == 5)):
            want = memory.filter(e)[ROW].to_pylist()
            got = {"read": idv.read(path, [ROW], filter=e)[ROW].tolist(),
                   "to_arrow": idv.to_arrow(path, [ROW], filter=e)[ROW].to_pylist(),
                   "dataset": idv.dataset(path).read([ROW], filter=e)[ROW].tolist(),
                   "arrow_dataset": idv.arrow_dataset(path).to_table(
                       columns=[ROW], filter=e)[ROW].to_pylist()}
            problems += [f"{e} through {k}: {v}, pyarrow {want}" for k, v in got.items()
                         if v != want]
    assert not problems, "\n".join(problems)
    assert idv.read(path, [ROW], filter="isnull(d) or isnull(k)")[ROW].tolist() == [0, 1, 3, 4]


def test_an_integer_beyond_the_column_is_answered_through_the_arrow_dataset(tmp_path):
    """A literal beyond an integer column's range holds for every row or none: the Arrow
    dataset answers it as idv.read does, where pyarrow over the table in memory compares the
    column cast to the literal's type (a UInt64 above 2^63 against -1: ArrowInvalid)."""
    import pyarrow as pa
    path = tmp_path / "u.idv"
    idv.write(path, {ROW: np.arange(4), "u64": np.array([0, 5, 2**63, 2**64 - 1], np.uint64),
                     "i8": np.array([-128, 0, 5, 127], np.int8)}, rows_per_block=2)
    memory = idv.to_arrow(path)
    with pytest.raises(pa.ArrowInvalid):
        memory.filter(pc.field("u64") > -1)
    cases = [(pc.field("u64") > -1, [0, 1, 2, 3]), (pc.field("u64") <= -1, []),
             (pc.field("u64") != -2**63, [0, 1, 2, 3]), (pc.field("i8") < 200, [0, 1, 2, 3]),
             (pc.field("i8") == -129, []), (pc.field("u64").isin([-1, 5]), [1])]
    for e, want in cases:
        assert idv.read(path, [ROW], filter=e)[ROW].tolist() == want, e
        assert idv.arrow_dataset(path).to_table(columns=[ROW], filter=e)[ROW].to_pylist() \
            == want, e


def test_engines_key_labels_taken_whole():
    """==, != (and in, from pyarrow) of a labelled key are taken whole from the engines (so
    they test no row), DuckDB's ``IN`` too; where the engine's null would count (``not``, Arrow's
    plain ``or``) or the KeyValues repeat a label, idv leaves the rows to the engine."""
    import pyarrow as pa
    pet, animal = pc.field("pet"), pc.field("animal")
    preds = [cmp("pet", "==", "cat"), cmp("pet", "!=", "cat"), cmp("pet", "==", ""),
             cmp("pet", "in", ["dog", ""]), cmp("pet", "==", "bird"),
             cmp("pet", "!=", "bird"), ("and", [cmp("pet", "!=", "dog"), cmp("pet", "!=", "")])]
    duck_in = pc.if_else(pet.is_valid(), pet.isin(["cat", "dog"]), pa.scalar(None, pa.bool_()))
    plain_or = pc.Expression._call("or", [pet == "cat", pc.field(ROW) >= 3])   # not Kleene's
    left = [~(pet == "cat"), ~pet.isin(["cat"]), ~duck_in, plain_or, animal == "cat",
            cmp("animal", "!=", "cat")]
    problems = []
    with written(LABELLED, 3) as files:
        taken = _labels_agree(problems, LABELLED, preds + [duck_in] + left, files)
    assert not problems, "\n".join(problems)
    for pred in preds:          # polars' is_in is a function idv does not read
        arrow_tree, polars_tree = taken[str(pred)]
        assert arrow_tree is not None and (polars_tree is not None or pred[2] == "in"), pred
    assert taken[str(duck_in)][0] is not None
    for pred in left:
        assert all(t is None for t in taken[str(pred)]), pred
