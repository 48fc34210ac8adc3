"""idv.dask's writing (``to_idv``): a partition's DataFrame as the writer's columns, the
partitions streamed in order into one file, or written in parallel one file each and
published together (idv._storage.staging)."""
from __future__ import annotations

import collections
import contextlib

import numpy as np

from idv._storage.staging import Staging
from idv._writer.tables import rows_renamed


class Converter:
    """A partition's DataFrame as the writer's columns (idv.from_pandas), every partition with
    the first one's types; a Categorical whose categories differ from the first partition's
    would give other key numbers for the same values, so it is refused. `writer_kwargs`: the
    options of idv.write (``types`` and ``missing_text`` given to from_pandas as idv.write
    gives them, ``metadata`` over the inferred), then of idv.Writer."""

    def __init__(self, df, writer_kwargs):
        from idv._values.metadata import SCHEMA_ATTR
        from idv._writer.inputs import merged_metadata
        from idv._writer.pandas import from_pandas
        from idv._writer.relabel import counted, relabelling
        self._from_pandas = from_pandas
        self.options = dict(writer_kwargs)
        given, metadata = self.options.pop("types", None), self.options.pop("metadata", None)
        self.missing_text = self.options.get("missing_text")
        self.schema = df.attrs.get(SCHEMA_ATTR)       # idv.to_pandas's ML.NET schema
        _columns, self.types, self.metadata = from_pandas(df, types=given, schema=self.schema,
                                                          missing_text=self.missing_text)
        self.given_metadata = merged_metadata(self.metadata, metadata)
        # keys whose labels metadata= gives anew: codes mapped onto them (idv._writer.relabel)
        names = list(self.types)
        self.relabel = relabelling(names, self.metadata, metadata)
        self.types = counted(self.types, names, self.relabel, given)

    def writer(self, path):
        from idv._writer import Writer
        return Writer(path, list(self.types.items()), metadata=self.given_metadata,
                      **self.options)

    def columns(self, df, index):
        from idv._writer.relabel import relabelled
        columns, _types, metadata = self._from_pandas(df, types=self.types, schema=self.schema,
                                                      missing_text=self.missing_text)
        for name, kinds in self.metadata.items():
            got = metadata.get(name, {}).get("KeyValues")
            want = kinds.get("KeyValues")
            if want is not None and not _same_values(got, want):
                raise ValueError(f"partition {index}: the categories of column {name!r} differ "
                                 f"from partition 0's, so its key numbers would too; give the "
                                 f"column one CategoricalDtype first (astype(pd."
                                 f"CategoricalDtype(categories)), or ddf.categorize() of the "
                                 f"text column)")
        return relabelled(columns, self.relabel)


def _same_values(a, b):
    if a is None or b is None:
        return a is b
    a = a[1] if isinstance(a, tuple) else a
    b = b[1] if isinstance(b, tuple) else b
    return np.asarray(a).tolist() == np.asarray(b).tolist()


def to_directory(ddf, path, name_function, partition_by, compute, writer_kwargs):
    """to_idv's one file per partition (or per partition and key values), in parallel, the
    files published together (idv._storage.staging)."""
    import dask
    staging = Staging(path, name_function or "part.{task}.idv")
    parts = ddf.to_delayed()
    staging.fix_names(len(parts))       # checked before anything is written
    keys = []           # the folders' columns, which the files do not hold
    if partition_by is not None:
        from idv._writer.tables import check_keys
        keys = check_keys(list(ddf.columns), partition_by)
    writer_kwargs = _with_meta_types(ddf, writer_kwargs, keys)
    if compute:
        staging.start()
        started = staging
    else:       # nothing on disk until the graph runs, and nothing left if it never does
        started = dask.delayed(_started, pure=False)(staging)
    # the other columns' types: the first partition's (computed once, for its write too)
    first = dask.delayed(_first_types, pure=False)(parts[0], writer_kwargs, keys) \
        if parts else None
    write = dask.delayed(_write_partition, pure=False)
    tasks = [write(d, started, i, writer_kwargs, partition_by, first)
             for i, d in enumerate(parts)]
    # every partition written: the parts moved in together
    together = dask.delayed(_commit, pure=False)(started, tasks)
    if not compute:
        return together
    try:
        return together.compute()
    finally:
        staging.abort()


