"""Vector columns in numpy form: dense (N, *dims), ragged (`Ragged`), sparse (`Sparse`, or
scipy CSR).

ML.NET stores each block of vectors as per-row lengths and counts (-1 = dense), the sparse
rows' indices, and the stored items in row order (see VectorBlock in idv._codecs). The
functions below turn a list of such blocks into the form the user asked for; `Ragged` and
`Sparse` are also what idv.write takes for variable-size and sparse vectors.
"""
from __future__ import annotations

import sys

import numpy as np

from idv._values import ticks
from idv.errors import require
from idv import types as T


class Ragged:
    """Variable-size vectors: row i is ``values[offsets[i]:offsets[i + 1]]``.

    Flat values plus offsets (as in Arrow's list arrays) keep a column of millions of short
    vectors in two arrays; ``to_list()`` gives one numpy array per row.

    Indexing with an int gives one row's array, with a slice or an array of row numbers a
    new Ragged.

    Parameters
    ----------
    values : array_like
        The flat array of every row's items.
    offsets : array_like of int
        The ``len(self) + 1`` row starts: 0 first, ``len(values)`` last, never decreasing
        (ValueError otherwise).

    Examples
    --------
    >>> r = idv.Ragged([1, 2, 3], [0, 2, 2, 3])
    >>> len(r), r[0].tolist(), r.lengths.tolist()
    (3, [1, 2], [2, 0, 1])
    """

    __slots__ = ("values", "offsets")

    def __init__(self, values, offsets):
        self.values = np.asarray(values)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        if self.offsets.ndim != 1 or len(self.offsets) == 0 or self.offsets[0] != 0 \
                or self.offsets[-1] != len(self.values) or (np.diff(self.offsets) < 0).any():
            raise ValueError("offsets must start at 0, not decrease and end at len(values)")

    @classmethod
    def from_list(cls, rows, dtype=None):
        """A Ragged from a sequence of rows, each flattened.

        Parameters
        ----------
        rows : sequence of array_like
            The rows (lists or arrays).
        dtype : numpy dtype, optional
            As for np.asarray.
        """
        rows = [np.asarray(r, dtype=dtype).reshape(-1) for r in rows]
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum([len(r) for r in rows], out=offsets[1:])
        if rows:
            values = np.concatenate(rows)
        else:
            values = np.empty(0, dtype if dtype is not None else np.float64)
        return cls(values, offsets)

    @property
    def lengths(self):
        """Each row's number of items."""
        return np.diff(self.offsets)

    @property
    def dtype(self):
        """The dtype of the items."""
        return self.values.dtype

    def __len__(self):
        return len(self.offsets) - 1

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            n = len(self)
            i = int(key) + n if key < 0 else int(key)
            if not 0 <= i < n:
                raise IndexError(f"row {key} out of range for {n} rows")
            return self.values[self.offsets[i]:self.offsets[i + 1]]
        if isinstance(key, slice) and key.step in (None, 1):
            start, stop, _ = key.indices(len(self))
            stop = max(start, stop)
            offs = self.offsets[start:stop + 1]
            return Ragged(self.values[offs[0]:offs[-1]], offs - offs[0])
        rows = np.arange(len(self))[key]
        return self.take(rows)

    def take(self, rows):
        """A new Ragged of the given rows, in that order.

        Parameters
        ----------
        rows : array_like of int
            Row numbers.
        """
        rows = np.asarray(rows, dtype=np.int64)
        starts, lengths = self.offsets[rows], np.diff(self.offsets)[rows]
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        gather = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
        return Ragged(self.values[gather], offsets)

    def __iter__(self):
        for i in range(len(self)):
            yield self.values[self.offsets[i]:self.offsets[i + 1]]

    def to_list(self):
        """One numpy array per row (views into ``values``)."""
        if len(self) == 0:
            return []   # np.split would give one empty piece
        return np.split(self.values, self.offsets[1:-1])

    tolist = to_list

    def __eq__(self, other):
        if not isinstance(other, Ragged):
            return NotImplemented
        return (np.array_equal(self.offsets, other.offsets)
                and np.array_equal(self.values, other.values,
                                   equal_nan=self.values.dtype.kind in "fc"))

    def __repr__(self):
        def row(r, limit=6):   # long rows shortened, as numpy does
            s = repr(r[:limit].tolist())
            return s[:-1] + ", ...]" if len(r) > limit else s
        rows = ", ".join(row(r) for r in self[:3]) + (", ..." if len(self) > 3 else "")
        return f"Ragged([{rows}], rows={len(self)}, dtype={self.values.dtype})"

    @staticmethod
    def concat(parts):
        """One Ragged holding the rows of ``parts``, in order.

        Parameters
        ----------
        parts : iterable of Ragged
            Raggeds of the same dtype.
        """
        parts = list(parts)
        values = np.concatenate([p.values for p in parts])
        lengths = np.concatenate([p.lengths for p in parts])
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return Ragged(values, offsets)


