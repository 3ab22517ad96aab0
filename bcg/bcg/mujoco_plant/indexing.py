"""Index arrays as slices where possible: numpy reads and writes through a slice are much cheaper."""
from typing import Union

import numpy as np


def as_slice_if_contiguous(idx) -> Union[slice, np.ndarray]:
    """`slice(a, a + n)` when `idx` is the run a, a+1, ..., a+n-1; else `idx` as an int array."""
    idx = np.asarray(idx, dtype=int)
    if len(idx) and np.array_equal(idx, np.arange(idx[0], idx[0] + len(idx))):
        return slice(int(idx[0]), int(idx[0]) + len(idx))
    return idx
