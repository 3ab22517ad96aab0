"""`BufferPool`: the buffers a segment's substeps reuse instead of allocating afresh (bundling's
branch states, intermediates, controls and index and perturbation arrays).

Requests of a kind (states, controls, intermediates, arrays of one dtype and trailing shape, with or
without adjoints) take the smallest free buffer of that kind that holds the rows asked for, unless it
holds twice as many or more (then a new one, with room for a quarter more). `release()` hands back
everything taken since the previous release (the owner calls it when nothing taken may be read any
more: the segment's `cut()`, or every substep without gradients) except what `carry` names, and drops
the free buffers nobody took since the previous release: the pool follows what one segment needs,
whichever substeps need it. States, controls and arrays are handed out with exactly the rows asked
for (the first rows of the buffer; the view is kept while the row count stays); intermediates have
a capacity and `rows` in use. Adjoints are zeroed on every reuse; values only where asked.

Lifetime (the owner's to keep): nothing taken may be released while a tape that recorded it can still
run backward.
"""
import bisect
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import warp as wp

from .state import Control, State
from .substep import Scratch, Substep


class _Buffer:
    """One pooled buffer: its storage (`full`: a State, Control, wp.array or Scratch with `capacity`
    rows) and the view last handed out (`rows` rows)."""

    __slots__ = ("full", "capacity", "view", "rows")

    def __init__(self, full, capacity: int):
        self.full, self.capacity, self.view, self.rows = full, capacity, None, -1

    def head(self, rows: int):
        """The first `rows` rows (views keep the adjoints' rows too), kept while `rows` stays."""
        if rows != self.rows:
            full = self.full
            if rows == self.capacity:
                self.view = full
            elif isinstance(full, wp.array):
                self.view = full[:rows]
            else:
                self.view = type(full)(*(None if a is None else a[:rows] for a in vars(full).values()))
            self.rows = rows
        return self.view


class _Kind:
    """The free and taken buffers of one kind, and how to make one of a given capacity."""

    __slots__ = ("make", "free", "free_rows", "taken", "round_up")

    def __init__(self, make: Callable[[int], object], round_up: bool = False):
        self.make, self.round_up = make, round_up
        self.free: List[_Buffer] = []        # by capacity
        self.free_rows: List[int] = []       # their capacities
        self.taken: List[_Buffer] = []

    def take(self, rows: int) -> Tuple[_Buffer, bool]:
        """A buffer for `rows` rows, and whether it was just made (zeroed)."""
        i = bisect.bisect_left(self.free_rows, rows)
        if i < len(self.free) and self.free_rows[i] < 2 * max(rows, 1):
            del self.free_rows[i]
            buf, fresh = self.free.pop(i), False
        else:
            cap = 1 << max(rows - 1, 0).bit_length() if self.round_up else max(rows + rows // 4, 1)
            buf, fresh = _Buffer(self.make(cap), cap), True
        self.taken.append(buf)
        return buf, fresh

    def release(self, carried: List[object]) -> None:
        kept = [b for b in self.taken if b.view is not None and any(b.view is c for c in carried)]
        self.free = sorted((b for b in self.taken if b not in kept), key=lambda b: b.capacity)
        self.free_rows = [b.capacity for b in self.free]
        self.taken = kept


class BufferPool:
    """See the module docstring."""

    def __init__(self, physics: Substep, requires_grad: bool):
        self.physics, self.requires_grad = physics, requires_grad
        self.device = physics.model.device
        self._kinds: Dict[Tuple, _Kind] = {}
        self._carried: List[object] = []
        self._uploaded: Dict[Tuple, wp.array] = {}

    def release(self) -> None:
        """Everything taken is free again, but what `carry` names; the free buffers not taken since
        the previous release are dropped."""
        for kind in self._kinds.values():
            kind.release(self._carried)
        self._uploaded.clear()

    def carry(self, *handed_out) -> None:
        """Keep these (views handed out, or None) through the releases until the next `carry`: they
        hold what a later substep reads (e.g. the open bundles' branch states)."""
        self._carried = [x for x in handed_out if x is not None]

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
        """An int32 array holding `values` (host integers, 1-D or 2-D), read-only: values asked for
        again before the next release get the array they were copied to then. A copy from the host is
        a synchronisation on a GPU (from pageable memory CUDA waits for the stream), and bundling asks
        for the same indices substep after substep while its bundles stay as they are."""
        values = np.ascontiguousarray(values, dtype=np.int32)
        key = (values.shape, values.tobytes())
        out = self._uploaded.get(key)
        if out is None:
            out = self._uploaded[key] = self.array(len(values), values.shape[1:], wp.int32)
            if len(values):
                wp.copy(out, wp.array(values, dtype=wp.int32, device="cpu", copy=False))
        return out

    def scratch(self, rows: int, kind: str = "") -> Scratch:
        """Intermediates with `rows` rows in use (`Scratch.reuse`: accumulators and adjoints zeroed).
        A named `kind` is served from its own buffers, whose capacities are powers of two: for a few
        requests of widely varying size (bundling's re-runs), which among buffers sized to the other
        requests would rarely find one that fits."""
        buf, fresh = self._kind(("scratch", kind), lambda cap: self.physics.scratch(cap, self.requires_grad),
                                round_up=bool(kind)).take(rows)
        buf.full.reuse(rows, zero=not fresh)
        return buf.full

    def _kind(self, key: Tuple, make, round_up: bool = False) -> _Kind:
        kind = self._kinds.get(key)
        if kind is None:
            kind = self._kinds[key] = _Kind(make, round_up)
        return kind

    def _take(self, key: Tuple, rows: int, zero: bool, make):
        buf, fresh = self._kind(key, make).take(rows)
        view = buf.head(rows)
        if not fresh:
            for arr in ([view] if isinstance(view, wp.array) else vars(view).values()):
                if isinstance(arr, wp.array):
                    if zero:
                        arr.zero_()
                    if arr.grad is not None:
                        arr.grad.zero_()
        return view
