"""One column of the writer: its type and codec, its values checked and held between batches,
ML.NET's size estimate of its rows, and the codec payload of one block of them.

Scalars are held as one array of stored items; vectors as a `VectorChunk` (per-row lengths
and sparse counts, the stored items, sparse indices), the form ML.NET's VBuffer codec writes.
"""
from __future__ import annotations

import math

import numpy as np

from idv import _codecs, _encode, types as T
from idv._storage import bounds, statistics
from idv._values.infer import (arrow_of, flatten_rows, first_rowlike, is_scipy_sparse,
                               number_array, row_length, values_of)
from idv._values.arrow_types import import_pyarrow
from idv._values.vectors import Ragged, Sparse, object_array
from idv.errors import Where
from idv._writer.arrow import arrow_column_values
from idv._writer.missing import filled_values, missing_value
from idv._writer.values import Utf8Text, Utf8Vectors, convert_items, first, join_items

MAX_INT32 = 2**31 - 1
# items whose values stay Python objects in a list (str; RowId's 128-bit ints)
_OBJECT_ITEMS = (T.Text, T.RowId)


def _check_type(t, where):
    if isinstance(t, T.Vector):
        if any(d > MAX_INT32 for d in t.dims) or t.size > MAX_INT32:
            raise ValueError(f"{where}: vector dimensions {t.dims} exceed int32")
    return t


class VectorChunk:
    """Vectors ready to encode: per row a length and a count (-1 dense; counts None = all
    dense), the stored items in row order (`vptr` row starts), sparse indices (`iptr`).
    Dense rows that all have one length (`width`) keep only their values: the per-row arrays
    are made when asked for."""

    __slots__ = ("_lengths", "counts", "values", "_vptr", "indices", "iptr", "width", "n")

    def __init__(self, lengths, counts, values, vptr, indices, iptr, width=None, n=None):
        self._lengths = lengths
        self.counts = counts
        self.values = values
        self._vptr = vptr
        self.indices = indices
        self.iptr = iptr
        self.width = width
        self.n = len(lengths) if lengths is not None else n

    @classmethod
    def uniform(cls, values, width, n):
        return cls(None, None, values, None, _EMPTY_I32, None, width, n)

    @property
    def lengths(self):
        if self._lengths is None:
            self._lengths = np.full(self.n, self.width, np.int64)
        return self._lengths

    @property
    def vptr(self):
        if self._vptr is None:
            self._vptr = np.arange(self.n + 1, dtype=np.int64) * self.width
        return self._vptr

    def items_before(self, k):
        """The items stored before each of rows 1..k (vptr[1:k + 1]), without building the
        whole column's vptr for a uniform chunk (the writer asks for one block's worth)."""
        if self._vptr is None and self.width is not None:
            return np.arange(1, k + 1, dtype=np.int64) * self.width
        return self.vptr[1:k + 1]

    def __len__(self):
        return self.n

    def rows(self, a, b):
        if self.width is not None:
            w = self.width
            return VectorChunk.uniform(self.values[a * w:b * w], w, b - a)
        vp = self.vptr[a:b + 1]
        values = self.values[vp[0]:vp[-1]]
        if self.counts is None:
            return VectorChunk(self.lengths[a:b], None, values, vp - vp[0], self.indices[:0],
                               None)
        ip = self.iptr[a:b + 1]
        return VectorChunk(self.lengths[a:b], self.counts[a:b], values, vp - vp[0],
                           self.indices[ip[0]:ip[-1]], ip - ip[0])

    def copy(self):
        if self.width is not None:
            return VectorChunk.uniform(self.values.copy(), self.width, self.n)
        return VectorChunk(self.lengths.copy(),
                           None if self.counts is None else self.counts.copy(),
                           self.values.copy(), self.vptr.copy(), self.indices.copy(),
                           None if self.iptr is None else self.iptr.copy())

    @staticmethod
    def concat(parts):
        if len(parts) == 1:
            return parts[0]
        w = parts[0].width
        if w is not None and all(p.width == w for p in parts):
            return VectorChunk.uniform(join_items([p.values for p in parts]), w,
                                       sum(p.n for p in parts))
        lengths = np.concatenate([p.lengths for p in parts])
        values = join_items([p.values for p in parts])
        vptr = _offsets(np.concatenate([np.diff(p.vptr) for p in parts]))
        if all(p.counts is None for p in parts):
            return VectorChunk(lengths, None, values, vptr, parts[0].indices[:0], None)
        counts = np.concatenate([np.full(len(p), -1, np.int32) if p.counts is None
                                 else p.counts for p in parts])
        indices = np.concatenate([p.indices for p in parts])
        iptr = _offsets(np.maximum(counts, 0))
        return VectorChunk(lengths, counts, values, vptr, indices, iptr)


