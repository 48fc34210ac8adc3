"""The idv command line as users run it (``python -m idv``: through ``idv.cli.main`` in this
process, or in a child process where only a process shows what is checked), and what it prints
read back into the oracle's JSON terms.

The CLI's output is checked against sidecar cells with ``check_cell``: floats at the column's
precision, dates and times in .NET's text forms (textdump.py), vectors densified.
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import traceback
import warnings

import numpy as np

from expected import dense_cell, type_from_description
from reference import REPO_DIR
from textdump import ticks_iso, timespan_str


def run(*args, check_rc=None, hide=(), process=False):
    """Run ``idv ARGS``; returns (returncode, stdout, stderr). In this process through
    ``idv.cli.main`` (run_main), as ``python -m idv`` would run it; in a child ``python -m idv``
    with `process` (what only a process shows: its entry point, its interpreter's start) or
    `hide`, which names packages that the child cannot import, as if they were not installed."""
    if process or hide:
        return run_process(*args, check_rc=check_rc, hide=hide)
    rc, out, err = run_main(*args)
    if check_rc is not None:
        assert rc == check_rc, (rc, out, err)
    return rc, out, err


def run_process(*args, check_rc=None, hide=(), stdout=subprocess.PIPE, closed=()):
    """``python -m idv ARGS`` in a child process; returns (returncode, stdout, stderr).
    `stdout`: a file to write its standard output to instead (stdout returned is then "");
    `closed`: the standard streams it starts without (1, 2), closed by the shell's ``>&-``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    if hide:
        env["PYTHONPATH"] = _hiding(hide) + os.pathsep + env["PYTHONPATH"]
    env["PYTHONIOENCODING"] = "utf-8"
    env.pop("PYTHONWARNINGS", None)
    command = [sys.executable, "-m", "idv", *map(str, args)]
    if closed:
        command = ["sh", "-c", 'exec "$@" ' + " ".join(f"{fd}>&-" for fd in closed), "sh",
                   *command]
    p = subprocess.run(command, stdout=stdout, stderr=subprocess.PIPE, env=env, cwd=REPO_DIR,
                       timeout=120)
    out, err = (p.stdout or b"").decode("utf-8"), p.stderr.decode("utf-8")
    if check_rc is not None:
        assert p.returncode == check_rc, (p.returncode, out, err)
    return p.returncode, out, err


def run_main(*args, cwd=REPO_DIR):
    """``idv ARGS`` run in this process as ``python -m idv`` runs it in its own, from `cwd`:
    ``idv.cli.main(ARGS)``'s exit code and what it wrote to stdout and stderr (UTF-8 streams, no
    input), with a fresh interpreter's warning filters; what would end that process with a
    traceback is exit code 1 with the traceback on stderr."""
    from idv.cli import main
    stdout, stderr = _utf8_stream("strict"), _utf8_stream("backslashreplace")
    saved = sys.stdin, sys.stdout, sys.stderr, os.getcwd()
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(), stdout, stderr
    try:
        os.chdir(cwd)
        with warnings.catch_warnings():
            _fresh_warning_filters()
            try:
                rc = main([str(a) for a in args])
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception:
                traceback.print_exc()
                rc = 1
        stdout.flush()
        stderr.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved[:3]
        os.chdir(saved[3])
    return rc, stdout.buffer.getvalue().decode("utf-8"), stderr.buffer.getvalue().decode("utf-8")


def _utf8_stream(errors):
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors=errors, write_through=True)


