"""Keys whose labels the data brought (a pandas Categorical, an Arrow or polars dictionary:
their codes, numbered by the data's own categories) and whose KeyValues the caller gives
anew (``metadata=``): the codes mapped onto the given labels by value, as idv.Writer maps a
Categorical or dictionary it is handed, so that a row keeps its label whichever way it is
written (keeping the codes would give each row the label of another category). A label the
given ones lack is refused, naming the row; the key's count, unless ``types=`` gives it, is
that of the given labels.
"""
from __future__ import annotations

import numpy as np

from idv import types as T
from idv._writer.metadata import metadata_by_column, typed_value


def relabelling(names, inferred, given):
    """{column position: (old code -> new code, the old labels, how many new ones)} for the
    columns of `names` whose inferred KeyValues (`inferred`: by name, as the conversions give
    them) the caller's metadata (`given`: by name or position) replaces with other labels."""
    out = {}
    if not inferred or not given:
        return out
    per_column = metadata_by_column(given, names)
    for i, name in enumerate(names):
        old = (inferred.get(name) or {}).get("KeyValues")
        new = (per_column[i] or {}).get("KeyValues")
        if old is None or new is None:
            continue
        where = f"column {name!r} metadata 'KeyValues'"
        old_labels = list(np.asarray(typed_value(old, where)[1]).tolist())
        new_labels = list(np.asarray(typed_value(new, where)[1]).tolist())
        if old_labels == new_labels:
            continue
        at = {label: k + 1 for k, label in reversed(list(enumerate(new_labels)))}
        # code 0 (missing) stays 0; a label that is none of the new ones: -1, refused if used
        table = np.array([0] + [at.get(label, -1) for label in old_labels], np.int64)
        out[i] = (table, old_labels, len(new_labels))
    return out


def relabelled(columns, maps, row0=0):
    """`columns` ([(name, values)]) with the codes of the columns of `maps` (relabelling's)
    mapped; ValueError naming the first row whose label the given KeyValues lack."""
    if not maps:
        return columns
    out = list(columns)
    for i, (table, old_labels, n) in maps.items():
        name, codes = out[i]
        codes = np.asarray(codes)
        if codes.dtype.kind not in "iu":        # not the codes of a key's labels
            continue
        got = table[codes.astype(np.int64)]
        if (got < 0).any():
            r = int(np.flatnonzero(got < 0)[0])
            raise ValueError(f"column {name!r} row {row0 + r}: "
                             f"{old_labels[int(codes[r]) - 1]!r} is not one of the column's "
                             f"key values ({n} values)")
        out[i] = (name, got)
    return out


def counted(types, names, maps, given=None):
    """`types` (by name) with each key that `maps` (relabelling's) relabels counting the given
    labels, as a key whose KeyValues are given does; not those `given` types (types=) name."""
    if not maps:
        return types
    out = dict(types)
    for i, (_, _, n) in maps.items():
        if given and (i in given or names[i] in given):
            continue
        t = out.get(names[i])
        if isinstance(t, T.Key) and t.count != n:
            out[names[i]] = T.Key(t.raw if n <= np.iinfo(t.raw.dtype).max else T.UInt64, n)
    return out
