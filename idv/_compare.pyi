from typing import Dict, Optional, Tuple

import numpy as np

OPS: Dict[str, int]

def text_compare(starts: np.ndarray, ends: np.ndarray, data: np.ndarray, op: str,
                 literal: bytes, out: np.ndarray) -> None: ...
def text_hits(starts: np.ndarray, ends: np.ndarray, data: np.ndarray, op: str,
              literal: bytes, base: int, hits: np.ndarray) -> int: ...
def text_strings(starts: np.ndarray, ends: np.ndarray, data: np.ndarray,
                 rows: np.ndarray) -> np.ndarray: ...
def text_take(parts: list, rows: np.ndarray,
              views: Optional[np.ndarray] = None) -> Tuple[Optional[np.ndarray], np.ndarray]: ...
