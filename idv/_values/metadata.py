"""Column annotations (ML.NET's metadata) outside the file: a JSON form that keeps each value's
exact type, and what the SlotNames and KeyValues annotations name.

``metadata_to_json`` / ``metadata_from_json`` carry a column's annotations through Arrow field
metadata (idv._values.arrow_types.METADATA_KEY): each value with its ML.NET type string, times as
.NET ticks, RowId as one integer, floats at their exact value, so that a Parquet or Feather file
converts back to the same .idv. ``slot_labels`` names a vector's slots from its SlotNames (pandas'
expanded columns, CSV headers) of vectors of at most ``MAX_EXPAND_SLOTS`` slots (``expands``);
``usable_key_values`` says when a key's KeyValues can label its values (a pandas Categorical, an
Arrow dictionary). """
from __future__ import annotations

import json

import numpy as np

from idv._values import ticks
from idv import types as T
from idv._values.cells import float_json
from idv.errors import warn


# ---------------------------------------------------------------------------------------------
# metadata as JSON
# ---------------------------------------------------------------------------------------------

def metadata_spec(col):
    """{kind: (type, value)} of a column's metadata, as the writer takes it (exact types).
    An annotation too large for the file's memory limit is left out, with an IdvWarning
    naming it, so that the column's values can still be read."""
    from idv._resources.budget import MemoryLimitError
    out = {}
    for kind, t in col.metadata_types.items():
        if t is None:
            continue
        try:
            out[kind] = (t, col.annotation(kind))
        except MemoryLimitError as e:
            warn(f"annotation left out: {e}")
    return out


def _text_array(cells):
    out = np.empty(len(cells), object)
    for i, c in enumerate(cells):
        out[i] = str(c)
    return out


def _rowid_ints(arr):
    return [(int(h) << 64) | int(lo) for lo, h in zip(arr["low"], arr["high"])]


def _rowids(cells):
    out = np.zeros(len(cells), T.ROWID_DTYPE)
    out["low"] = [int(c) & 0xFFFFFFFFFFFFFFFF for c in cells]
    out["high"] = [int(c) >> 64 for c in cells]
    return out


def _int64(cells):
    return np.array([int(c) for c in cells], dtype=np.int64).reshape(len(cells))


def _dtos(cells):
    out = np.zeros(len(cells), T.DATETIMEOFFSET_DTYPE)
    out["utc"] = ticks.from_net_ticks(_int64([c[0] for c in cells]))
    out["offset_minutes"] = [int(c[1]) for c in cells]
    return out


# item type -> (items -> JSON values, JSON values -> items) where the JSON form is not a plain
# number: DateTime and DateTimeOffset as .NET ticks, TimeSpan as ticks, RowId as one integer
_JSON = {
    T.Text: (lambda arr: [str(x) for x in arr], _text_array),
    T.Boolean: (lambda arr: [bool(x) for x in arr],
                lambda cells: np.array([bool(c) for c in cells], np.bool_).reshape(len(cells))),
    T.DateTime: (lambda arr: [int(x) for x in ticks.net_ticks(arr)],
                 lambda cells: ticks.from_net_ticks(_int64(cells))),
    T.TimeSpan: (lambda arr: [int(x) for x in arr.view(np.int64)],
                 lambda cells: _int64(cells).view(T.TIMESPAN_DTYPE)),
    T.DateTimeOffset: (lambda arr: [[int(u), int(o)] for u, o in
                                    zip(ticks.net_ticks(arr["utc"]), arr["offset_minutes"])],
                       _dtos),
    T.RowId: (_rowid_ints, _rowids),
}


def _items_json(item, arr):
    if item in _JSON:
        return _JSON[item][0](arr)
    if isinstance(item, T.Key) or item.dtype.kind in "iu":
        return [int(x) for x in arr]
    return [float_json(float(x)) for x in arr]      # the exact value (float32 widened)


def _items_from_json(item, cells):
    if item in _JSON:
        return _JSON[item][1](cells)
    n = len(cells)
    dtype = item.dtype
    if dtype.kind == "f":
        return np.array([float(c) for c in cells], dtype=np.float64).reshape(n).astype(dtype)
    return np.array([int(c) for c in cells], dtype=dtype).reshape(n)


def _stored(item, arr):
    """Where a vector's items are not their type's default ("", 0, False): a boolean mask."""
    if item is T.Text:
        return arr != ""
    if arr.dtype.names:
        return np.ones(len(arr), bool)
    return arr != 0


