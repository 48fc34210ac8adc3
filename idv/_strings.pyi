from typing import Any, Iterable

import numpy as np

def string_array(blocks: Iterable[Any], n: int) -> np.ndarray: ...
