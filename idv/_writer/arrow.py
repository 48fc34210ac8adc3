"""Arrow -> idv: ``from_arrow`` (a table into idv.write's columns, types and metadata) and
the batches that idv.Writer.write_batch and idv.convert take from Arrow.

pyarrow is imported only when these are called (``pip install idv[arrow]``). Fields that
idv._interop.arrow wrote carry ``idv.type`` and ``idv.metadata``: the exact ML.NET type and
annotations come back while the Arrow type still holds them; other fields get their types from the
Arrow types (idv._values.arrow_types). Values stay in Arrow's buffers where they can: numbers as
numpy views, strings as a Utf8Text on Arrow's UTF-8 bytes and offsets. """
from __future__ import annotations

from collections import Counter

import numpy as np

from idv._values import ticks
from idv import types as T
from idv._values.metadata import metadata_from_json
from idv._values.arrow_types import (KEY_VALUES_KEY, METADATA_KEY, TYPE_KEY, arrow_holds,
                                     import_pyarrow, infer_item, infer_type, is_list_type,
                                     key_values_to_arrow, numpy_view, storage_type)
from idv._values.time_zones import SOURCE_TYPE, source_type
from idv.errors import Where
from idv._values.infer import not_a_vector
from idv._values.vectors import Ragged
from idv._writer.arrow_items import (filled_text, first_null, items_from_arrow, no_nulls,
                                      utf8_from_arrow)
from idv._writer.values import Utf8Text, Utf8Vectors

__all__ = ["from_arrow", "arrow_table", "ArrowToIdv", "arrow_column_values"]


def _key_values_array(pa, key_values):
    """A key's KeyValues annotation ((type, value)) as the Arrow array that the column's values
    or dictionaries are mapped onto."""
    kv_type, kv_value = key_values
    return key_values_to_arrow(pa, kv_type.item, np.asarray(kv_value).reshape(-1), "us",
                               False, lambda i: "")


