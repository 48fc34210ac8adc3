"""Feather / Arrow IPC in idv.convert: the source (an IPC file, or an IPC stream) and the
sink (an IPC file, LZ4-compressed by default)."""
from __future__ import annotations

import os

from idv.compression import DEFLATE, NONE, kind as compression_kind
from idv.formats._base import (FileSink, Source, check_codecs, column_names, import_pa,
                               selected_schema)

# the codecs pyarrow's IPC writer takes besides 'deflate' (the format's usual one, lz4, first)
# and 'none'
CODECS = ("lz4", "zstd")


class IpcSource(Source):
    """An Arrow IPC file's record batches (memory-mapped), or a stream's in order (then the
    total is unknown)."""

    def __init__(self, path, options):
        pa = import_pa()
        self.source = pa.memory_map(os.fspath(path), "r")
        try:
            self.reader = pa.ipc.open_file(self.source)
            self.stream = False
        except pa.ArrowInvalid:
            self.source.seek(0)
            self.reader = None
            self.stream = True
        schema = (self.reader.schema if self.reader is not None
                  else pa.ipc.open_stream(self.source).schema)
        self.columns = column_names(schema, options.columns)
        self.schema = selected_schema(pa, schema, self.columns)
        if self.reader is not None:
            self.total = sum(self.reader.get_batch(i).num_rows
                             for i in range(self.reader.num_record_batches))

    def _all(self):
        pa = import_pa()
        if self.reader is not None:
            for i in range(self.reader.num_record_batches):
                yield self.reader.get_batch(i)
        else:
            self.source.seek(0)
            yield from pa.ipc.open_stream(self.source)

    def batches(self):
        for b in self._all():
            yield b if self.columns is None else b.select(self.columns)

    def close(self):
        self.source.close()


class IpcSink(FileSink):
    """Batches into an Arrow IPC file (Feather version 2)."""

    def __init__(self, dest, source, options):
        pa = import_pa()
        compression = check_codecs(options.format, CODECS, options.compression)
        kind = compression_kind(compression, strict=False)
        if kind == DEFLATE:
            compression = CODECS[0] if pa.Codec.is_available(CODECS[0]) else None
        elif kind == NONE:
            compression = None
        self.sink = None

        def open_writer(tmp):
            self.sink = pa.OSFile(tmp, "wb")
            self.writer = pa.ipc.new_file(self.sink, source.schema,
                                          options=pa.ipc.IpcWriteOptions(compression=compression))
        self._create(dest, open_writer)

    def write(self, batch):
        self.writer.write_batch(batch)

    def _handles(self):
        return [self.writer, self.sink]
