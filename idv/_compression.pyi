from typing import List, Union, Callable, Dict, Optional, Tuple

import numpy as np
import numpy.typing as npt

NONE: int
DEFLATE: int
ZLIB: int
NAMES: Dict[int, str]
MAX_RATIO: int
NATIVE_ZLIB: int
NATIVE_LIBDEFLATE: int
LIBDEFLATE_INFLATE: bool
ZLIB_C: bool
NO_CRC: int
BAD_CRC: int
CRC32_LIBRARY: str
HUGE_MIN: int

def inflate_blocks(kind: int, src: memoryview | bytes, offsets: np.ndarray, disk: np.ndarray,
                   raw: np.ndarray, dst: np.ndarray, dst_offsets: np.ndarray,
                   lib: int = 0, crcs: Optional[np.ndarray] = None,
                   need: Optional[np.ndarray] = None) -> Tuple[int, Optional[str]]: ...
def inflate_blocks_across(kind: int, sources: List[memoryview | bytes | np.ndarray],
                          source_of: Optional[np.ndarray], offsets: np.ndarray,
                          disk: np.ndarray, raw: np.ndarray, dsts: List[np.ndarray],
                          dst_of: Optional[np.ndarray], dst_offsets: np.ndarray,
                          lib: int = 0, crcs: Optional[np.ndarray] = None,
                          need: Optional[np.ndarray] = None) -> Tuple[int, Optional[str]]: ...
def inflate_blocks_with(fn: Callable[[memoryview, int], bytes], kind: int,
                        src: memoryview | bytes, offsets: np.ndarray, disk: np.ndarray,
                        raw: np.ndarray, dst: np.ndarray,
                        dst_offsets: np.ndarray,
                        crcs: Optional[np.ndarray] = None) -> Tuple[int, Optional[str]]: ...
def crc32_of(data: bytes | bytearray | memoryview | np.ndarray,
             library: Optional[str] = None) -> int: ...
def crc32_libraries() -> list[str]: ...
def use_crc32_library(name: str) -> str: ...
def crc32_ranges(data: bytes | memoryview | np.ndarray, offsets: np.ndarray,
                 lengths: np.ndarray) -> np.ndarray: ...
def deflate_raw(data: bytes | memoryview, level: int = 6) -> bytes: ...
def decompress_metadata(kind: int, data: bytes | memoryview, limit: int) -> bytes: ...
def set_prefetch(on: bool) -> bool: ...
def empty(n: int, dtype: npt.DTypeLike) -> np.ndarray: ...
def keep_freed(max_bytes: int, drop: bool = ...) -> int: ...
def kept_bytes() -> int: ...

LIBDEFLATE_COMPRESS: bool

def distinct_bytes(data: Union[bytes, np.ndarray], limit: int = ...) -> int: ...

class Deflater:
    level: int
    adaptive: bool
    blocks: int
    tried: int
    zlib_blocks: int
    quick_blocks: int
    def __init__(self, level: int = 6, adaptive: bool = True) -> None: ...
    def trial(self, data: Union[bytes, bytearray, memoryview, np.ndarray]) -> Optional[bool]: ...
    def noise(self, data: Union[bytes, bytearray, memoryview, np.ndarray]) -> Tuple[int, bytes]: ...
    def compress(self, data: Union[bytes, bytearray, memoryview, np.ndarray],
                 trial: bool = ..., limit: int = ...) -> bytes: ...
