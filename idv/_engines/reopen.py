"""A dataset named by its files, so that any process can open it again: what the training
loaders (idv.torch, idv.huggingface) hand to their workers (Reopenable), and each file of it as
a read was planned from it, which the tasks of Dask, Ray and Spark open again (Listed).

An open IdvFile or Dataset holds memory maps and file objects, which do not pickle (DataLoader
workers started by spawn or forkserver, ``datasets``' ``num_proc``), and a forked child would
share them with its parent. A Reopenable holds only the file paths, the fsspec filesystem and
idv.open's keywords, and opens its own idv.Dataset on first use in each process: the same
files as when it was made (same rows, same file: device, inode, size and modification time),
or an IdvFormatError says which one changed, since the plans made from them (a loader's
length, its partitions) would read other rows.
"""
from __future__ import annotations

import os
import pickle
import socket
from typing import NamedTuple, Sequence

from idv._resources import budget
from idv._values.cells import label_texts
from idv._values.metadata import usable_key_values
from idv._reader import selection
from idv._reader.dataset import Dataset, expand_sources
from idv._reader.dataset_files import changed, check_relisted, reopening
from idv._reader.reader import IdvFile
from idv._values.arguments import own_options
from idv._reader.whole_read import other_annotation, same_key_values
from idv._storage.paths import worker_path

__all__ = ["Reopenable", "Listed", "listed", "open_listed"]


class Listed(NamedTuple):
    """One file of a dataset as a read was planned from it (its partitions' rows): ``path``
    as a worker opens it (idv._storage.paths.worker_path), ``num_rows``, ``identity`` (the
    IdvFile's), ``host`` (the machine that listed it) and ``types`` (name -> type of the
    columns read). Picklable: what an engine's task carries."""
    path: object
    num_rows: int
    identity: tuple | None
    host: str
    types: dict


def listed(ds, names) -> list[Listed]:
    """[Listed] of each file of Dataset `ds`, for the columns `names` (read by its tasks)."""
    types = {n: ds.schema[n].type for n in names}
    host = socket.gethostname()
    return [Listed(worker_path(e.path, ds.filesystem), e.num_rows, e.identity, host, types)
            for e in ds.files]


def open_listed(entry: Listed, filesystem=None, open_kwargs=None) -> IdvFile:
    """The file of `entry` opened again by its path, checked by the dataset's own rule for a
    file opened again (idv._reader.dataset_files.changed: its rows, the types of the columns
    read and its identity): an IdvFormatError naming it when another file is in its place,
    since the plan would read other rows. A local file's identity (its device number) means
    something only on the machine that listed it: elsewhere (a cluster's workers sharing the
    files over a network file system) its rows and types are checked; a URL's (its version)
    means the same everywhere."""
    url = entry.identity is not None and isinstance(entry.identity[0], str)
    here = entry if url or entry.host == socket.gethostname() else \
        entry._replace(identity=None)
    with reopening(here):
        f = IdvFile(entry.path, filesystem=filesystem, **(open_kwargs or {}))
    try:
        changed(here, f, entry.types, list(entry.types))
    except BaseException:
        f.close()
        raise
    return f


_WHO = "PyTorch and Hugging Face datasets"      # the readers that open files again by path


