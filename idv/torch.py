"""PyTorch datasets over .idv files: ``IdvIterableDataset`` (streaming batches, sharded by
DataLoader worker and distributed rank) and ``IdvMapDataset`` (rows by index, through the block
cache).

Imported on use (``import idv.torch``); it needs ``pip install 'idv[torch]'``. Both hold only
what names their files (paths or URLs, the filesystem, idv.open's keywords), never an open file,
so they pickle for DataLoader workers started by spawn or forkserver; each process opens the
files on first use. A worker forked after the parent read in threads makes its own thread
pools, so fork works too.

What a batch holds, per column: numeric and Boolean columns as tensors over the decoded arrays
(no copy when a batch lies within one decoded window; in a DataLoader worker, the batch's
tensors are copied into one storage, which reaches the main process in one shared-memory
segment rather than one a column); fixed-size vectors as ``(rows, *dims)``
tensors; variable-size vectors padded with zeros to the longest row of the batch, with their
lengths under ``"<name>_lengths"`` (``ragged="nested"``: a jagged nested tensor instead); keys
as int64 tensors of the stored key values (0: missing, k: the k-th of KeyValues, which
``key_values`` gives, one set: files whose KeyValues differ are refused; a key int64 cannot
hold raises, never wraps); DateTime and TimeSpan as int64 counts of 100 ns (DateTime since
1970-01-01); text as lists of str. DateTimeOffset and RowId columns have no tensor form and are
refused.
"""
from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from typing import Sequence

import numpy as np

from idv import _docs, types as T
from idv._scan import filters, scan
from idv._reader import selection, take, whole_read
from idv._values import vectors
from idv._values.arguments import ensure_count
from idv.errors import require
from idv._engines.reopen import Reopenable

__all__ = ["IdvIterableDataset", "IdvMapDataset", "RAGGED_FORMS"]
# ragged=: variable-size vectors as zero-padded tensors plus lengths, or as nested tensors
RAGGED_FORMS = ("padded", "nested")
BATCH_SIZE = 1024           # rows per batch by default
# rows the shuffle buffer holds by default (shuffle=True)
SHUFFLE_BUFFER = 16_384
# decoded blocks a map-style dataset keeps per open file by default
MAP_CACHE_BYTES = 256 << 20


torch = require("torch", "idv.torch", "idv[torch]")
try:     # the registry of default_collate's functions by type, which torch invites to extend
    from torch.utils.data._utils.collate import collate, default_collate_fn_map
except ImportError:
    default_collate_fn_map = None
from idv._interop.tensors import items as _items, to_tensors as _to_tensors  # noqa: E402


def _source(source, columns, filesystem, storage_options, open_kwargs):
    """The Reopenable source, its columns checked for a tensor form."""
    src = Reopenable(source, columns, filesystem=filesystem, storage_options=storage_options,
                     **open_kwargs)
    for n, t in zip(src.names, src.types):
        if T.item_type(t) in (T.DateTimeOffset, T.RowId):
            raise TypeError(f"column {n!r} is {t}, which has no tensor form: leave it out "
                            f"of columns=")
    src.check_key_values("key_values holds one set")
    return src


_INT64_MAX = np.iinfo(np.int64).max


def _check_int64_keys(path, names, types, values):
    """`values` (read()'s forms of columns `names` of file `path`) again, after checking that
    their Key<UInt64> items fit the int64 tensors keys become: a larger key raises, never
    wraps to a negative number."""
    for n, t, v in zip(names, types, values):
        item = T.item_type(t)
        if isinstance(item, T.Key) and item.raw is T.UInt64:
            flat = np.asarray(v.values if isinstance(v, vectors.Ragged) else v)
            if flat.size and flat.max() > _INT64_MAX:
                raise ValueError(f"{path}: column {n!r} ({t}) holds key {int(flat.max())}, "
                                 f"above int64's maximum, which the tensors of keys hold; "
                                 f"leave the column out")
    return values


