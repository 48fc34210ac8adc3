HEADER_SIZE: int
SIGNATURE: int
TAIL_SIGNATURE: int
WRITER_VERSION: int
READER_FIRST_VERSION: int
MIN_COMPATIBLE_VERSION: int
MAX_COMPATIBLE_VERSION: int
LEGACY_VERSION: int

def version_string(v: int) -> str: ...

class Header:
    version: int
    compatible_version: int
    toc_offset: int
    tail_offset: int
    row_count: int
    column_count: int
    def __init__(self, version: int, compatible_version: int, toc_offset: int,
                 tail_offset: int, row_count: int, column_count: int) -> None: ...
    @property
    def version_string(self) -> str: ...
    @property
    def compatible_version_string(self) -> str: ...
    @property
    def file_size(self) -> int: ...
    def pack(self) -> bytes: ...

def parse_header(head: bytes | memoryview, stream_size: int) -> Header: ...
def check_tail(tail: bytes | memoryview, tail_offset: int) -> None: ...
def pack_tail() -> bytes: ...