class Reopenable:
    """The files of ``source`` (a path, directory, glob, URL, a list of them, an idv.Dataset or
    an IdvFile opened from a path or URL) and the ``columns`` read (names or indices; default
    all), opened in each process by ``dataset()``. Picklable.

    Attributes: ``paths``, ``filesystem`` (fsspec, None for local files), ``open_kwargs`` (for
    idv.dataset: ``schema``, ``threads``...), ``names`` and ``types`` of the columns, and
    ``key_values`` (column -> the list of its KeyValues, for key columns that have usable
    ones) with ``key_labels`` (their text, as idv prints them: cells.label_texts)."""

    def __init__(self, source, columns: Sequence[str | int] | str | None = None, *,
                 filesystem=None, storage_options: dict | None = None, **open_kwargs):
        if isinstance(source, (Dataset, IdvFile)):
            # opened with its own options, which each process opens it with again (a map
            # dataset's cache_bytes is its own, per process)
            own_options(source, {**{k: v for k, v in open_kwargs.items() if k != "cache_bytes"},
                                 "filesystem": filesystem, "storage_options": storage_options})
            open_kwargs = {**source.open_kwargs, **open_kwargs}
        listed = None       # an open source's files as it opened them, read as they were
        if isinstance(source, Dataset):
            paths, fs = [f.path for f in source.files_only(_WHO).files], source.filesystem
            columns = source.column_names if columns is None else columns
            listed = [(f.path, f.num_rows, f.identity) for f in source.files]
        else:
            opened = source if isinstance(source, IdvFile) else None
            if opened is not None:
                if not isinstance(source.path, (str, os.PathLike)):
                    raise TypeError("an IdvFile opened from bytes or a file object cannot be "
                                    "opened again in other processes: give its path or URL")
                source, filesystem = source.path, source.filesystem
            paths, fs = expand_sources(source, filesystem=filesystem,
                                       storage_options=storage_options)
            if opened is not None:
                listed = [(paths[0], opened.num_rows, opened.identity)]
        self.paths = paths
        self.filesystem = fs
        self.open_kwargs = budget.carried(open_kwargs)
        self.names = None
        self._listed = listed               # (path, rows, identity) of each file, as made
        self._ds = self._pid = None
        self._fs_pid = os.getpid()          # the process the filesystem instance belongs to
        if columns is not None:
            columns = selection.as_list(columns)     # one name or index: a list of one
        named = columns is not None and all(isinstance(c, str) for c in columns)
        ds = self._open(columns if named else None)
        self.names = ds.resolve_columns(columns)
        self.types = [ds.schema[n].type for n in self.names]
        self.key_values, self.key_labels = {}, {}
        with ds.using(0) as first:
            for n, t in zip(self.names, self.types):
                kv = usable_key_values(t, first[n].metadata)
                if kv is not None:
                    self.key_values[n] = kv.tolist()
                    self.key_labels[n] = label_texts(kv)

    def check_key_values(self, holds):
        """Refuse a key column whose files have different KeyValues, which a training
        loader's one set of labels (`holds` says which) cannot name: a key would name one
        value in one file and another in the next."""
        ds = self.dataset()
        for n in self.key_values:
            i = None if same_key_values(ds, n) else other_annotation(ds, n, "KeyValues")
            if i is not None:
                raise ValueError(f"column {n!r} has other KeyValues in {ds.files[i].path} than "
                                 f"in {ds.files[0].path}: its keys name other values in other "
                                 f"files, and {holds}; read such files apart, or leave the "
                                 f"column out")

    def _open(self, columns):
        if self.filesystem is not None and self._fs_pid != os.getpid():
            # a filesystem of its own: fsspec's async ones (HTTP, S3...) refuse to serve a
            # forked child, and unpickling makes a new instance in each process
            self.filesystem = pickle.loads(pickle.dumps(self.filesystem))
        self._fs_pid = os.getpid()
        ds = Dataset(self.paths, filesystem=self.filesystem, columns=columns,
                     **self.open_kwargs).files_only(_WHO)
        if self._listed is None:
            self._listed = [(f.path, f.num_rows, f.identity) for f in ds.files]
        else:               # another process, another epoch's workers: the same files?
            try:
                check_relisted(self._listed, ds.files)
            except BaseException:
                ds.close()
                raise
        self._ds, self._pid = ds, os.getpid()
        return self._ds

    def dataset(self) -> Dataset:
        """The idv.Dataset, opened in this process on first use (a forked child opens its
        own; do not close it)."""
        if self._ds is None or self._pid != os.getpid():
            return self._open(self.names)
        return self._ds

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_ds"] = state["_pid"] = None
        return state