def _check_ragged(ragged, src):
    if ragged not in RAGGED_FORMS:
        raise ValueError(f"ragged must be one of {RAGGED_FORMS}, not {ragged!r}")
    variable = [n for n, t in zip(src.names, src.types)
                if isinstance(t, T.Vector) and not t.is_fixed and T.item_type(t) is not T.Text]
    clash = [n for n in variable if n + "_lengths" in src.names]
    if ragged == "padded" and clash:
        raise ValueError(f"column {clash[0] + '_lengths'!r} would be overwritten by the "
                         f"lengths of {clash[0]!r}: use ragged='nested'")


def _take(values, rows):
    return [v[rows] for v in values]


def _join(parts):
    """Lists of column values (consecutive rows) joined column by column."""
    if len(parts) == 1:
        return parts[0]
    return [vectors.concat_reads(list(col)) for col in zip(*parts)]


def _shuffled(chunks, capacity, rng):
    """`chunks` ((values, rows) pairs), their rows mixed through a buffer: each chunk joins it,
    it is permuted and gives up all but `capacity` rows; at the end, the rest, permuted."""
    held, n = None, 0
    for values, rows in chunks:
        held = values if held is None else _join([held, values])
        n += rows
        if n > capacity:
            order = rng.permutation(n)
            yield _take(held, order[:n - capacity]), n - capacity
            held, n = _take(held, order[n - capacity:]), capacity
    if n:
        yield _take(held, rng.permutation(n)), n


def _cut(values, a, b):
    """Rows [a, b) of a list of column values."""
    return [v[a:b] for v in values]


def _shard_of(rank, world_size):
    """(rank, world size): as given, else torch.distributed's if initialised, else (0, 1)."""
    if rank is None and world_size is None:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
        return 0, 1
    if rank is None or world_size is None:
        raise ValueError("give both rank= and world_size=, or neither")
    if not 0 <= int(rank) < int(world_size):
        raise ValueError(f"rank must be in [0, world_size), not {rank} of {world_size}")
    return int(rank), int(world_size)


def _check_shuffle_buffer(value, shuffle):
    if value is None:
        return SHUFFLE_BUFFER if shuffle else 0
    return ensure_count(value, "shuffle_buffer", least=0)