def metadata_to_json(spec):
    """{kind: (type, value)} -> JSON text (a list keeps the kinds' order). A vector of more
    than MAX_EXPAND_SLOTS items, most of them its type's default (a text featurizer's
    SlotNames), is written sparse: ``"sparse": {"indices": [...], "values": [...]}``, so that
    a footer holding it stays small enough for Parquet's readers."""
    out = []
    for kind, (t, value) in spec.items():
        if isinstance(t, T.Vector):
            arr = np.asarray(value).reshape(-1)
            if arr.dtype != t.item.dtype and t.item is not T.Text:
                arr = arr.astype(t.item.dtype)
            if len(arr) > MAX_EXPAND_SLOTS:
                where = np.flatnonzero(_stored(t.item, arr))
                if 2 * len(where) < len(arr):
                    out.append({"kind": kind, "type": str(t), "sparse": {
                        "indices": where.tolist(), "values": _items_json(t.item, arr[where])}})
                    continue
            v = _items_json(t.item, arr)
        else:
            arr = np.asarray(value, dtype=object if t is T.Text else t.dtype).reshape(1)
            v = _items_json(t, arr)[0]
        out.append({"kind": kind, "type": str(t), "value": v})
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def _sparse_from_json(t, indices, values):
    """metadata_to_json's sparse form -> the dense vector (the writer's and the reader's
    form): its type's default everywhere but at `indices`."""
    items = _items_from_json(t.item, list(values))
    arr = np.zeros(t.size, items.dtype)
    if t.item is T.Text:
        arr[:] = ""
    arr[np.asarray(indices, np.int64)] = items
    return arr.reshape(t.dims)


def metadata_from_json(text):
    """metadata_to_json's text -> {kind: (type, value)} in the reader's forms."""
    out = {}
    for entry in json.loads(text):
        t = T.parse_type(entry["type"])
        if "sparse" in entry and isinstance(t, T.Vector) and t.is_fixed:
            sparse = entry["sparse"]
            out[entry["kind"]] = (t, _sparse_from_json(t, sparse["indices"], sparse["values"]))
            continue
        v = entry["value"]
        if isinstance(t, T.Vector):
            arr = _items_from_json(t.item, list(v))
            value = arr.reshape(t.dims) if t.is_fixed else arr
        else:
            arr = _items_from_json(t, [v])
            value = arr[0]
            if t is T.Boolean:
                value = bool(value)
            elif t is T.Text:
                value = str(value)
        out[entry["kind"]] = (t, value)
    return out


# ---------------------------------------------------------------------------------------------
# SlotNames and KeyValues
# ---------------------------------------------------------------------------------------------

def slot_labels(name, vtype, slot_names=None):
    """Column names for the slots of a fixed-size vector: ``name.<slot name>`` from the
    SlotNames (a slot with an empty name gets its index), else ``name.0``, ``name.1``...
    (``name.i.j`` for several dimensions, row-major). When slot names would repeat (or
    collide with an index), every slot is named by its index."""
    size = vtype.size
    if len(vtype.dims) == 1:
        index = [f"{name}.{j}" for j in range(size)]
    else:
        index = [name + "".join(f".{i}" for i in idx) for idx in np.ndindex(*vtype.dims)]
    if slot_names is None:
        return index
    names = np.asarray(slot_names, dtype=object).reshape(-1)
    if len(names) != size:
        return index
    labels = [f"{name}.{s}" if isinstance(s, str) and s else index[j]
              for j, s in enumerate(names)]
    return labels if len(set(labels)) == size else index


def annotation_size_problem(column_type, kind, value_type):
    """What is wrong with the size of a `kind` annotation of type `value_type` on a column of
    `column_type`, None when nothing is: ML.NET's KeyValues of a key are ``Vector<T, count>``
    (a value per key) and the SlotNames of a fixed-size vector ``Vector<Text, size>`` (a name
    per slot); readers ignore those of another size (usable_key_values), so the writer
    refuses them and idv.verify reports them."""
    item = T.item_type(column_type)
    if kind == "KeyValues" and isinstance(item, T.Key):
        need, owner, each = item.count, item, "key"
    elif kind == "SlotNames" and isinstance(column_type, T.Vector) and column_type.is_fixed:
        need, owner, each = column_type.size, column_type, "slot"
    else:
        return None
    got = value_type.size if isinstance(value_type, T.Vector) else None
    if got == need:
        return None
    given = f"{got} value{'s' * (got != 1)}" if got else f"a {value_type}"
    return f"{kind} holds {given}, but {owner} needs {need} (one per {each})"


