"""CSV / TSV and JSON Lines in idv.convert.

From an .idv, each is written by the writer of ``idv cat --format csv / tsv / jsonl``
(idv._interop.delimited), from the blocks directly and without pyarrow
(idv.formats.idv.idv_to_text). Other sources go to CSV / TSV through pyarrow's CSV writer,
flattened (CsvSink), and CSV / TSV is read back by pyarrow's CSV reader (CsvSource). JSON Lines is
an output only, from an .idv. """
from __future__ import annotations

import contextlib
import csv
import functools
import os
import re

import numpy as np

from idv import types as T
from idv._values.metadata import slot_labels
from idv.types import parse_type
from idv._interop.delimited import DelimitedWriter, JsonLinesWriter
from idv.formats._base import (FileSink, Source, check_codecs, import_pa,
                               refuse_rows_without_columns)
from idv.formats.idv import idv_to_text

# CSV is read in blocks of this many bytes (pyarrow infers the column types from the first)
_CSV_BLOCK = 16 << 20


# an ISO 8601 date and time of day (.NET's round trip "o" and its kin), with an offset or not
_ISO_TIME = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]{1,7})?)?"
             r"(Z|[+-][0-9]{2}:[0-9]{2})?$")


def _iso_times(pa, values):
    """DateTimeOffset where every value of a CSV column pyarrow read as text (the first
    block's) is an ISO 8601 time with an offset (or Z), DateTime where each is one without;
    else None (no value, or some other text)."""
    import pyarrow.compute as pc
    values = values.drop_null()
    if not len(values) or not re.match(_ISO_TIME, values[0].as_py()) or \
            not pc.all(pc.match_substring_regex(values, _ISO_TIME)).as_py():
        return None         # (the first value alone tells most columns of words apart)
    zoned = pc.match_substring_regex(values, r"(Z|[+-][0-9]{2}:[0-9]{2})$")
    if pc.all(zoned).as_py():
        return T.DateTimeOffset
    return T.DateTime if not pc.any(zoned).as_py() else None


class CsvSource(Source):
    """A CSV / TSV file read by pyarrow's CSV reader in blocks of _CSV_BLOCK bytes; `types=`
    tells it how to parse some columns. The total is unknown."""

    def __init__(self, path, options, delimiter=","):
        import pyarrow.csv as pcsv
        pa = import_pa()
        columns, types, datetime = options.columns, options.types, options.datetime
        column_types = {}
        for name, t in (types or {}).items():
            at = _csv_arrow_type(pa, t, datetime, options.format)
            if at is not None:
                column_types[name] = at
        if columns is not None and isinstance(columns, (str, int, np.integer)):
            columns = [columns]
        if columns is not None and any(isinstance(c, (int, np.integer)) for c in columns):
            raise TypeError("CSV columns are chosen by name")
        self.args = (path, pcsv.ReadOptions(block_size=_CSV_BLOCK),
                     pcsv.ParseOptions(delimiter=delimiter),
                     pcsv.ConvertOptions(column_types=column_types,
                                         include_columns=list(columns) if columns else None))
        self.typed = set(column_types)
        self.reader = self._open()
        self.schema = self.reader.schema
        # times read from their text as types= reads it, into an .idv: those with offsets,
        # which pyarrow would make UTC instants, with each value's own offset; and times
        # beyond the nanoseconds' years (1677-2262), which pyarrow leaves as text
        untyped = [f for f in self.schema if options.format == "idv" and f.name not in self.typed]
        times = {f.name: T.DateTimeOffset for f in untyped
                 if pa.types.is_timestamp(f.type) and f.type.tz is not None}
        texts = [f.name for f in untyped if pa.types.is_string(f.type)]
        self.first = None           # the first batch, read to look at its text
        if texts:
            with self._named(), contextlib.suppress(StopIteration):
                self.first = self.reader.read_next_batch()
            times.update((n, t) for n in texts if self.first is not None and
                         (t := _iso_times(pa, self.first.column(n))) is not None)
        if times:
            self.types, self.first = times, None
            self.args[3].column_types = {**column_types, **dict.fromkeys(times, pa.string())}
            self.reader = self._open()
            self.schema = self.reader.schema
        twice = sorted({n for n in self.schema.names if self.schema.names.count(n) > 1})
        if twice:      # a header's slip: the earlier column would be written hidden
            raise ValueError(f"the CSV header names {', '.join(map(repr, twice))} more than "
                             f"once: give each column a name of its own")
        _refuse_untyped(pa, self.schema)
        _refuse_bytes(pa, self.schema)

    def _open(self):
        import pyarrow.csv as pcsv
        with self._named():
            return pcsv.open_csv(self.args[0], read_options=self.args[1],
                                 parse_options=self.args[2], convert_options=self.args[3])

    def batches(self):
        reader, self.reader = self.reader, None
        first, self.first = self.first, None
        if reader is None:
            reader, first = self._open(), None
        if first is not None:
            yield first
        while True:
            with self._named():
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    return
            yield batch

    @contextlib.contextmanager
    def _named(self):
        """pyarrow's errors of a column ("In CSV column #1: ...") naming the column by its
        header name, and saying how to type one whose type pyarrow inferred."""
        pa = import_pa()
        try:
            yield
        except pa.ArrowKeyError as e:           # a column asked for (columns=) not in it
            m = re.match(r"Column '(.*)' in include_columns does not exist", str(e), re.S)
            names = _header(self.args[0], self.args[2].delimiter) if m else None
            if names is None:
                raise
            raise KeyError(f"{self.args[0]} has no column {m.group(1)!r} (its columns: "
                           f"{', '.join(names)})") from None
        except pa.ArrowInvalid as e:
            m = re.match(r"In CSV column #(\d+): (.*)", str(e), re.S)
            names = _header(self.args[0], self.args[2].delimiter) if m else None
            if names is None or int(m.group(1)) >= len(names):
                raise
            name = names[int(m.group(1))]
            hint = "" if name in self.typed else (
                f"; its type was inferred from the first {_CSV_BLOCK >> 20} MiB: give it "
                f"with types= (--types {name}=TYPE)")
            line = _line_of(self.args[0], self.args[2].delimiter, int(m.group(1)), m.group(2))
            raise ValueError(f"CSV column {name!r}{line}: {m.group(2)}{hint}") from None