@_docs.fill
class IdvIterableDataset(torch.utils.data.IterableDataset):
    """Batches of rows of .idv files, as dicts of tensors (and lists of str for text), for a
    ``torch.utils.data.DataLoader`` with ``batch_size=None`` (the batches are made here):
    ``batch_size`` rows each (the last of each shard may hold fewer; ``drop_last``: left out).

    Sharding: the source is cut into partitions of ``blocks_per_partition`` whole blocks
    (default 1; those the filter's statistics rule out are left out), which are dealt out in
    equal runs to every DataLoader worker of every rank (``rank`` and ``world_size``, default
    torch.distributed's when it is initialised when the dataset is made): each row is read by
    exactly one worker of one rank, once per epoch. The shards' runs differ by at most one
    partition, so ranks may get a block of rows more or fewer than others (``drop_last`` does
    not even them out).

    Shuffling (``shuffle=True``): the partitions in an order drawn from ``seed`` and the
    epoch (``set_epoch``), the same on every rank, and the rows of each worker mixed in a
    buffer of ``shuffle_buffer`` rows (default 16,384; 0: blocks shuffled, rows within a block
    in order). The same seed and epoch give the same batches; ``seed=None`` draws one when the
    dataset is made (workers share it; ranks need a seed given).

    Parameters
    ----------
    {dataset_source}
    {columns}
    batch_size, shuffle, seed, drop_last, shuffle_buffer, rank, world_size, blocks_per_partition
        As above.
    ragged : {'padded', 'nested'}, default 'padded'
        Variable-size vectors as zero-padded tensors and their lengths, or nested tensors.
    {filter}
    {filesystem}
    {storage_options}
    **open_kwargs
        Passed to idv.dataset (``schema``, ``threads``, ``checksums``...).
    """

    def __init__(self, source, columns: Sequence[str | int] | None = None,
                 batch_size: int = BATCH_SIZE, shuffle: bool = False, seed: int | None = None,
                 drop_last: bool = False, *, shuffle_buffer: int | None = None,
                 rank: int | None = None, world_size: int | None = None,
                 blocks_per_partition: int = 1, ragged: str = "padded", filter=None,  # noqa: A002
                 filesystem=None, storage_options: dict | None = None, **open_kwargs):
        self.batch_size = ensure_count(batch_size, "batch_size")
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.shuffle_buffer = _check_shuffle_buffer(shuffle_buffer, self.shuffle)
        self.filter = None if filter is None else filters.parse(filter)
        self.rank, self.world_size = _shard_of(rank, world_size)
        if self.shuffle and seed is None and self.world_size > 1:
            raise ValueError("shuffle=True over several ranks needs seed= (the same on every "
                             "rank, so that the ranks share one order of the blocks)")
        self.seed = secrets.randbits(63) if seed is None else int(seed)
        self.epoch = 0
        self.source = _source(source, columns, filesystem, storage_options, open_kwargs)
        if not self.source.names:
            raise ValueError("IdvIterableDataset needs at least one column")
        _check_ragged(ragged, self.source)
        self.ragged = ragged
        ds = self.source.dataset()
        whole_read.check_batch(ds, self.source.names, self.batch_size, arrow=False)
        self.partitions = scan.partitions(ds, self.source.names, blocks_per_partition,
                                          block_filter=filters.blocks_of(self.filter))
        self.num_rows = ds.num_rows

    @property
    def column_names(self) -> list[str]:
        """The columns read, in order."""
        return list(self.source.names)

    @property
    def key_values(self) -> dict[str, list]:
        """dict column -> the values of its keys (KeyValues), for the key columns that have
        usable ones: key k of a batch is ``key_values[name][k - 1]``."""
        return dict(self.source.key_values)

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch that, with the seed, orders a shuffled stream, before each epoch on
        every rank (DataLoader workers take it when they start: persistent ones keep theirs).

        Parameters
        ----------
        epoch : int
        """
        self.epoch = int(epoch)

    def shard_partitions(self, worker: int = 0, workers: int = 1) -> list[scan.Partition]:
        """The partitions (idv._scan.scan.Partition) that DataLoader worker `worker` of `workers`
        on this rank reads this epoch, in the order it reads them.

        Parameters
        ----------
        worker, workers : int
        """
        shards, shard = self.world_size * workers, self.rank * workers + worker
        order = np.arange(len(self.partitions))
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(order)
        return [self.partitions[i] for i in np.array_split(order, shards)[shard]]

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        chunks = self._chunks(self.shard_partitions(worker, workers))
        if self.shuffle and self.shuffle_buffer:
            shard = self.rank * workers + worker
            rng = np.random.default_rng([self.seed, self.epoch, shard + 1])
            chunks = _shuffled(chunks, self.shuffle_buffer, rng)
        names, types = self.source.names, self.source.types
        for values in scan.rebatched(chunks, self.batch_size, _cut, _join, self.drop_last):
            yield _to_tensors(values, names, types, self.ragged)

    def _chunks(self, parts):
        """(values, rows) of each window the scan decodes for `parts`: the ascending runs of
        one file's partitions are read by one scan, which skips the blocks between them."""
        ds = self.source.dataset()
        names = self.source.names
        i = 0
        while i < len(parts):
            j = i + 1
            while j < len(parts) and parts[j].part == parts[i].part \
                    and parts[j].b0 >= parts[j - 1].b1:
                j += 1
            with ds.using(parts[i].part) as f:          # kept open between batches
                keep = np.zeros(f[names[0]].num_blocks, bool)
                for p in parts[i:j]:
                    keep[p.b0:p.b1] = True
                blocks = lambda _part, _f, keep=keep: keep     # noqa: E731
                types = self.source.types
                if self.filter is None:
                    for batch in scan.scan(f, names, batch_rows=None, block_filter=blocks):
                        yield (_check_int64_keys(f.path, names, types, batch.values),
                               batch.stop - batch.start)
                else:
                    for _batch, hits, values in filters.filtered(f, names, self.filter,
                                                                 blocks=blocks):
                        if len(hits):
                            yield _check_int64_keys(f.path, names, types, values), len(hits)
            i = j


