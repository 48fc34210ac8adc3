from typing import Dict, Tuple

import numpy as np

OPS: Dict[str, int]

def text_compare(starts: np.ndarray, ends: np.ndarray, data: np.ndarray, op: str,
                 literal: bytes, out: np.ndarray) -> None: ...
def text_strings(starts: np.ndarray, ends: np.ndarray, data: np.ndarray,
                 rows: np.ndarray) -> np.ndarray: ...
def text_take(parts: list, rows: np.ndarray) -> Tuple[np.ndarray, np.ndarray]: ...
