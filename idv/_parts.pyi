from typing import List, Optional, Tuple

import numpy as np

from idv._header import Header
from idv._toc import TocEntry

SUM_ENTRY: np.dtype
TABLE_KIND: int
SUMS_AT: int
SUMS_MAGIC: bytes

def open_frame(data: bytes | memoryview, check_sums: bool) -> Optional[
    Tuple[Header, Optional[Tuple[np.ndarray, int, int]], List[TocEntry]]]: ...

def read_tables(data: bytes | memoryview, header: Header, entries: List[TocEntry],
                extra: List[Tuple[int, int]], sums: Optional[np.ndarray], sums_offset: int,
                stats_offset: Optional[int], itemsizes: List[int], stored: List[bool]
                ) -> Optional[Tuple[np.ndarray, List[list], Optional[np.ndarray],
                                    np.ndarray]]: ...
def gather_lookups(data: bytes | memoryview, offsets: np.ndarray,
                   num_blocks: int) -> Optional[np.ndarray]: ...
def check_parts(frame: List[Tuple[int, int]], lookup_offsets: np.ndarray, lookup_size: int,
                blocks: Optional[np.ndarray], meta_starts: np.ndarray, meta_stops: np.ndarray,
                tail: int, queries: np.ndarray, sums: Optional[np.ndarray] = ...,
                skip: Tuple[int, ...] = ..., data: Optional[bytes | memoryview] = ...,
                checked: Tuple[int, ...] = ...,
                crcs: Optional[np.ndarray] = ...) -> Optional[np.ndarray]: ...
def possible_sizes(blocks: np.ndarray, itemsizes: List[int], stored: List[bool],
                   rows_per_block: int, num_rows: int) -> np.ndarray: ...