class Sparse:
    """Sparse vectors of any item type, in CSR form: row ``i`` stores ``values[offsets[i]:
    offsets[i + 1]]`` at the slots ``indices[offsets[i]:offsets[i + 1]]`` (strictly
    increasing) of a vector of ``length`` items; every other slot holds the item type's
    default ("" for Text, 0 ticks for DateTime / TimeSpan, missing (0) for keys, False, 0).

    scipy.sparse matrices cover numbers and booleans; this form covers every item type, as
    ML.NET's VBuffer does.

    Parameters
    ----------
    values : array_like
        Any 1-d array or list of items (str, datetime64, key integers, structured
        DateTimeOffset / RowId ...).
    indices : array_like of int
        The slot of each value.
    offsets : array_like of int
        The ``rows + 1`` starts of the rows in ``values``: 0 first, ``len(values)`` last.
    length : int or array_like of int
        One int for every row (a ``Vector<T, length>`` column), or one length per row (a
        variable-size ``Vector<T>`` column).

    Examples
    --------
    >>> idv.Sparse(["a", "b", "c"], indices=[0, 7, 2], offsets=[0, 2, 2, 3], length=10)
    <idv.Sparse 3 vectors of size 10, 3 stored object items>
    """

    __slots__ = ("values", "indices", "offsets", "length")

    def __init__(self, values, indices, offsets, length):
        if isinstance(values, (list, tuple)):
            values = object_array(values) if values and all(
                isinstance(x, str) for x in values) else np.asarray(values)
        self.values = np.asarray(values)
        self.indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        self.offsets = np.asarray(offsets, dtype=np.int64).reshape(-1)
        if self.values.ndim != 1:
            raise ValueError(f"Sparse values must be 1-d, not shape {self.values.shape}")
        o = self.offsets
        if len(o) == 0 or o[0] != 0 or o[-1] != len(self.values) \
                or len(self.indices) != len(self.values) or (np.diff(o) < 0).any():
            raise ValueError("Sparse offsets must start at 0, not decrease and end at "
                             "len(values), and there must be one index per value")
        if isinstance(length, (int, np.integer)) and not isinstance(length, bool):
            self.length = int(length)
            if self.length < 0:
                raise ValueError(f"Sparse vector length must be >= 0, not {length}")
        else:
            self.length = np.asarray(length, dtype=np.int64).reshape(-1)
            if len(self.length) != len(o) - 1:
                raise ValueError(f"{len(self.length)} vector lengths for {len(o) - 1} rows")
            if (self.length < 0).any():
                raise ValueError("Sparse vector lengths must be >= 0")

    @classmethod
    def from_rows(cls, rows, length, dtype=None):
        """A Sparse from one ``{slot: value}`` dict per row.

        Parameters
        ----------
        rows : iterable of dict
            Per row, its stored slots (in any order) and their values.
        length : int or array_like of int
            As for Sparse.
        dtype : numpy dtype, optional
            Of the values (default: as np.asarray infers; str as objects).
        """
        indices, values, offsets = [], [], [0]
        for r in rows:
            items = sorted(r.items())
            indices.extend(k for k, _ in items)
            values.extend(v for _, v in items)
            offsets.append(len(values))
        if dtype is not None:
            vals = np.asarray(values, dtype=dtype)
        elif values and all(isinstance(x, str) for x in values):
            vals = object_array(values)
        else:
            vals = np.asarray(values) if values else np.zeros(0)
        return cls(vals, indices, offsets, length)

    @classmethod
    def from_scipy(cls, m):
        """A Sparse from a scipy.sparse matrix.

        Parameters
        ----------
        m : scipy.sparse matrix
            2-d; its rows become vectors of its column count.
        """
        m = m.tocsr()
        return cls(np.asarray(m.data), m.indices, m.indptr, int(m.shape[1]))

    @property
    def lengths(self):
        """The vector length of every row."""
        if isinstance(self.length, int):
            return np.full(len(self), self.length, np.int64)
        return self.length

    def __len__(self):
        return len(self.offsets) - 1

    def __getitem__(self, key):
        """Rows ``start:stop`` (step 1) as a Sparse sharing this one's arrays."""
        if not (isinstance(key, slice) and key.step in (None, 1)):
            raise TypeError("idv.Sparse takes row slices with step 1 (e.g. s[10:20])")
        start, stop, _ = key.indices(len(self))
        stop = max(start, stop)
        offs = self.offsets[start:stop + 1]
        a, b = int(offs[0]), int(offs[-1])
        length = self.length if isinstance(self.length, int) else self.length[start:stop]
        return Sparse(self.values[a:b], self.indices[a:b], offs - a, length)

    def __repr__(self):
        size = self.length if isinstance(self.length, int) else "variable"
        return (f"<idv.Sparse {len(self)} vectors of size {size}, {len(self.values)} stored "
                f"{self.values.dtype} items>")


