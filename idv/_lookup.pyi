import numpy as np

HEADER_SIZE: int
ENTRY: np.dtype

def parse_lookup(buf: bytes | memoryview, num_blocks: int, table_offset: int, tail: int,
                 where: str) -> np.ndarray: ...
def pack_lookup(offsets: np.ndarray, disk: np.ndarray, raw: np.ndarray) -> bytes: ...
