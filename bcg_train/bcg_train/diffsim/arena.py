"""`carve`: arrays laid out in one allocation, so that one memset zeroes them all (a substep's
intermediates are reused thousands of times per training iteration, and at small N each separate
`zero_()` costs more in Python than the memset itself)."""
from typing import List, Sequence, Tuple

import numpy as np
import warp as wp

ALIGN = 256
"""Bytes each array's start is aligned to (a CUDA allocation's alignment)."""


def carve(specs: Sequence[Tuple[Tuple[int, ...], type]], device) -> Tuple[wp.array, List[wp.array]]:
    """(block, arrays): zeroed arrays of the (shape, dtype) `specs`, in one allocation `block` (uint8);
    each array keeps the block alive."""
    offsets, total = [], 0
    for shape, dtype in specs:
        offsets.append(total)
        total += -(-int(np.prod(shape)) * wp.types.type_size_in_bytes(dtype) // ALIGN) * ALIGN
    block = wp.zeros(max(total, 1), dtype=wp.uint8, device=device)
    arrays = []
    for (shape, dtype), offset in zip(specs, offsets):
        arr = wp.array(ptr=block.ptr + offset, shape=shape, dtype=dtype, device=device)
        arr._ref = block
        arrays.append(arr)
    return block, arrays