class _FieldToIdv:
    """How one Arrow field becomes an idv column: its type, metadata, and each chunk's values.

    With ``idv.type`` metadata that still fits the Arrow type, the type and metadata come back
    exactly; otherwise they are inferred from the Arrow type. A dictionary column is a key
    whose KeyValues are its dictionary's values (all chunks' dictionaries merged, in order of
    first appearance: ``set_dictionary``); chunks are mapped onto them by value.
    """

    def __init__(self, pa, field, type_override=None, missing_text=None):
        self.pa = pa
        self.missing_text = missing_text    # what its null Text becomes (None: an error)
        self.name = field.name
        self.where = f"column {field.name!r}"
        at = field.type
        meta = field.metadata or {}
        self.type = None
        self.metadata = {}
        self.key_values = None       # Arrow array the dictionary chunks map onto
        self.needs_dictionary = False
        if TYPE_KEY in meta:
            try:
                t = T.parse_type(meta[TYPE_KEY].decode())
                spec = (metadata_from_json(meta[METADATA_KEY].decode())
                        if METADATA_KEY in meta else {})
            except (ValueError, KeyError, TypeError, UnicodeDecodeError):
                t, spec = None, {}
            by_value = meta.get(KEY_VALUES_KEY) == b"values"
            if t is not None and arrow_holds(pa, t, at, spec, by_value):
                self.type, self.metadata = t, spec
                if isinstance(t, T.Key) and by_value and not pa.types.is_dictionary(at):
                    self.key_values = _key_values_array(pa, spec["KeyValues"])
        if type_override is not None:
            t = T.as_type(type_override, self.where)
            if t != self.type:
                self.type = t
                if not isinstance(t, T.Key):
                    self.metadata.pop("KeyValues", None)
        if self.type is None:
            if pa.types.is_dictionary(storage_type(at)):
                self.needs_dictionary = True
            else:
                self.type = infer_type(pa, at, self.where)
        if isinstance(self.type, T.Key) and pa.types.is_dictionary(storage_type(at)) \
                and not self.needs_dictionary:
            kv = self.metadata.get("KeyValues")
            if kv is None:
                self.needs_dictionary = True
            else:
                self.key_values = _key_values_array(pa, kv)
        self._dictionary_type = at.value_type if pa.types.is_dictionary(at) else None
        # a time column from elsewhere keeps its Arrow type (one that idv's reader chose, with
        # idv.type, is no user's choice: the file stays as it was)
        written_from = source_type(at=storage_type(at))
        if written_from is not None and self.type in ticks.TIME_ITEMS and TYPE_KEY not in meta:
            self.metadata.setdefault(SOURCE_TYPE, (T.Text, written_from))

    def set_dictionary(self, values):
        """The merged dictionary of every chunk (no nulls): the key values."""
        pa = self.pa
        n = len(values)
        if n == 0:
            raise ValueError(f"{self.where}: an empty dictionary cannot be a key (ML.NET key "
                             f"counts are > 0); decode it first (pyarrow.compute."
                             f"dictionary_decode) or give the column a type")
        item = infer_item(pa, values.type, self.where)
        if self.type is None:
            self.type = T.Key(T.UInt32 if n <= 2**32 - 1 else T.UInt64, count=n)
        kv = items_from_arrow(pa, item, values, lambda i: f"{self.where} dictionary item {i}")
        self.metadata["KeyValues"] = (T.Vector(item, n), kv)
        self.key_values = values
        self.needs_dictionary = False

    def remap(self, arr, describe):
        """Raw key values of a dictionary array (or of an array of the key values): the
        values' positions in key_values + 1; null (or a null dictionary value) -> 0, the
        missing key."""
        import pyarrow.compute as pc
        kv = self.key_values
        if not self.pa.types.is_dictionary(arr.type):
            if arr.type != kv.type:
                arr = arr.cast(kv.type)
            pos = pc.index_in(arr, value_set=kv)
            missing = pos.is_null()
            if missing.null_count or pos.null_count:
                nulls = numpy_view(arr.is_null()).astype(bool)
                absent = numpy_view(missing).astype(bool) & ~nulls
                if absent.any():
                    i = int(np.flatnonzero(absent)[0])
                    raise ValueError(f"{describe(i)}: {arr[i].as_py()!r} is not one of the "
                                     f"column's key values ({len(kv)} values)")
            raw = numpy_view(pos.fill_null(-1)).astype(np.int64) + 1
            return raw.astype(self.type.raw.dtype)
        d = arr.dictionary
        if d.type != kv.type:
            d = d.cast(kv.type)
        idx = arr.indices       # signed for the null's -1: polars' indices are unsigned
        idx = numpy_view(idx.cast(self.pa.int64()).fill_null(-1) if idx.null_count
                         else idx).astype(np.int64)
        if d.equals(kv):
            pos = np.arange(len(d), dtype=np.int64)
        else:
            pos = numpy_view(pc.index_in(d, value_set=kv).fill_null(-1)).astype(np.int64)
        dnull = numpy_view(d.is_null()).astype(bool) if d.null_count else np.zeros(len(d), bool)
        missing = (pos < 0) & ~dnull
        used = idx >= 0
        if missing.any():
            bad = used & missing[np.where(used, idx, 0)]
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ValueError(f"{describe(i)}: {d[int(idx[i])].as_py()!r} is not one of the "
                                 f"column's key values ({len(kv)} values)")
        dtype = self.type.raw.dtype if isinstance(self.type, T.Key) else np.uint32
        safe_idx = np.where(used, idx, 0)
        raw = np.where(used & ~dnull[safe_idx], pos[safe_idx] + 1, 0) if len(d) \
            else np.zeros(len(idx), np.int64)
        return raw.astype(dtype)

    def _text(self, arr, describe):
        """A Text column's values as the writer's Utf8Text, from Arrow's buffers."""
        pa = self.pa
        if isinstance(arr.type, pa.BaseExtensionType):
            arr = arr.storage
        if pa.types.is_dictionary(arr.type):
            if arr.dictionary.type == pa.string_view():    # polars': no kernel decodes views
                arr = pa.DictionaryArray.from_arrays(arr.indices,
                                                     arr.dictionary.cast(pa.large_string()))
            arr = arr.dictionary_decode()
        arr = filled_text(pa, arr, self.missing_text)
        no_nulls(arr, describe, T.Text)
        return utf8_from_arrow(pa, arr, describe)

    def _describe(self, row0, size=None, offsets=None):
        return Where(self.where, offsets, width=size, base=row0)

    def convert(self, arr, row0=0):
        """An Arrow Array or ChunkedArray of this field -> values for idv.write / write_batch."""
        pa = self.pa
        if isinstance(arr, pa.ChunkedArray):
            parts, start = [], row0
            for chunk in arr.chunks:
                parts.append(self.convert(chunk, start))
                start += len(chunk)
            if not parts:
                return self.convert(pa.array([], type=arr.type), row0)
            if len(parts) == 1:
                return parts[0]
            if isinstance(parts[0], Ragged):
                return Ragged.concat(parts)
            if isinstance(parts[0], (Utf8Text, Utf8Vectors)):
                return type(parts[0]).concat(parts)
            return np.concatenate(parts)
        t = self.type
        remap = self.remap if self.key_values is not None else None
        if not isinstance(t, T.Vector):
            if t is T.Text:
                return self._text(arr, self._describe(row0))
            return items_from_arrow(pa, t, arr, self._describe(row0), remap)
        if isinstance(arr.type, pa.BaseExtensionType):
            arr = arr.storage
        at = arr.type
        if arr.null_count:
            i = first_null(arr)
            not_a_vector(f"{self.where} row {row0 + i}", None)
        n = len(arr)
        text = t.item is T.Text and remap is None   # items from Arrow's buffers (Utf8Vectors)
        if pa.types.is_fixed_size_list(at):
            flat, size = arr, 1
            while pa.types.is_fixed_size_list(flat.type):
                size *= flat.type.list_size
                flat = flat.flatten()
            if text:
                return Utf8Vectors(self._text(flat, self._describe(row0, size=size)),
                                   np.arange(n + 1, dtype=np.int64) * size)
            items = items_from_arrow(pa, t.item, flat, self._describe(row0, size=size), remap)
            return items.reshape(n, size)
        if is_list_type(pa, at):
            arr = _dense_lists(pa, arr)
            offsets = numpy_view(arr.offsets).astype(np.int64)
            offsets = offsets - offsets[0]
            if text:
                return Utf8Vectors(self._text(arr.flatten(),
                                              self._describe(row0, offsets=offsets)), offsets)
            items = items_from_arrow(pa, t.item, arr.flatten(),
                                      self._describe(row0, offsets=offsets), remap)
            return Ragged(items, offsets)
        raise TypeError(f"{self.where}: Arrow {at} values cannot make a {t} column")