def _offsets(lengths):
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


_EMPTY_I32 = np.zeros(0, np.int32)


def _dense_vec(lengths, values):
    lengths = np.asarray(lengths, np.int64)
    return VectorChunk(lengths, None, values, _offsets(lengths), _EMPTY_I32, None)


class Column:
    """One column's type, codec, and how its values are checked, estimated and encoded."""

    def __init__(self, index, name, type_, missing_text=None):
        where = f"column {name!r}"
        if not isinstance(name, str) or not name:
            raise ValueError(f"column names must be non-empty str (ML.NET cannot load an empty "
                             f"name), got {name!r}")
        self.index = index
        self.name = name
        self.type = _check_type(T.as_type(type_, where), where)
        self.is_vector = isinstance(self.type, T.Vector)
        self.item = T.item_type(self.type)
        info = T.item_info(self.item)
        self.kind = info.kind
        self.itemsize = info.itemsize
        self.codec_name, self.codec_params = _codecs.codec_of(self.type)
        self.where = where
        # what a missing Text becomes (None: refused); a Text column's alone
        self.missing_text = missing_text if self.item is T.Text else None
        # a key's KeyValues as metadata= gives them ((type, value)), which an Arrow
        # dictionary given for it is mapped onto by value; None: none given
        self.key_values = None
        self._row0 = 0
        # a block's payload is its values' own bytes: nothing to encode
        self.trivial = self.kind == T.FIXED and not self.is_vector

    # ---- converting input
    def prepare(self, value, row0=0):
        """Check and convert a batch of this column's values; returns (chunk, rows). `row0`:
        the file's row of the batch's first, for the messages."""
        self._row0 = row0
        arrow = arrow_of(value)
        if arrow is None and self.key_values is not None and \
                str(getattr(value, "dtype", "")) == "category":   # onto the key's labels
            arrow = import_pyarrow().array(value)
        if arrow is not None:       # Arrow arrays, Arrow-backed pandas: from their buffers
            value = arrow_column_values(arrow, self.type, self.name, row0, self.missing_text,
                                        self.key_values)
        value = values_of(value, Where(self.where, base=row0))
        if self.missing_text is not None:
            value = filled_values(value, self.missing_text)
        if isinstance(value, np.ma.MaskedArray):
            value = self._unmasked(value)
        if not self.is_vector:
            return self._prepare_scalar(value)
        return self._prepare_vector(value)

    def _unmasked(self, value):
        """A numpy masked array's values, its masked entries written as missing: NaN in
        Single and Double, 0 in keys; refused (naming the first) in the other types, which
        have no missing value (the entries under the mask are no data to write)."""
        mask = np.ma.getmaskarray(value)
        data = np.ma.getdata(value)
        if not mask.any():
            return data
        width = math.prod(data.shape[1:]) if data.ndim > 1 else None
        where = Where(self.where, width=width, base=self._row0)
        flat = mask.reshape(-1)
        if self.item not in (T.Single, T.Double) and not isinstance(self.item, T.Key):
            missing_value(where(first(flat)), self.item, "masked", "fill it first "
                          f"(masked_array.filled({repr('') if self.item is T.Text else 'value'}))")
        out = convert_items(self.item, np.where(mask, 0, data), where)
        if out.dtype.kind == "f":
            out[flat] = np.nan
        return out.reshape(data.shape)

    def _prepare_scalar(self, value):
        where = Where(self.where, base=self._row0)
        if isinstance(value, Utf8Text):
            if self.item is T.Text:
                return value, len(value)
            value = value.to_objects()
        if isinstance(value, (Ragged, Sparse)) or is_scipy_sparse(value):
            raise TypeError(f"{self.where}: {type(value).__name__} given for a scalar column of "
                            f"type {self.type}")
        if isinstance(value, np.ndarray):
            arr = value
        elif isinstance(value, (list, tuple)):
            if self.item in _OBJECT_ITEMS:
                arr = object_array(value)
            else:
                try:
                    arr = number_array(value)
                except (ValueError, OverflowError):
                    arr = object_array(value)
        else:
            raise TypeError(f"{self.where}: expected a 1-d array or list of values, not "
                            f"{type(value).__name__}")
        if arr.ndim != 1:
            raise ValueError(f"{self.where}: a {self.type} column needs a 1-d array (one value "
                             f"per row), got shape {arr.shape}")
        if arr.dtype == object and self.item is not T.Text and len(arr):
            row = first_rowlike(arr)
            if row is not None:
                raise TypeError(f"{where(row)}: a sequence in a scalar {self.type} column")
        out = convert_items(self.item, arr, where)
        return np.ascontiguousarray(out), len(out)

    def _prepare_vector(self, value):
        t = self.type
        size = t.size
        if isinstance(value, Utf8Vectors):         # Arrow lists of strings
            lengths = np.diff(value.offsets)
            self._check_lengths(lengths)
            if self.item is T.Text:
                return _dense_vec(lengths, value.values), len(lengths)
            value = Ragged(value.values.to_objects(), value.offsets)
        if is_scipy_sparse(value):
            if len(value.shape) != 2:
                raise ValueError(f"{self.where}: a sparse matrix must be 2-d, not {value.shape}")
            m = value.tocsr()
            if m.indptr[-1] != len(m.indices) or len(m.data) != len(m.indices):
                raise ValueError(f"{self.where}: inconsistent sparse matrix (indptr ends at "
                                 f"{m.indptr[-1]}, {len(m.indices)} indices, {len(m.data)} "
                                 f"values)")
            return self._prepare_sparse(np.asarray(m.data), m.indices, m.indptr, m.shape[1],
                                        "; call .sum_duplicates() and .sort_indices() on the "
                                        "matrix first")
        if isinstance(value, Sparse):
            return self._prepare_sparse(value.values, value.indices, value.offsets,
                                        value.length, "")
        if isinstance(value, Ragged):
            lengths = np.diff(value.offsets)
            self._check_lengths(lengths)
            where = Where(self.where, value.offsets, base=self._row0)
            values = convert_items(self.item, value.values, where)
            return _dense_vec(lengths, np.ascontiguousarray(values)), len(lengths)
        if isinstance(value, np.ndarray) and value.ndim >= 2:    # numbers, or objects (str)
            n = value.shape[0]
            shape = value.shape[1:]
            width = math.prod(shape)
            if t.is_fixed and not (shape == t.dims or (len(shape) == 1 and width == size)):
                raise ValueError(f"{self.where}: rows of shape {shape} do not fit {t} (wrong "
                                 f"vector size for a fixed-size type)")
            where = Where(self.where, width=width, base=self._row0)
            values = convert_items(self.item, value.reshape(-1), where)
            return VectorChunk.uniform(np.ascontiguousarray(values), width, n), n
        if isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype != object:
            raise ValueError(f"{self.where}: a {t} column needs one vector per row (a 2-d array, "
                             f"idv.Ragged, list of sequences or sparse matrix), got a 1-d "
                             f"{value.dtype} array")
        if not isinstance(value, (list, tuple, np.ndarray)):
            raise TypeError(f"{self.where}: expected a 2-d array, idv.Ragged, list of sequences "
                            f"or scipy.sparse matrix, not {type(value).__name__}")
        rows = list(value)
        lengths = np.array([row_length(r, self.where, self._row0 + i)
                            for i, r in enumerate(rows)], np.int64)
        self._check_lengths(lengths)
        flat = flatten_rows(rows, self.where, self._row0)
        where = Where(self.where, _offsets(lengths), base=self._row0)
        values = convert_items(self.item, flat, where)
        return _dense_vec(lengths, np.ascontiguousarray(values)), len(rows)

    def _check_lengths(self, lengths):
        t = self.type
        if t.is_fixed:
            bad = lengths != t.size
            if bad.any():
                i = first(bad)
                raise ValueError(f"{self.where} row {self._row0 + i}: {lengths[i]} items, but "
                                 f"{t} needs {t.size} (wrong vector size for a fixed-size type)")
        if len(lengths) and lengths.max() > MAX_INT32:
            raise ValueError(f"{self.where} row {self._row0 + first(lengths > MAX_INT32)}: "
                             f"vector longer than int32")

    def _prepare_sparse(self, data, indices, indptr, length, hint):
        """CSR rows (one vector length, or one per row) as sparse VBuffers; a row that stores
        every slot is written dense, as ML.NET does."""
        t = self.type
        n = len(indptr) - 1
        per_row = not isinstance(length, (int, np.integer))
        lengths = np.asarray(length, np.int64) if per_row else np.full(n, int(length), np.int64)
        if t.is_fixed:
            bad = lengths != t.size
            if bad.any():
                i = first(bad)
                what = (f"row {self._row0 + i}: vector length {lengths[i]}" if per_row
                        else f"sparse matrix with {lengths[i]} columns")
                raise ValueError(f"{self.where} {what} does not fit {t} (wrong vector size for "
                                 f"a fixed-size type)")
        if n and lengths.max() > MAX_INT32:
            raise ValueError(f"{self.where}: vector length {lengths.max()} exceeds int32")
        indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        indices = np.ascontiguousarray(indices, dtype=np.int64)
        row, why = _encode.check_sparse_rows(indptr, indices, lengths if per_row
                                             else int(length))
        if row >= 0:
            raise ValueError(f"{self.where} row {self._row0 + row}: sparse {why}{hint}")
        nnz = np.diff(indptr)
        dense = nnz == lengths
        counts = np.where(dense, -1, nnz).astype(np.int32)
        where = Where(self.where, indptr, indices, base=self._row0)
        values = convert_items(self.item, np.asarray(data), where)
        sparse_idx = indices[np.repeat(~dense, nnz)] if dense.any() else indices
        return VectorChunk(lengths, counts, np.ascontiguousarray(values), indptr,
                           sparse_idx.astype(np.int32), _offsets(np.maximum(counts, 0))), n

    # ---- rows of prepared chunks
    def concat(self, chunks):
        if self.is_vector:
            return VectorChunk.concat(chunks)
        return join_items(chunks)

    def rows(self, chunk, a, b):
        return chunk.rows(a, b) if self.is_vector else chunk[a:b]

    def copy(self, chunk):
        return chunk.copy()

    # ---- encoding
    def payload(self, chunk):
        """One block's codec payload (bytes or a contiguous uint8 array)."""
        if not self.is_vector:
            return _ENCODE[self.kind](chunk)
        n = len(chunk)
        if self.type.is_fixed:
            size = self.type.size
        elif chunk.width is not None:
            size = chunk.width if n else 0
        else:
            lengths = chunk.lengths
            size = int(lengths[0]) if n and bool((lengths == lengths[0]).all()) else 0
        counts = chunk.counts if chunk.counts is not None else np.full(n, -1, np.int32)
        return _encode.encode_vbuffer(n, size, chunk.lengths if size == 0 else _EMPTY_I32,
                                      counts, chunk.indices, _ENCODE[self.kind](chunk.values))

    def payload_with_statistics(self, chunk):
        """(payload, Block) of a scalar Text block of str: its statistics found while it is
        encoded, from the UTF-8 as written; (payload, None) for any other block."""
        if self.kind != T.TEXT or self.is_vector or isinstance(chunk, Utf8Text):
            return self.payload(chunk), None
        raw, low, high, ascii = _encode.encode_text(np.ascontiguousarray(chunk),
                                                    statistics.PREFIX + 1)
        return raw, bounds.text_bounds(len(chunk), low, high, ascii)

    def estimate(self, chunk, k):
        """ML.NET's commit-length estimate after each of the first k rows."""
        r = np.arange(1, k + 1, dtype=np.int64)
        if not self.is_vector:
            return _ESTIMATE[self.kind](chunk, r, self.itemsize)
        items = chunk.items_before(k)
        sparse = chunk.iptr[1:k + 1] if chunk.counts is not None else 0
        inner = _ESTIMATE[self.kind](chunk.values, items, self.itemsize)
        return _encode.vbuffer_estimate(r, not self.type.is_fixed, sparse, inner)