def _matching(ds, i, filter_):
    """The row numbers (int64) of the rows of file i of dataset `ds` that match `filter_`
    (the blocks its statistics rule out unread)."""
    with ds.using(i) as f:
        return filters.matching(f, [], filter_)[0]


def _row_numbers(key, n):
    """Row numbers of the dataset's `n` rows as IdvFile.take reads them (ints, negative from
    the end; a slice)."""
    return selection.row_numbers(selection.take_numbers(key), n, "dataset")


@_docs.fill
class IdvMapDataset(torch.utils.data.Dataset):
    """Rows of .idv files by index, for a DataLoader's samplers (``shuffle=True``...).

    ``ds[i]``: row i as a dict (0-d tensors for scalars, 1-d for vectors, str for text);
    ``ds[[i, j, ...]]`` (or an array of row numbers): those rows as one batch, the form
    IdvIterableDataset yields (a DataLoader with ``sampler=BatchSampler(...)`` and
    ``batch_size=None`` takes this path); ``__getitems__`` (what DataLoader calls for a batch
    of indices): the rows as a list of dicts, read together.

    Rows are found through each file's cache of decoded blocks: while the columns' decoded
    blocks fit it, a shuffled epoch decodes each block at most once per worker; beyond it,
    blocks fall out and are decoded again when their rows come up.

    With ``filter``, the dataset holds the matching rows alone, numbered from 0 in the files'
    order: which rows match is found when the dataset is made (one pass over the columns the
    filter names, the blocks the statistics rule out left unread), and their row numbers
    (8 bytes a row, charged to the memory limit) go with the dataset to its workers.

    Parameters
    ----------
    source, columns, ragged, filesystem, storage_options, **open_kwargs
        As IdvIterableDataset.
    cache_bytes : int, default 256 MiB
        The cache of decoded blocks, per file and process.
    {filter}
    """

    def __init__(self, source, columns: Sequence[str | int] | None = None, *,
                 ragged: str = "padded", cache_bytes: int = MAP_CACHE_BYTES,
                 filter=None, filesystem=None,  # noqa: A002
                 storage_options: dict | None = None, **open_kwargs):
        self.source = _source(source, columns, filesystem, storage_options,
                              {**open_kwargs, "cache_bytes": cache_bytes})
        if not self.source.names:
            raise ValueError("IdvMapDataset needs at least one column")
        _check_ragged(ragged, self.source)
        self.ragged = ragged
        self.filter = None if filter is None else filters.parse(filter)
        ds = self.source.dataset()
        # per file, the file's row numbers of the rows matching the filter (None: all rows)
        self._kept = None if self.filter is None else [_matching(ds, i, self.filter)
                                                       for i in range(len(ds.files))]
        counts = [f.num_rows for f in ds.files] if self._kept is None else \
            [len(k) for k in self._kept]
        self.num_rows = int(sum(counts))
        self._starts = np.cumsum([0] + counts[:-1], dtype=np.int64)
        self._touched, self._touched_pid = set(), os.getpid()   # files read from, and where

    @property
    def column_names(self) -> list[str]:
        """The columns read, in order."""
        return list(self.source.names)

    @property
    def key_values(self) -> dict[str, list]:
        """As IdvIterableDataset.key_values."""
        return dict(self.source.key_values)

    @property
    def blocks_decoded(self) -> int:
        """Blocks decoded so far in this process, over the columns read (blocks_decoded)."""
        if self._touched_pid != os.getpid():
            return 0
        ds = self.source.dataset()
        return sum(ds.open_file(i)[n].blocks_decoded for i in self._touched
                   for n in self.source.names)

    def __len__(self):
        return self.num_rows

    def _read(self, rows):
        """read()'s forms of each column for `rows` (row numbers, in that order): one take of
        each file's rows through its block cache (idv._reader.take.take_kept)."""
        ds = self.source.dataset()
        if self._touched_pid != os.getpid():     # files opened anew in this process
            self._touched, self._touched_pid = set(), os.getpid()
        if len(self._starts) == 1 or not len(rows):
            return self._read_file(ds, 0, rows)
        files = np.searchsorted(self._starts, rows, side="right") - 1
        order = np.argsort(files, kind="stable")
        firsts = np.flatnonzero(np.diff(files[order])) + 1
        parts = []
        for run in np.split(order, firsts):
            i = int(files[run[0]])
            parts.append(self._read_file(ds, i, rows[run] - self._starts[i]))
        values = _join(parts)
        restore = np.empty_like(order)
        restore[order] = np.arange(len(order))
        return [v[restore] for v in values]

    def _read_file(self, ds, i, rows):
        """read()'s forms of each column for rows `rows` of file i."""
        if self._kept is not None:
            rows = self._kept[i][rows]
        with ds.using(i) as f:
            self._touched.add(i)
            names = self.source.names
            return _check_int64_keys(f.path, names, self.source.types,
                                     take.take_kept(f, rows, [f[n] for n in names]))

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
            return dict(self.__getitems__([key])[0])
        rows = _row_numbers(key, self.num_rows)
        return _to_tensors(self._read(rows), self.source.names, self.source.types,
                          self.ragged)

    def __getitems__(self, indices: Sequence[int]) -> list[Row]:
        """The rows `indices` as a list of Rows, read together: a DataLoader's default
        collation gives their batch as ``ds[indices]`` would, with no tensor per row."""
        rows = _row_numbers(indices, self.num_rows)
        return _Rows(self._read(rows), self.source.names, self.source.types, self.ragged).rows