def object_array(values):
    """A 1-d object array of the given items (np.asarray would make str a fixed-width U)."""
    return np.fromiter(values, dtype=object, count=len(values))


# ML.NET's default(T) where it is not numpy's zero: "" and 0 ticks (0001-01-01, not 1970)
_DEFAULTS = {
    T.Text: lambda: "",
    T.DateTime: lambda: ticks.from_net_ticks([0])[0],
    T.DateTimeOffset: lambda: np.array([(ticks.from_net_ticks([0])[0], 0)],
                                       T.DATETIMEOFFSET_DTYPE)[0],
}


def zero_item(item_type):
    """The value an absent sparse slot stands for: ML.NET's default(T)."""
    default = _DEFAULTS.get(item_type)
    return default() if default is not None else np.zeros(1, item_type.dtype)[0]


def _positions(block):
    """For each stored item: its row, and its slot within that row."""
    dense = block.counts < 0
    stored = np.where(dense, block.lengths, block.counts)
    rows = np.repeat(np.arange(len(block)), stored)
    starts = np.cumsum(stored) - stored
    slots = np.arange(len(rows)) - starts[rows]
    slots[~dense[rows]] = block.indices
    return rows, slots


def block_rows(block, rows):
    """Rows `rows` (int64 positions among its rows, any order, repeats) of a decoded VBuffer
    block, as a block of those rows alone, stored as they were (a sparse row's indices and
    values, a dense row's values): what picking a few rows densifies, not the whole block."""
    from idv._codecs import VectorBlock
    rows = np.asarray(rows, np.int64)
    dense = block.counts < 0
    stored = np.where(dense, block.lengths, block.counts).astype(np.int64)
    sparse_counts = np.where(dense, 0, stored)
    values = _spans(np.cumsum(stored) - stored, stored, rows)
    indices = _spans(np.cumsum(sparse_counts) - sparse_counts, sparse_counts, rows)
    return VectorBlock(block.lengths[rows], block.counts[rows], block.indices[indices],
                       block.values[values])