def _line_of(path, delimiter, column, error):
    """' line N': the line of local CSV file `path` where field `column` holds the value
    pyarrow's `error` quotes ("invalid value 'x'"), found by reading it again (an error's
    cost only); '' when that cannot be told."""
    m = re.search(r"invalid value '(.*)'$", error, re.S)
    if m is None or not isinstance(path, (str, os.PathLike)):
        return ""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = csv.reader(f, delimiter=delimiter)
            next(rows, None)
            for row in rows:
                if len(row) > column and row[column] == m.group(1):
                    return f" line {rows.line_num}"
    except (OSError, UnicodeDecodeError, csv.Error):
        pass
    return ""


def _header(path, delimiter):
    """The header names of local CSV file `path` (None: not a local file, or unreadable)."""
    if not isinstance(path, (str, os.PathLike)):
        return None
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            return next(csv.reader(f, delimiter=delimiter), None)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None


def _refuse_untyped(pa, schema):
    """TypeError naming the columns pyarrow found no value in, in the first block it infers
    the types from (a column empty there, or a CSV of no rows), before anything is written:
    their type is for the caller to give (pyarrow would fail on a later value)."""
    empty = [f.name for f in schema if pa.types.is_null(f.type)]
    if empty:
        names = ", ".join(map(repr, empty[:5])) + (f" and {len(empty) - 5} more"
                                                   if len(empty) > 5 else "")
        raise TypeError(f"CSV column{'s' * (len(empty) > 1)} {names}: no value in the first "
                        f"{_CSV_BLOCK >> 20} MiB, from which the types are inferred (or no rows "
                        f"at all): give the type (types=...)")


def _refuse_bytes(pa, schema):
    """ValueError naming the columns pyarrow read as bytes: text that is not UTF-8 (ML.NET's
    Text is UTF-8; a file in another encoding is converted first)."""
    raw = [f.name for f in schema
           if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)]
    if raw:
        raise ValueError(f"CSV column {raw[0]!r}: its text is not UTF-8 (ML.NET's Text is); "
                         f"convert the file's encoding first, e.g. iconv -f LATIN1 -t UTF-8")


def _csv_arrow_type(pa, t, datetime, fmt):
    """The Arrow type pyarrow's CSV reader should parse a column as, for a given idv type
    (None for the types CSV spreads over several columns), for an output of format `fmt`."""
    from idv._values.arrow_types import item_arrow_type
    t = T.as_type(t)
    if t in (T.DateTime, T.TimeSpan, T.DateTimeOffset) and fmt == "idv":
        # the text, which the writer reads exactly to the tick over all of .NET's years (ML.NET
        # writes 7 fractional digits, a TimeSpan as .NET's text, an offset of its own a
        # value): no Arrow type holds them all
        return pa.string()
    if isinstance(t, T.Vector) or t in (T.DateTimeOffset, T.RowId):
        return None
    at = item_arrow_type(pa, t, datetime if datetime in ("ns", "ticks") else "us")
    # numbers parsed at their kind's widest, so that the writer's checks see the text's value
    # (a Single parsed as float32 would be inf beyond its range, an Int32 pyarrow's error)
    if pa.types.is_floating(at):
        return pa.float64()
    if pa.types.is_integer(at):         # int64 holds every narrower one, -1 included
        return pa.uint64() if at == pa.uint64() else pa.int64()
    return at