def _dense_lists(pa, arr):
    """A list array, or a list view's rows in order as a large_list array (pyarrow's cast of
    a view gives an array whose offsets are too short: rows out of order, or sharing values,
    read wrong)."""
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        return arr
    starts = arr.offsets.to_numpy().astype(np.int64)
    sizes = arr.sizes.to_numpy().astype(np.int64)
    ends = np.zeros(len(arr) + 1, np.int64)
    np.cumsum(sizes, out=ends[1:])
    picks = np.arange(ends[-1], dtype=np.int64) - np.repeat(ends[:-1] - starts, sizes)
    return pa.LargeListArray.from_arrays(pa.array(ends), arr.values.take(pa.array(picks)))


def _unique_values(pa, dictionaries):
    """The distinct non-null values of several dictionaries, in order of first appearance."""
    import pyarrow.compute as pc
    dictionaries = list(dictionaries)
    if not dictionaries:
        return None
    base = dictionaries[0].type
    merged = pa.concat_arrays([d if d.type == base else d.cast(base) for d in dictionaries])
    return pc.unique(merged).drop_null()


class ArrowToIdv:
    """Arrow schema -> idv columns, for tables and for streams of record batches.

    ``fields`` hold each column's idv type and metadata; ``pending`` lists the dictionary
    columns whose key values must be collected first (``add_dictionaries``); ``convert(batch,
    row0)`` gives a dict name -> values for idv.Writer.write_batch; ``missing_text``: what
    null Text becomes (None: a ValueError naming the row), for idv.write and idv.convert alike.
    """

    def __init__(self, schema, types=None, missing_text=None):
        pa = self.pa = import_pyarrow()
        types = dict(types or {})
        names = list(schema.names)
        unknown = [k for k in types if k not in names]
        if unknown:
            raise KeyError(f"types for unknown columns {unknown}; columns: {names}")
        self.fields = [_FieldToIdv(pa, schema.field(i), types.get(schema.field(i).name),
                                   missing_text) for i in range(len(schema))]
        self._seen = {i: [] for i, f in enumerate(self.fields) if f.needs_dictionary}

    @property
    def pending(self):
        return [i for i, f in enumerate(self.fields) if f.needs_dictionary]

    def add_dictionaries(self, i, column):
        """Collect the dictionaries of column i (an Array or ChunkedArray of a batch)."""
        pa = self.pa
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        for c in chunks:
            if isinstance(c.type, pa.BaseExtensionType):
                c = c.storage
            self._seen[i] = [_unique_values(pa, self._seen[i] + [c.dictionary])]

    def finish_dictionaries(self):
        pa = self.pa
        for i in self.pending:
            f = self.fields[i]
            seen = self._seen.get(i) or []
            values = seen[0] if seen else pa.array([], type=f._dictionary_type)
            f.set_dictionary(values)

    @property
    def schema_pairs(self):
        return [(f.name, f.type) for f in self.fields]

    @property
    def types(self):
        """name -> idv type; a column whose name repeats by its position (by name, each would
        have the last one's type)."""
        count = Counter(f.name for f in self.fields)
        return {(i if count[f.name] > 1 else f.name): f.type for i, f in enumerate(self.fields)}

    @property
    def metadata(self):
        return {f.name: dict(f.metadata) for f in self.fields if f.metadata}

    def convert(self, batch, row0=0):
        """A RecordBatch or Table with this schema -> [(name, values)] in schema order."""
        return [(f.name, f.convert(batch.column(i), row0)) for i, f in enumerate(self.fields)]