def _spans(starts, sizes, rows):
    """The positions [starts[r], starts[r] + sizes[r]) of each of `rows` in turn."""
    n = sizes[rows]
    total = int(n.sum())
    shift = np.repeat(starts[rows] - (np.cumsum(n) - n), n)
    return shift + np.arange(total, dtype=np.int64)


def flat_dense(block, item_type):
    """All rows densified and concatenated, and each row's length."""
    if block.all_dense:
        return block.values, block.lengths
    out = np.empty(int(block.lengths.sum()), block.values.dtype)
    _densify(block, item_type, out)
    return out, block.lengths


def _densify(block, item_type, out):
    """All rows of `block` densified into `out` (a flat array of exactly their items): the
    item type's default where a sparse row stores nothing."""
    if block.all_dense:
        out[...] = block.values
        return
    rows, slots = _positions(block)
    starts = np.cumsum(block.lengths) - block.lengths
    out[...] = zero_item(item_type)
    out[starts[rows] + slots] = block.values


def to_dense(blocks, vtype, out=None):
    """Fixed-size vectors: an (N, *dims) array (`out`, when given one of that shape), each
    block densified straight into it: no dense copy of a block besides."""
    blocks = list(blocks)
    sizes = [int(b.lengths.sum()) for b in blocks]
    if out is None:
        if len(blocks) == 1 and blocks[0].all_dense:
            return blocks[0].values.reshape((-1,) + vtype.dims)
        out = np.empty((sum(len(b) for b in blocks),) + vtype.dims, blocks[0].values.dtype)
    elif sum(sizes) != out.size:
        raise ValueError(f"{out.shape[0]} rows of {vtype} hold {out.size} items, not "
                         f"{sum(sizes)}")
    flat, at = out.reshape(-1), 0
    for b, n in zip(blocks, sizes):
        _densify(b, vtype.item, flat[at:at + n])
        at += n
    return out


def to_ragged(blocks, vtype):
    pieces = [flat_dense(b, vtype.item) for b in blocks]
    values = pieces[0][0] if len(pieces) == 1 else np.concatenate([p[0] for p in pieces])
    lengths = np.concatenate([p[1] for p in pieces])
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return Ragged(values, offsets)


def to_csr(blocks, vtype):
    """A scipy.sparse.csr_matrix without densifying; width = the size (variable: longest row)."""
    sp = require("scipy.sparse", "read(sparse=True)", "idv[scipy]")
    if not (isinstance(vtype.item, T.Key) or vtype.item.dtype.kind in "biuf"):
        raise TypeError(f"read(sparse=True) needs numeric, Boolean or key items, not {vtype.item}")
    data, indices, counts = [], [], []
    width = vtype.size
    for b in blocks:
        data.append(b.values)
        dense = b.counts < 0        # sparse rows alone: their slots as the block holds them
        indices.append(_positions(b)[1] if dense.any() else b.indices)
        counts.append(np.where(dense, b.lengths, b.counts))
        if len(b.lengths):
            width = max(width, int(b.lengths.max()))
    counts = np.concatenate(counts) if counts else np.zeros(0, np.int64)
    indptr = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    dtype = vtype.item.dtype
    data = np.concatenate(data) if data else np.zeros(0, dtype)
    indices = np.concatenate(indices) if indices else np.zeros(0, np.int64)
    return sp.csr_matrix((data, indices, indptr), shape=(len(counts), width))


def empty(vtype, sparse=False):
    """Zero rows in the form read() gives for this type."""
    from idv._codecs import VectorBlock
    block = VectorBlock(np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32),
                        np.zeros(0, vtype.item.dtype))
    return assemble([block], vtype, sparse)


