from typing import List, Tuple

from idv._cursor import Cursor
from idv._header import Header

HEADER_SIZE: int
MAX_ENTRIES: int

class TocEntry:
    index: int
    name: str
    codec_name: str
    codec_params: bytes
    compression: int
    rows_per_block: int
    lookup_offset: int
    metadata_offset: int
    toc_offset: int
    toc_end: int
    def __init__(self, index: int, name: str, codec_name: str, codec_params: bytes,
                 compression: int, rows_per_block: int, lookup_offset: int,
                 metadata_offset: int, toc_offset: int = 0, toc_end: int = 0) -> None: ...
    def pack(self) -> bytes: ...

class MetadataEntry:
    kind: str
    codec_name: str
    codec_params: bytes
    compression: int
    offset: int
    size: int
    toc_offset: int
    toc_end: int
    def __init__(self, kind: str, codec_name: str, codec_params: bytes, compression: int,
                 offset: int, size: int, toc_offset: int = 0, toc_end: int = 0) -> None: ...
    def pack(self) -> bytes: ...

def block_count(row_count: int, rows_per_block: int) -> int: ...
def pack_codec(name: str, params: bytes) -> bytes: ...
def read_codec_head(c: Cursor) -> Tuple[str, int]: ...
def read_codec(c: Cursor) -> Tuple[str, bytes]: ...
def parse_toc(buf: bytes | memoryview, toc_offset: int, header: Header) -> List[TocEntry]: ...
def parse_metadata_toc(buf: bytes | memoryview, offset: int,
                       tail: int) -> List[MetadataEntry]: ...
def pack_metadata_toc(entries: List[MetadataEntry]) -> bytes: ...
