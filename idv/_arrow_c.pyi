from typing import Any

import numpy as np

class Spans:
    def __init__(self, buffer: Any, offsets: np.ndarray, rows: np.ndarray, itemsize: int,
                 format: str) -> None: ...
    def __arrow_c_stream__(self, requested_schema: object = ...) -> object: ...