def assembled_bytes(blocks, vtype, sparse=False):
    """What assemble() allocates beyond the decoded blocks (which the reader holds and counts
    already), temporaries included: each stored item's row and slot (int64) where rows are
    sparse, the CSR arrays joined (values, indices, row pointers); or the one array fixed-size
    rows are densified into (but a lone dense block's values); or each sparse block's dense
    rows, the rows of several blocks joined, and a Ragged's lengths and offsets."""
    itemsize = vtype.item.dtype.itemsize
    rows = sum(len(b) for b in blocks)
    joined = len(blocks) > 1
    if sparse:
        stored = sum(len(b.values) for b in blocks)
        return stored * (16 + (itemsize + 12 if joined else 4)) + 16 * (rows + 1)
    items = sum(int(b.lengths.sum()) for b in blocks)
    if vtype.is_fixed:          # to_dense: one array, each sparse block densified into it
        sparse_blocks = [b for b in blocks if not b.all_dense]
        return (items * itemsize if joined or sparse_blocks else 0) + \
            16 * sum(len(b.values) for b in sparse_blocks)
    nbytes = items * itemsize if joined else 0
    for b in blocks:
        if not b.all_dense:
            nbytes += int(b.lengths.sum()) * itemsize + 16 * len(b.values)
    return nbytes + 16 * (rows + 1)


def assemble(blocks, vtype, sparse=False, out=None):
    """Decoded vector blocks in read()'s form: CSR (`sparse`), dense rows (fixed size; into
    `out` when given), or a Ragged."""
    if sparse:
        return to_csr(blocks, vtype)
    if vtype.is_fixed:
        return to_dense(blocks, vtype, out)
    return to_ragged(blocks, vtype)


def metadata_value(block, vtype):
    """One annotation vector: densified, shaped by its dims when fixed."""
    flat, _ = flat_dense(block, vtype.item)
    return flat.reshape(vtype.dims) if vtype.is_fixed else flat


def num_rows_of(values):
    """The rows of a column's values in read()'s forms (an array, Ragged, Sparse or CSR)."""
    return values.shape[0] if hasattr(values, "shape") else len(values)


def held_bytes(values):
    """The bytes a column's values in read()'s forms hold (an array, Ragged, Sparse or CSR;
    Text: a pointer and an empty str's size an item, a floor of what its str objects take)."""
    if isinstance(values, np.ndarray):
        return values.size * (8 + _STR_BYTES) if values.dtype == object else values.nbytes
    parts = [getattr(values, a, None) for a in ("values", "offsets", "indices", "data",
                                                "indptr")]
    return sum(held_bytes(p) for p in parts if isinstance(p, np.ndarray))


_STR_BYTES = sys.getsizeof("")


def concat_reads(parts):
    """Reads of consecutive rows of one column (read()'s forms: arrays, Ragged, CSR) joined
    into one, as one read of all the rows would give (datasets and scans join with it)."""
    if isinstance(parts[0], Ragged):
        return Ragged.concat(parts)
    if hasattr(parts[0], "tocsr"):
        import scipy.sparse as sp
        width = max(p.shape[1] for p in parts)      # variable size: each part's longest row
        return sp.vstack([p if p.shape[1] == width else type(p)(
            (p.data, p.indices, p.indptr), shape=(p.shape[0], width)) for p in parts],
            format="csr")
    return np.concatenate(parts)


def detached(selection, whole=None):
    """A selection of rows that does not keep its decoded block alive: a view of an array is
    copied unless it is most of the array it views."""
    base = selection.base if isinstance(selection, np.ndarray) else None
    if base is None:
        return selection
    if isinstance(whole, np.ndarray) and 2 * selection.nbytes >= whole.nbytes:
        return selection
    return selection.copy()


def csr_type(t):
    """Whether read(sparse=True) gives a column of type `t` as a CSR matrix."""
    return isinstance(t, T.Vector) and (isinstance(t.item, T.Key) or t.item.dtype.kind in "biuf")
