"""How the files of a dataset agree on their columns (``schema=``): "exact", every file with
the first file's columns, names and types in order, else a ValueError naming the file, the
column and both types; "common", the columns all files share with one type, a column files
give different types left out with a warning naming it."""
from __future__ import annotations

from idv.errors import warn


def agree(listed, wanted, mode):
    """The dataset's column names (of `wanted`, None: all): the reference (first) file's,
    checked against every other file (mode "exact"), or those all files share with one type
    ("common": a column some file gives another type is left out with a warning, a column
    asked for by name that is not common refused). `listed`: per file, (path, its visible
    columns, ...); `wanted`: names of the reference file's columns (selection.names_of)."""
    ref_path, ref_cols = listed[0][0], listed[0][1]
    names = [n for n, _ in ref_cols] if wanted is None else wanted
    if mode == "exact":
        ref = ref_cols if wanted is None else [(n, dict(ref_cols)[n]) for n in wanted]
        for path, cols, *_ in listed[1:]:
            mine = cols if wanted is None else [(n, dict(cols).get(n)) for n in wanted
                                                if n in dict(cols)]
            if mine != ref:
                common = [n for n, where in _sharing(listed, names) if where is None]
                left = [n for n in names if n not in common]
                raise ValueError(f"the files' columns differ: "
                                 f"{_mismatch(path, ref_path, mine, ref)} (schema='common' "
                                 f"keeps the columns all files share with one type: "
                                 f"{len(common)} of {len(names)}"
                                 + (f", leaving out {_names(left)})" if left else ")"))
        return [n for n, _ in ref]
    ref_types = dict(ref_cols)
    common, other_types = [], []
    for n, where in _sharing(listed, names):
        if where is None:
            common.append(n)
            continue
        path, t = where
        why = f"{path} has none" if t is None else f"{path}: {t}, but {ref_types[n]} in {ref_path}"
        if wanted is not None:      # asked for by name: say why it cannot be had
            raise ValueError(f"column {n!r} is not common to all files: {why}")
        if t is not None and not isinstance(t, str) and not isinstance(ref_types[n], str):
            other_types.append(f"{n!r} ({why})")      # (unreadable ones are warned of at open)
    if other_types:
        warn(f"schema='common' leaves out {len(other_types)} column"
             f"{'s' * (len(other_types) != 1)} that files give different types: "
             + "; ".join(other_types[:3]) + ("; ..." if len(other_types) > 3 else ""))
    return common


def _sharing(listed, names):
    """(name, None if every file has it with the first file's type, else (the first other
    file's path, its type there or None)) for each of `names`."""
    ref_types = dict(listed[0][1])
    out = []
    for n in names:
        where = None
        for path, cols, *_ in listed[1:]:
            t = dict(cols).get(n)
            if t != ref_types[n]:
                where = (path, t)
                break
        out.append((n, where))
    return out


def _names(names, most=5):
    """Column names quoted, the first `most` of them."""
    shown = ", ".join(repr(n) for n in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _mismatch(path, ref_path, mine, ref):
    """The first difference between a file's columns and the reference file's, as text."""
    ref_types, my_types = dict(ref), dict(mine)
    for name, t in ref:
        if name not in my_types:
            return f"{path} has no column {name!r} ({t} in {ref_path})"
        if my_types[name] != t:
            return f"{path}: column {name!r} is {my_types[name]}, but {t} in {ref_path}"
    for name, t in mine:
        if name not in ref_types:
            return f"{path} has a column {name!r} ({t}) that {ref_path} does not have"
    return (f"{path} has the columns in another order than {ref_path}: "
            f"{[n for n, _ in mine]} vs {[n for n, _ in ref]}")