class _Rows:
    """One read of a batch of rows: each row's values made when first asked for (a column's
    at once), and the whole batch as ds[rows] gives it (_to_tensors)."""

    def __init__(self, values, names, types, ragged):
        self.values, self.names, self.types, self.ragged = values, names, types, ragged
        self.by_name = dict(zip(names, range(len(names))))
        self.columns = {}
        self.rows = [Row(self, i) for i in range(vectors.num_rows_of(values[0]))]

    def column(self, name):
        """The values of column `name`, row by row."""
        got = self.columns.get(name)
        if got is None:
            k = self.by_name[name]
            value, item = self.values[k], T.item_type(self.types[k])
            if item is T.Text:
                got = value.tolist() if not isinstance(value, vectors.Ragged) else \
                    [r.tolist() for r in value]
            elif isinstance(value, vectors.Ragged):
                got = _items(value.values, item).split(value.lengths.tolist())
            else:
                got = _items(value, item).unbind(0)
            self.columns[name] = got
        return got

    def batch(self):
        return _to_tensors(self.values, self.names, self.types, self.ragged)


class Row(Mapping):
    """A row of IdvMapDataset.__getitems__: a read-only mapping column -> value as ``ds[i]``
    gives it, made when asked for; it pickles and copies as a dict."""

    __slots__ = ("_rows", "_i")

    def __init__(self, rows, i):
        self._rows, self._i = rows, i

    def __getitem__(self, name):
        return self._rows.column(name)[self._i]

    def __iter__(self):
        return iter(self._rows.names)

    def __len__(self):
        return len(self._rows.names)

    def __repr__(self):
        return repr(dict(self))

    def __reduce__(self):
        return dict, (dict(self),)


def _collate_rows(batch, *, collate_fn_map=None):
    """default_collate of Rows: one __getitems__ call's, all in order, as the batch it read
    (no tensor per row; variable-size vectors padded, or nested, as ``ds[indices]`` gives
    them, which default_collate could not stack); other lists of Rows, column by column."""
    rows = batch[0]._rows
    if len(batch) == len(rows.rows) and all(a is b for a, b in zip(batch, rows.rows)):
        return rows.batch()
    return {name: collate([r[name] for r in batch], collate_fn_map=collate_fn_map)
            for name in rows.names}


if default_collate_fn_map is not None:     # DataLoader's default collation of Rows
    default_collate_fn_map[Row] = _collate_rows