def usable_key_values(col_type, metadata):
    """The KeyValues of a scalar key column when they can label its values one to one (a 1-d
    vector of exactly `count` distinct, non-NaN values), else None. `metadata`: the column's
    annotations (a dict), or the column itself, whose KeyValues alone are then decoded
    (Column.annotation), and only for a key."""
    if not isinstance(col_type, T.Key):
        return None
    kv = metadata.get("KeyValues") if isinstance(metadata, dict) \
        else metadata.annotation("KeyValues")
    if kv is None:
        return None
    kv = np.asarray(kv)
    if kv.ndim != 1 or len(kv) != col_type.count:
        return None
    if kv.dtype.kind == "f" and np.isnan(kv).any():
        return None
    if kv.dtype.names:      # DateTimeOffset / RowId values: no plain categories
        return None
    try:
        if len(set(kv.tolist())) != len(kv):
            return None
    except TypeError:
        return None
    return kv


# The most slots a vector expands into (vectors="expand"); wider ones stay one object column
# of arrays. A pandas column costs about 200 bytes and 2 us to build whatever its rows, so
# 10,000 slots is a frame of a few MB built in well under a second, while ML.NET's text
# featurizers write vectors of millions of slots (a hashed n-gram vector: 2^20 and more),
# which expanded would be gigabytes of column objects for zero rows. Dense features that
# read well as columns (a few hundred measurements, a 28x28 image) stay far below it.
MAX_EXPAND_SLOTS = 10_000


def expands(t, vectors="expand"):
    """Whether a column of type `t` becomes one column per slot under `vectors`: a fixed-size
    vector of at most MAX_EXPAND_SLOTS slots, with vectors="expand" (idv._interop.pandas,
    idv.dask's meta and the CSV columns of idv._interop.delimited and idv.formats.text follow
    it)."""
    return vectors == "expand" and isinstance(t, T.Vector) and t.is_fixed \
        and t.size <= MAX_EXPAND_SLOTS


def warn_kept_wide(columns, kept="one pandas column of arrays"):
    """One IdvWarning naming the fixed-size vectors too wide to expand (`columns`: their
    Columns or (name, type) pairs), each `kept` as the warning says instead."""
    wide = [(c.name, c.type) if hasattr(c, "type") else c for c in columns]
    wide = [(n, t) for n, t in wide if isinstance(t, T.Vector) and t.is_fixed
            and t.size > MAX_EXPAND_SLOTS]
    if wide:
        listed = ", ".join(f"{n!r} ({t})" for n, t in wide[:5]) + (", ..." if len(wide) > 5
                                                                  else "")
        warn(f"{listed}: over {MAX_EXPAND_SLOTS:,} slots, kept as {kept}, not expanded into "
             f"a column per slot (idv._interop.pandas.MAX_EXPAND_SLOTS)")


# ---------------------------------------------------------------------------------------------
# the ML.NET schema a pandas DataFrame carries
# ---------------------------------------------------------------------------------------------

# DataFrame.attrs key of the schema idv.to_pandas reads into a frame, which idv.write uses to
# give back the same ML.NET types. One JSON text: pandas deep-copies attrs on every operation
# (a str costs nothing to copy) and writes them into Parquet files as JSON.
SCHEMA_ATTR = "idv.schema"


def frame_schema(cols, expanded, as_ticks=False):
    """The SCHEMA_ATTR text for idv columns `cols`: a JSON list of {"name", "type",
    "metadata" (metadata_to_json's text), "expanded" (whether its slots are columns of their
    own, named by slot_labels), "ticks" (DateTime / TimeSpan items held as int64 .NET
    ticks, `as_ticks`)}; `expanded(col)` says which."""
    entries = []
    for col in cols:
        spec = metadata_spec(col)
        item = col.type.item if isinstance(col.type, T.Vector) else col.type
        entries.append({"name": col.name, "type": str(col.type),
                        "metadata": metadata_to_json(spec) if spec else None,
                        "expanded": bool(expanded(col)),
                        "ticks": bool(as_ticks) and item in (T.DateTime, T.TimeSpan)})
    return json.dumps(entries, ensure_ascii=False, separators=(",", ":"))


def frame_schema_columns(text):
    """[(name, type, {kind: (type, value)}, frame column names, ticks)] from a SCHEMA_ATTR
    text; ValueError when it is not one."""
    try:
        entries = json.loads(text)
        out = []
        for e in entries:
            t = T.parse_type(e["type"])
            spec = metadata_from_json(e["metadata"]) if e.get("metadata") else {}
            names = [e["name"]]
            if e.get("expanded"):
                slot_names = spec.get("SlotNames", (None, None))[1]
                names = slot_labels(e["name"], t, slot_names)
            out.append((e["name"], t, spec, names, bool(e.get("ticks"))))
        return out
    except (TypeError, KeyError, ValueError, AttributeError) as e:
        raise ValueError(f"DataFrame.attrs[{SCHEMA_ATTR!r}] is not the schema idv.to_pandas "
                         f"writes there ({e}); delete it to write the frame as it is") from None
