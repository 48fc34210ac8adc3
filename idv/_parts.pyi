from typing import List, Optional, Tuple

import numpy as np

def gather_lookups(data: bytes | memoryview, offsets: np.ndarray,
                   num_blocks: int) -> Optional[np.ndarray]: ...
def check_parts(frame: List[Tuple[int, int]], lookup_offsets: np.ndarray, lookup_size: int,
                blocks: Optional[np.ndarray], meta_starts: np.ndarray, meta_stops: np.ndarray,
                tail: int, sums_offsets: Optional[np.ndarray], skip: Tuple[int, ...],
                queries: np.ndarray) -> Optional[np.ndarray]: ...
def possible_sizes(blocks: np.ndarray, itemsizes: np.ndarray, stored: np.ndarray,
                   rows_per_block: int, num_rows: int) -> np.ndarray: ...