def arrow_table(data, who):
    """A pyarrow Table of Arrow data: a Table as it is; a RecordBatch, a RecordBatchReader or
    a pyarrow Dataset (idv.arrow_dataset's too) read whole. TypeError naming `who` for
    anything else."""
    pa = import_pyarrow()
    if hasattr(data, "scanner") and hasattr(data, "to_table"):     # a pyarrow Dataset
        data = data.scanner().to_reader()
    if isinstance(data, pa.RecordBatchReader):
        data = data.read_all()
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if not isinstance(data, pa.Table):
        raise TypeError(f"{who} takes a pyarrow Table, RecordBatch, RecordBatchReader or "
                        f"Dataset, not {type(data).__name__}")
    return data


def from_arrow(table, *, types=None, missing_text=None):
    """A pyarrow Table or RecordBatch -> (columns, types, metadata) for idv.write.

    Fields written by to_arrow carry ``idv.type`` and ``idv.metadata``: the exact ML.NET type
    and annotations come back. Others are typed from Arrow: integers, floats (float16 ->
    Single), bool, strings (Text), timestamps (DateTime; with a time zone, DateTimeOffset with
    each value's UTC offset), dates (DateTime), durations and times of day (TimeSpan),
    fixed-size lists and fixed_shape_tensor (fixed vectors), lists (variable vectors),
    dictionaries (Key<UInt32, n> with the dictionary as KeyValues; nulls -> 0, the missing
    key). Nulls are NaN in float columns, missing in keys, and an error elsewhere (ML.NET has
    no missing value for them).

    Values are kept in Arrow's buffers where they can be: numbers without nulls as numpy views,
    Text as a ``Utf8Text`` (the UTF-8 bytes and offsets, checked; ``np.asarray`` or
    ``tolist()`` give str objects), lists of strings as ``Utf8Vectors`` (a Utf8Text of the
    items and the row offsets), so that idv.write makes no Python object per value.

    Parameters
    ----------
    table : pyarrow.Table, RecordBatch, RecordBatchReader or pyarrow.dataset.Dataset
        A reader or a dataset is read whole.
    types : dict, optional
        name -> idv type, overriding the type of some columns.
    missing_text : str, optional
        What null Text (strings, and the string items of lists) becomes, e.g. ``""``;
        default: ValueError naming the row.

    Returns
    -------
    tuple
        (columns, types, metadata): a list of (name, values), name -> idv type (position ->
        type for a name that repeats), and name -> {kind: (type, value)}.
    """
    table = arrow_table(table, "from_arrow")
    plan = ArrowToIdv(table.schema, types, missing_text)
    for i in plan.pending:
        plan.add_dictionaries(i, table.column(i))
    plan.finish_dictionaries()
    return plan.convert(table), plan.types, plan.metadata


def arrow_column_values(arr, t, name, row0=0, missing_text=None, key_values=None):
    """An Arrow Array or ChunkedArray given to idv.Writer.write_batch for the column `name` of
    type `t` -> the values the writer takes (Text as Utf8Text, numbers from the buffers).
    `row0`: the file's row of the first value, for the messages; `missing_text`: what its
    null Text becomes; `key_values`: a key column's (type, value) KeyValues, which a
    dictionary array is mapped onto by value."""
    pa = import_pyarrow()
    field = _FieldToIdv(pa, pa.field(name, arr.type), t, missing_text)
    if field.needs_dictionary or field.key_values is not None:
        if key_values is None:
            raise TypeError(f"column {name!r}: a dictionary array for a {t} column without "
                            f"KeyValues to map it onto; give them in metadata=, the key values "
                            f"(1-based integers, 0 missing), or decode the dictionary first")
        field.needs_dictionary, field.key_values = False, _key_values_array(pa, key_values)
    return field.convert(arr, row0)