def _fresh_warning_filters():
    """The warning filters and display of a fresh interpreter (as PYTHONWARNINGS unset):
    DeprecationWarning shown only from __main__, the pending, import and resource warnings
    never, the rest once per place, printed to sys.stderr."""
    warnings.resetwarnings()
    for category in (ResourceWarning, ImportWarning, PendingDeprecationWarning,
                     DeprecationWarning):
        warnings.filterwarnings("ignore", category=category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
    warnings.showwarning = _print_warning


def _print_warning(message, category, filename, lineno, file=None, line=None):
    (file or sys.stderr).write(warnings.formatwarning(message, category, filename, lineno, line))


# ``python -c COUNTING_CLI COUNT_FILE ARGS...`` runs ``idv ARGS``, counting the blocks each file
# it opens decodes (Column.blocks_decoded), by the path it was opened from: COUNT_FILE gets
# {path: blocks} as JSON when the process exits
COUNTING_CLI = r"""
import atexit, json, sys
import idv._reader.reader
from idv.cli import main
files = []
init = idv._reader.reader.IdvFile.__init__
def recording_init(self, source, *args, **kwargs):
    init(self, source, *args, **kwargs)
    files.append((str(source), self))
idv._reader.reader.IdvFile.__init__ = recording_init
def report():
    decoded = {}
    for path, f in files:
        decoded[path] = decoded.get(path, 0) + sum(int(c.blocks_decoded) for c in f.columns)
    with open(sys.argv[1], "w") as out:
        json.dump(decoded, out)
atexit.register(report)
sys.exit(main(sys.argv[2:]))
"""


def run_into_head(*args, lines=1):
    """``python ARGS | head -LINES`` as a shell runs it (ARGS: ``-c CODE ...`` or ``-m idv
    ...``), so that the Python side sees the pipe close; returns (its returncode, its stderr,
    what head printed)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_DIR) + os.pathsep + os.environ.get(
        "PYTHONPATH", "")}
    p = subprocess.Popen([sys.executable, *map(str, args)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    head = subprocess.run(["head", f"-{lines}"], stdin=p.stdout, capture_output=True,
                          timeout=120)
    p.stdout.close()
    err = p.stderr.read().decode()
    rc = p.wait(timeout=120)
    p.stderr.close()
    return rc, err, head.stdout.decode()


_HIDING = {}


def _hiding(packages):
    """A folder of packages, named `packages`, whose import fails as a missing one's does
    (one folder for each set, removed when the tests end)."""
    import atexit
    import shutil
    import tempfile
    key = tuple(sorted(packages))
    if key in _HIDING:
        return _HIDING[key]
    folder = _HIDING[key] = tempfile.mkdtemp(prefix="idv-hide-")
    atexit.register(shutil.rmtree, folder, True)
    for name in packages:
        os.makedirs(os.path.join(folder, name))
        with open(os.path.join(folder, name, "__init__.py"), "w") as f:
            f.write(f"raise ModuleNotFoundError({'No module named ' + repr(name)!r}, "
                    f"name={name!r})\n")
    return folder


def run_json(*args):
    rc, out, err = run(*args, "--json", check_rc=0)
    return json.loads(out)


def assert_one_line_error(err, *fragments, warnings=False):
    lines = err.strip().splitlines()
    if warnings:   # IdvWarnings may come first, one line each
        assert all(ln.startswith("idv: warning: ") for ln in lines[:-1]), err
        lines = lines[-1:]
    assert len(lines) == 1, err
    assert lines[0].startswith("idv: error: "), err
    assert "Traceback" not in err and "internal error" not in err, err
    for frag in fragments:
        assert frag in lines[0], (frag, err)


def norm_type(s):
    """A type string with its variable dimensions spelled 0 (the CLI may print * or 0)."""
    return s.replace("*", "0")


def same_float(json_value, sidecar_value, dtype):
    """A CLI JSON float against a sidecar float string, compared at the column's precision."""
    a = dtype(float(json_value)) if not isinstance(json_value, str) else dtype(
        {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[json_value])
    b = dtype(float(sidecar_value))
    return (np.isnan(a) and np.isnan(b)) or (a == b and np.signbit(a) == np.signbit(b))


def table_rows(text):
    """Data lines of the first table in `text` (after its dashed separator), split on 2+ spaces."""
    lines = text.splitlines()
    sep = next(i for i, ln in enumerate(lines) if ln and set(ln.replace(" ", "")) == {"-"})
    out = []
    for ln in lines[sep + 1:]:
        if not ln.strip() or ln.startswith("("):
            break
        out.append(re.split(r"\s{2,}", ln.strip()))
    return out


def check_cell(got, cell, col):
    """A CLI JSON cell against a sidecar cell."""
    item = col["item_type"]
    if col["is_vector"]:
        exp = dense_cell(cell, type_from_description(col).item)
        flat = np.asarray(got, dtype=object).reshape(-1).tolist() if got else []
        assert len(flat) == len(exp), (got, exp)
        for g, e in zip(flat, exp):
            check_cell(g, e, {**col, "is_vector": False})
        if len(col["dims"]) > 1 and all(col["dims"]):
            assert np.asarray(got, dtype=object).shape == tuple(col["dims"])
        return
    if item in ("Single", "Double"):
        assert same_float(got, cell, np.float32 if item == "Single" else np.float64), (got, cell)
    elif item == "DateTime":
        assert got == ticks_iso(cell)
    elif item == "TimeSpan":
        assert got == timespan_str(cell)
    elif item == "DateTimeOffset":
        m = cell["offset_minutes"]
        sign = "-" if m < 0 else "+"
        assert got == f"{ticks_iso(cell['ticks'])}{sign}{abs(m) // 60:02d}:{abs(m) % 60:02d}"
    else:   # ints, keys (raw), Boolean, Text, RowId
        assert got == cell and type(got) is type(cell), (got, cell)


_CSV_INTS = {"SByte", "Byte", "Int16", "UInt16", "Int32", "UInt32", "Int64", "UInt64", "Key",
             "DataViewRowId", "RowId"}


def csv_value(text, col):
    """A CSV cell back in the CLI's JSON form, for check_cell."""
    if col["is_vector"]:
        return json.loads(text)
    kv = _key_values(col)
    if kv is not None:
        return 0 if text == "" else next(i + 1 for i, v in enumerate(kv) if _same_kv(v, text))
    item = col["item_type"]
    if item in _CSV_INTS:
        return int(text)
    if item == "Boolean":
        return {"true": True, "false": False}[text]
    if item in ("Single", "Double"):
        return text if text in ("NaN", "Infinity", "-Infinity") else float(text)
    return text


def csv_columns(table, side):
    """The rows of a CSV written by idv._interop.delimited (idv cat -f csv, convert to .csv)
    regrouped into the visible sidecar columns, each cell in the CLI's JSON form for check_cell:
    the slot columns of a fixed-size vector joined back into one (nested) list, KeyValues text
    mapped back to the raw key (where the values name the keys one to one, as documented)."""
    visible = [c for c in side["columns"] if not c["hidden"]]
    header, rows = table[0], table[1:]
    spans, at = [], 0
    for c in visible:
        fixed = c["is_vector"] and c["dims"] and all(c["dims"])
        width = int(np.prod(c["dims"])) if fixed else 1
        names = header[at:at + width]
        assert names == [c["name"]] or (fixed and all(n.startswith(c["name"] + ".")
                                                      for n in names)), (c["name"], names)
        spans.append((c, at, width, fixed))
        at += width
    assert at == len(header), header
    out = []
    for row in rows:
        cells = []
        for c, a, width, fixed in spans:
            if fixed:
                items = [_csv_item(t, c) for t in row[a:a + width]]
                cells.append(np.array(items, dtype=object).reshape(c["dims"]).tolist())
            else:
                cells.append(csv_value(row[a], c))
        out.append(cells)
    return visible, out


def _key_values(col):
    """The column's KeyValues when they name its keys one to one, else None."""
    kv = next((a["value"] for a in col["annotations"] if a["kind"] == "KeyValues"), None)
    if col["item_type"] != "Key" or kv is None:
        return None
    if len(kv) != col["key_count"] or len(set(map(str, kv))) != len(kv) or "NaN" in map(str, kv):
        return None     # not one to one, or NaN among them: the raw keys are written
    return [str(v) for v in kv]


def _csv_item(text, col):
    """One slot of a vector (a key vector's slots labelled by its KeyValues, as scalar keys)."""
    return csv_value(text, {**col, "is_vector": False})


def _same_kv(value, text):
    """A KeyValues item (as the sidecar has it) and its CSV text."""
    if value == text:
        return True
    try:
        return float(value) == float(text)
    except ValueError:
        return False


def read_delimited(text, delimiter):
    return list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
