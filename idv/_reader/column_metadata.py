"""A column's annotations (ML.NET's metadata: SlotNames, KeyValues, IsNormalized...): their
table, each value decoded from its stored bytes on first use (counted against the memory
limit), and their stored forms, which tell two columns' annotations apart without decoding.

ColumnAnnotations is a part of idv._reader.column.Column, which holds the state it uses: its
idv._reader.file_parts.FileParts (``_file``), ``index``, ``name``, ``_located``, and what is decoded
(``_metadata_entries``, ``_metadata``, ``_annotations``). """
from __future__ import annotations


import numpy as np

from idv import _codecs, _compression
from idv._resources import budget
from idv._values import vectors
from idv._store.block_runs import check_dense
from idv.errors import IdvFormatError, UnsupportedCodecError, warn


class ColumnAnnotations:
    """The annotation methods of a Column (see the module's docs)."""

    @property
    def metadata_kinds(self):
        """The kinds of the column's annotations, in file order (``SlotNames``,
        ``KeyValues``...)."""
        return [m.kind for m in self.metadata_entries()]

    @property
    def metadata_types(self):
        """dict kind -> ML.NET type of each annotation (None when its codec is unknown)."""
        out = {}
        for m in self.metadata_entries():
            try:
                out[m.kind] = self._metadata_codec(m).type
            except UnsupportedCodecError:
                out[m.kind] = None
        return out

    @property
    def metadata(self):
        """dict kind -> value: SlotNames -> array of str, KeyValues -> array, IsNormalized ->
        bool; scalars as Python/numpy scalars, vectors as arrays shaped by their dims. Every
        annotation is decoded, each counted against the memory limit (idv.MemoryLimitError
        naming it); ``annotation(kind)`` decodes one."""
        if self._metadata is None:
            values = {}
            for m in self.metadata_entries():
                try:
                    values[m.kind] = self._annotation_of(m)
                except UnsupportedCodecError as e:
                    warn(f"skipping {e}")
            self._metadata = values
        return self._metadata

    def annotation(self, kind, default=None):
        """The value of the column's `kind` annotation (as in ``metadata``), decoded on first
        use without decoding the others (readers use SlotNames and KeyValues so).

        Parameters
        ----------
        kind : str
            ``'SlotNames'``, ``'KeyValues'``, ``'IsNormalized'``...
        default : optional
            What to give when the column has none, or its codec is unknown (with a warning).
        """
        if self._metadata is not None:
            return self._metadata.get(kind, default)
        entry = self._entry_of(kind)
        if entry is None:
            return default
        try:
            return self._annotation_of(entry)
        except UnsupportedCodecError as e:
            warn(f"skipping {e}")
            return default

    def _annotation_of(self, entry):
        """decode_metadata, once per entry."""
        key = (entry.kind, entry.offset)
        if key not in self._annotations:
            self._annotations[key] = self.decode_metadata(entry)
        return self._annotations[key]

    def _metadata_codec(self, m):
        try:
            return _codecs.resolve(m.codec_name, m.codec_params)
        except IdvFormatError as e:
            raise self._located(e, metadata_kind=m.kind, offset=m.toc_offset)

    def metadata_entries(self):
        """The column's metadata table: an entry (kind, codec_name, codec_params, compression,
        offset, size) per annotation, in file order. Package-internal."""
        if self._metadata_entries is None:
            self._file.check_open()
            try:
                self._metadata_entries = self._file.tables.metadata(self.index)
            except IdvFormatError as e:
                raise self._located(e)
        return self._metadata_entries

    def annotation_form(self, kind):
        """(codec name, parameters, compression, stored bytes) of the column's `kind`
        annotation, None without: columns whose forms are equal have equal values, told
        apart without decoding them. Package-internal."""
        e = self._entry_of(kind)
        return None if e is None else (e.codec_name, e.codec_params, e.compression,
                                       bytes(self._file.store.view(e.offset, e.size)))

    def _entry_of(self, kind):
        """The metadata entry of the column's `kind` annotation (the last, as ML.NET reads
        them), None without."""
        entries = [m for m in self.metadata_entries() if m.kind == kind]
        return entries[-1] if entries else None

    def decode_metadata(self, entry):
        """The value of one entry of metadata_entries(). Raises UnsupportedCodecError for an
        unknown codec or compression (``metadata`` skips those with a warning) and
        IdvFormatError for damage. Package-internal."""
        codec = self._metadata_codec(entry)
        if entry.compression not in _compression.NAMES:
            raise self._located(UnsupportedCodecError(f"unknown compression "
                                                      f"{entry.compression}"),
                                metadata_kind=entry.kind)
        store = self._file.store

        def what():
            return (f"column {self.index} {self.name!r} annotation {entry.kind!r} "
                    f"({codec.type})")
        try:
            data = store.view(entry.offset, entry.size)
            cap = entry.size * _compression.MAX_RATIO + 64
            try:
                raw = _compression.decompress_metadata(entry.compression, data,
                                                       min(cap, store.memory_limit))
            except IdvFormatError:
                if cap > store.memory_limit:      # perhaps larger than the limit: say so
                    store.need(store.memory_limit + 1, lambda: f"{what()} (decompressed)")
                raise
            if not isinstance(codec, _codecs.VBufferCodec):
                value = codec.decode(memoryview(raw), 1)
            else:
                def held(items):
                    return len(raw) + budget.items_bytes(codec.dtype, items, len(raw))
                value = codec.decode(memoryview(raw), 1,
                                     reserve=lambda items: store.need(held(items), what))
                check_dense([value], codec.type, entry.size)
                if not value.all_dense:     # densified: the rows, and each item's place
                    store.need(held(len(value.values)) + 16 * len(value.values)
                               + int(value.lengths.sum()) * codec.dtype.itemsize, what)
                return vectors.metadata_value(value, codec.type)
        except IdvFormatError as e:
            raise self._located(e, metadata_kind=entry.kind, offset=entry.offset)
        v = value[0]
        return v.item() if isinstance(v, np.bool_) else v
