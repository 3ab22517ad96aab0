"""Buffers that the simulator's substeps reuse instead of allocating afresh (bundling's branch
states, intermediates, controls and index arrays), so that a substep also replays packed launches
(kernels.launch) instead of packing new ones.

- `SubstepPool`: what one substep position hands out. After `begin()` the k-th request of a kind
  (states, controls, arrays of one dtype and trailing shape) returns the k-th buffer of that kind:
  a substep that repeats the previous one's requests gets the same memory. A buffer is reallocated
  (with room for half as many rows again) when a request needs more rows than it has, or fewer than
  a quarter (memory follows the recent need, not the largest ever); the buffers of a kind beyond
  those the previous substep here used are dropped at `begin()`. Requests get arrays of exactly the rows asked for (the first rows of the
  buffer; the view is kept while the row count stays).
- `ScratchPool`: intermediates (`Scratch`, the bulk of the memory), shared by all positions of a
  segment: taken best fit by rows (`rows` says how many are in use), handed back all at once by
  `release()`; those not taken since the previous release are dropped then. Sharing keeps the
  memory near what one segment needs, whichever positions need it.
Adjoints are zeroed on every reuse; values only where asked.

Lifetime (the owner's to keep): nothing handed out may be reused while a tape that recorded it can
still run backward, and nothing handed out before `begin()` / `release()` may be read after it.
"""
import bisect
from typing import Dict, List, Optional, Tuple

import numpy as np
import warp as wp

from .kernels.launch import LaunchSites
from .state import Control, State
from .substep import Scratch, Substep


class _Buffer:
    """One pooled buffer: its storage (`full`, capacity rows), the view last handed out and its rows."""

    __slots__ = ("full", "capacity", "view", "rows")

    def __init__(self, full, capacity: int):
        self.full, self.capacity, self.view, self.rows = full, capacity, None, -1


def _rows_of(full, rows: int):
    """The first `rows` rows of a State, Control or wp.array (views keep the adjoints' rows too)."""
    if isinstance(full, wp.array):
        return full[:rows]
    return type(full)(*(None if a is None else a[:rows] for a in vars(full).values()))


def _arrays(x) -> List[wp.array]:
    return [x] if isinstance(x, wp.array) else [a for a in vars(x).values() if isinstance(a, wp.array)]


class ScratchPool:
    """See the module docstring."""

    def __init__(self, physics: Substep, requires_grad: bool):
        self.physics, self.requires_grad = physics, requires_grad
        self._free: List[Scratch] = []        # by capacity
        self._free_rows: List[int] = []       # their capacities
        self._taken: List[Scratch] = []

    def take(self, rows: int) -> Scratch:
        """Intermediates with `rows` rows in use (`Scratch.reuse`: accumulators and adjoints zeroed):
        the smallest free ones that hold them, unless that is twice as many rows or more."""
        i = bisect.bisect_left(self._free_rows, rows)
        if i < len(self._free) and self._free_rows[i] < 2 * max(rows, 1):
            del self._free_rows[i]
            sc = self._free.pop(i)
            sc.reuse(rows)
        else:
            sc = self.physics.scratch(max(rows + rows // 4, 1), self.requires_grad)
            sc.reuse(rows, zero=False)
        self._taken.append(sc)
        return sc

    def release(self) -> None:
        """Everything taken is free again; what was free and not taken is dropped."""
        self._free = sorted(self._taken, key=lambda sc: sc.capacity)
        self._free_rows = [sc.capacity for sc in self._free]
        self._taken = []


class SubstepPool:
    """See the module docstring. `generation` counts the `begin()` calls; `launches` are the launch
    sites of whatever the substep launches on the pool's buffers; `scratches` is the segment's."""

    def __init__(self, physics: Substep, requires_grad: bool, scratches: ScratchPool):
        self.physics, self.requires_grad, self.scratches = physics, requires_grad, scratches
        self.device = physics.model.device
        self.launches = LaunchSites(self.device)
        self.generation = 0
        self._buffers: Dict[Tuple, List[_Buffer]] = {}
        self._used: Dict[Tuple, int] = {}

    def begin(self) -> None:
        """Start the next substep at this position."""
        for key, buffers in self._buffers.items():
            del buffers[self._used.get(key, 0):]
        self._used.clear()
        self.launches.begin()
        self.generation += 1

    def state(self, rows: int, zero: bool = False, requires_grad: Optional[bool] = None) -> State:
        """A State of `rows` rows (adjoints zeroed; values zeroed when `zero`), with adjoints unless
        `requires_grad` is False."""
        grad = self.requires_grad if requires_grad is None else requires_grad
        return self._take(("state", grad), rows, zero, lambda cap: State.zeros(self.physics.model, cap, grad))

    def control(self, rows: int) -> Control:
        """A Control of `rows` rows (adjoints zeroed; values as left: write them all)."""
        return self._take(("control",), rows, False,
                          lambda cap: Control.zeros(self.physics.model, cap, self.requires_grad))

    def array(self, rows: int, tail: Tuple[int, ...], dtype, zero: bool = False, requires_grad: bool = False
              ) -> wp.array:
        """A (rows, *tail) array of `dtype` (adjoint zeroed; values zeroed when `zero`)."""
        return self._take(("array", tail, dtype, requires_grad), rows, zero,
                          lambda cap: wp.zeros((cap, *tail), dtype=dtype, device=self.device,
                                               requires_grad=requires_grad))

    def ints(self, values) -> wp.array:
        """An int32 array holding `values` (host integers, 1-D or 2-D)."""
        values = np.ascontiguousarray(values, dtype=np.int32)
        out = self.array(len(values), values.shape[1:], wp.int32)
        if len(values):
            if wp.get_device(self.device).is_cpu:
                out.numpy()[...] = values
            else:
                wp.copy(out, wp.array(values, dtype=wp.int32, device="cpu"))
        return out

    def _buffer(self, key: Tuple, rows: int, make) -> Tuple[_Buffer, bool]:
        """The next buffer of `key`, holding at least `rows` rows and fewer than four times as many,
        and whether it was just allocated (zeroed)."""
        buffers = self._buffers.setdefault(key, [])
        k = self._used.get(key, 0)
        self._used[key] = k + 1
        if k < len(buffers) and rows <= buffers[k].capacity < 4 * max(rows, 1):
            return buffers[k], False
        cap = max(rows + rows // 2, 1)
        buf = _Buffer(make(cap), cap)
        if k < len(buffers):
            buffers[k] = buf
        else:
            buffers.append(buf)
        return buf, True

    def _take(self, key: Tuple, rows: int, zero: bool, make):
        buf, fresh = self._buffer(key, rows, make)
        if buf.rows != rows:
            buf.view = buf.full if rows == buf.capacity else _rows_of(buf.full, rows)
            buf.rows = rows
        if not fresh:
            for arr in _arrays(buf.view):
                if zero:
                    arr.zero_()
                if arr.grad is not None:
                    arr.grad.zero_()
        return buf.view