class CsvSink(FileSink):
    """CSV holds flat columns: fixed-size vectors become one column per slot (named as
    to_pandas names them), struct fields ``name.field`` columns, dictionaries their values;
    variable-size vectors are refused (before anything is written)."""

    def __init__(self, dest, source, options, delimiter=","):
        import pyarrow.csv as pcsv
        check_codecs(options.format, None, options.compression)
        self.format = options.format
        schema = source.schema
        pa = import_pa()
        self.getters = []        # (name, fn(batch) -> array)
        for i, field in enumerate(schema):
            self._plan(pa, field.name, field.type, field.metadata or {},
                       lambda b, i=i: b.column(i))
        self.schema = pa.schema([(n, t) for n, t, _ in self.getters])

        def open_writer(tmp):
            self.writer = pcsv.CSVWriter(tmp, self.schema,
                                         write_options=pcsv.WriteOptions(delimiter=delimiter))
        self._create(dest, open_writer)

    def _plan(self, pa, name, at, meta, get):
        import pyarrow.compute as pc

        from idv._values.arrow_types import METADATA_KEY, TYPE_KEY
        if isinstance(at, pa.BaseExtensionType):
            self._plan(pa, name, at.storage_type, meta, lambda b: _storage_of(get(b)))
            return
        if pa.types.is_fixed_size_list(at):
            dims, inner = [at.list_size], at.value_type
            while pa.types.is_fixed_size_list(inner):
                dims.append(inner.list_size)
                inner = inner.value_type
            size = int(np.prod(dims))
            slot_names = None
            if TYPE_KEY in meta:
                try:
                    t = parse_type(meta[TYPE_KEY].decode())
                    if isinstance(t, T.Vector) and t.size == size:
                        dims = list(t.dims)
                except ValueError:
                    pass
            if METADATA_KEY in meta:
                from idv._values.metadata import metadata_from_json
                try:
                    spec = metadata_from_json(meta[METADATA_KEY].decode())
                    if "SlotNames" in spec:
                        slot_names = spec["SlotNames"][1]
                except (ValueError, KeyError):
                    pass
            labels = slot_labels(name, T.Vector(T.Single, *dims), slot_names)

            def flat(b, get=get):
                arr = get(b)
                if isinstance(arr, pa.ChunkedArray):
                    arr = arr.combine_chunks()
                while pa.types.is_fixed_size_list(arr.type):
                    arr = arr.flatten()
                return arr
            for j, label in enumerate(labels):
                self._plan(pa, label, inner, {},
                           lambda b, j=j, flat=flat: pc.take(
                               flat(b), pa.array(np.arange(len(b)) * size + j)
                               if len(b) else pa.array([], pa.int64())))
            return
        if pa.types.is_list(at) or pa.types.is_large_list(at) \
                or getattr(pa.types, "is_list_view", lambda _: False)(at):
            raise ValueError(f"column {name!r} ({at}): CSV cannot hold variable-size vectors; "
                             f"convert to Parquet or Feather, or leave the column out "
                             f"(columns=...)")
        if pa.types.is_struct(at):
            for k in range(at.num_fields):
                child = at.field(k)
                self._plan(pa, f"{name}.{child.name}", child.type, {},
                           lambda b, k=k: _struct_child(get(b), k))
            return
        if pa.types.is_dictionary(at):
            self._plan(pa, name, at.value_type, {},
                       lambda b: _decoded(get(b)))
            return
        self.getters.append((name, at, get))

    def write(self, batch):
        pa = import_pa()
        if not self.getters:
            refuse_rows_without_columns(self.format, batch.num_rows)
        arrays = [get(batch) for _, _, get in self.getters]
        arrays = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays]
        self.writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=self.schema))


def _storage_of(arr):
    pa = import_pa()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.storage


def _struct_child(arr, k):
    pa = import_pa()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.flatten()[k]


def _decoded(arr):
    pa = import_pa()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.dictionary_decode()


def csv_source(delimiter):
    """The source of a delimited text format."""
    return functools.partial(CsvSource, delimiter=delimiter)


def csv_sink(delimiter):
    """The sink (from Arrow batches) of a delimited text format."""
    return functools.partial(CsvSink, delimiter=delimiter)


def delimited_from_idv(delimiter):
    """The .idv -> CSV / TSV path: what ``idv cat --format csv / tsv`` writes."""
    return functools.partial(idv_to_text, writer=functools.partial(DelimitedWriter,
                                                                   delimiter=delimiter))


# .idv -> JSON Lines: what ``idv cat --format jsonl`` writes, in UTF-8
jsonl_from_idv = functools.partial(idv_to_text, writer=JsonLinesWriter)