# item kind (idv.types.ItemType.kind) -> fn(stored items) -> their codec payload
_ENCODE = {
    T.FIXED: _encode.encode_fixed,
    T.BOOL: _encode.encode_bool,
    T.TEXT: lambda values: (values.payload() if isinstance(values, Utf8Text)
                            else _encode.encode_text(np.ascontiguousarray(values))),
    T.DTO: lambda values: _encode.encode_dto(values["minutes"], values["ticks"]),
}


def _text_estimate(values, items, itemsize):
    if isinstance(values, Utf8Text):
        # the units of the values counted only (a batch can hold many more)
        last = int(items[-1]) if len(items) else 0
        return _encode.text_estimate(items, values[:last].cumulative_units()[items])
    units = _offsets(_encode.text_units(np.ascontiguousarray(values[:items[-1]]))) \
        if len(items) else np.zeros(1, np.int64)
    return _encode.text_estimate(items, units[items])


# item kind -> fn(stored items, cumulative item counts, item size) -> ML.NET's estimate of the
# item codec's length after each count
_ESTIMATE = {
    T.FIXED: lambda values, items, itemsize: _encode.fixed_estimate(items, itemsize),
    T.BOOL: lambda values, items, itemsize: _encode.bool_estimate(items),
    T.TEXT: _text_estimate,
    T.DTO: lambda values, items, itemsize: _encode.fixed_estimate(items, itemsize),
}