def _with_meta_types(ddf, writer_kwargs, keys):
    """`writer_kwargs` with the types of the columns Dask's meta gives a numpy dtype of
    numbers, bools or times (types= given win): every partition's file then has them, as
    idv.write(partition_by=) gives every file one type per column, where each partition's own
    values would (ints read as floats in one, say). Object columns are typed by each
    partition's values, which the meta does not show."""
    import pandas as pd
    from idv._values.metadata import SCHEMA_ATTR
    from idv._writer.pandas import from_pandas
    typed = {c: t for c, t in ddf.dtypes.items()
             if isinstance(t, np.dtype) and t.kind in "biufmM" and c not in keys}
    if not typed or getattr(getattr(ddf, "_meta", None), "attrs", {}).get(SCHEMA_ATTR):
        return writer_kwargs        # none, or idv.to_pandas's ML.NET schema gives them all
    empty = pd.DataFrame({c: pd.Series(dtype=t) for c, t in typed.items()})
    _, types, _ = from_pandas(empty)
    given = writer_kwargs.get("types") or {}
    return {**writer_kwargs, "types": {**types, **given}}


def _first_types(df, writer_kwargs, keys):
    """The types of the columns `writer_kwargs` does not type (object columns: lists, text,
    dates), as the first partition's values give them (as to_idv into one file takes them);
    none when it has no rows to tell them by, or idv.to_pandas's ML.NET schema does."""
    from idv._values.metadata import SCHEMA_ATTR
    if not len(df) or df.attrs.get(SCHEMA_ATTR):
        return {}
    typed = writer_kwargs.get("types") or {}
    df = df.drop(columns=list(keys))
    return {n: t for n, t in Converter(df, writer_kwargs).types.items() if n not in typed}


def _started(staging):
    staging.start()
    return staging


def _commit(staging, results):
    return staging.commit(results)


def _write_partition(df, staging, task, writer_kwargs, partition_by=None, first=None):
    """Partition number `task` as its file (idv._storage.staging), or with `partition_by` as one
    file per combination of the keys' values, in its ``key=value`` folders (the file name the
    task's own); returns the name(s). `first`: the types of the first partition's columns
    that `writer_kwargs` does not type (_first_types)."""
    if first:
        writer_kwargs = {**writer_kwargs, "types": {**first, **(writer_kwargs.get("types") or {})}}

    def writing(frame):
        def write(path):        # its rows numbered within the partition: named so
            with rows_renamed(lambda n: n, f"partition {task}: "):
                convert = Converter(frame, writer_kwargs)
                with convert.writer(path) as w:
                    columns = convert.columns(frame, 0)
                    if columns:
                        w.write_batch(columns)
                    else:       # no columns: its rows alone, as idv.write keeps them
                        w.add_empty_rows(len(frame))
        return write
    try:
        if partition_by is None:
            return staging.write(task, writing(df))
        from idv._writer.tables import split
        _, groups = split(df, partition_by)
        return [staging.write_named(f"{folder}/{staging.name(task)}", writing(rows))
                for folder, rows in groups]
    except BaseException:
        if staging.aborted():
            return None     # another task failed first: its error is the job's, not this one
        # the job fails with this task (dask runs no step on failure, and with compute=False
        # no driver waits for it): the staging folder goes now, and the parts of tasks
        # still running as they finish (Staging.settle)
        staging.abort()
        raise


def client_in_use():
    """The distributed client in use, or None."""
    try:
        from distributed import get_client
        return get_client()
    except (ImportError, ValueError):
        return None


def _partition_results(ddf, window):
    """The partitions of ddf computed in order, at most `window` ahead of the one consumed
    (through the distributed client when there is one, else dask's default scheduler)."""
    from concurrent.futures import ThreadPoolExecutor
    client = client_in_use()
    with contextlib.ExitStack() as stack:
        if client is not None:
            submit = client.compute
        else:
            pool = stack.enter_context(ThreadPoolExecutor(max(1, window)))

            def submit(d):
                return pool.submit(d.compute)
        pending = collections.deque()
        for d in ddf.to_delayed():
            pending.append(submit(d))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def to_file(ddf, text, lookahead, writer_kwargs):
    """to_idv into one file: the partitions computed in order, at most `lookahead` (default:
    twice the workers, or 4) ahead of the one being written, through one idv.Writer; a value
    refused is named by its row in the file."""
    if lookahead is None:
        client = client_in_use()
        lookahead = 4 if client is None else \
            2 * max(1, len(client.scheduler_info()["workers"]))
    writer = convert = None
    try:
        row0 = 0
        for i, df in enumerate(_partition_results(ddf, int(lookahead))):
            # the partition's rows by their numbers in the file (the Writer numbers its own so)
            with rows_renamed(lambda n, first=row0: first + n):
                if writer is None:
                    convert = Converter(df, writer_kwargs)
                columns = convert.columns(df, i) if len(df) else None
            if writer is None:
                writer = convert.writer(text)
            if columns:
                writer.write_batch(columns)
            elif columns is not None:       # no columns: its rows alone, as idv.write keeps
                writer.add_empty_rows(len(df))
            row0 += len(df)
        writer.close()          # (a dask DataFrame has at least one partition)
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    return text
