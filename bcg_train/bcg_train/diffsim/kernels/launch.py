"""`CachedLaunch`: a kernel launch site whose arguments Warp packs once, and `LaunchSites`, the sites
of one owner (a substep's buffers), handed out in call order.

At small N the Python cost of `wp.launch` (checking and packing some fifteen arguments per kernel)
exceeds the kernel's own. A site keeps the `wp.Launch` that `wp.launch(..., record_cmd=True)`
returns; a later call compares its arguments with the previous ones (arrays and structs by
identity, numbers by value), repacks only those that differ and replays the launch. With a tape,
the adjoint is a second Launch, the kernel with `adjoint=True` and the adjoints `wp.Tape.backward`
would pass (each array's .grad, the DeviceModel's empty adjoint, None for numbers), recorded as a
tape function. The same compiled kernels run on the same arguments as with `wp.launch`, so forward
values and gradients are bit-identical.

Lifetime: a site holds one set of arguments, so it must not be launched again while a tape that
recorded it can still run backward; its owner guarantees that (the simulator's `Segment` rule),
and a backward that finds its site relaunched raises `StaleLaunchError` instead of using the new
arguments.
"""
from typing import Dict, List, Optional, Sequence, Tuple

import warp as wp

from ..errors import StaleTapeError
from .device_model import empty_model_adjoint


class StaleLaunchError(StaleTapeError):
    """A tape ran backward through a launch whose site was launched again since it was recorded."""


def adjoint_of(arg):
    """What `wp.Tape.backward` passes as the adjoint of a kernel argument."""
    if isinstance(arg, wp.array):
        return arg.grad
    return empty_model_adjoint(arg)


def _repack(launch: wp.Launch, i: int, new, old, adjoint: bool = False) -> None:
    """Argument i of `launch` <- `new` (in place of `old`). An array of the dtype and dimension the
    site was packed with is passed as its descriptor, without wp.launch's checks (done for the first);
    the launch's record of its arguments keeps the array itself, which a graph capture on the CPU
    replays from (`set_param_at_index_from_ctype` leaves the descriptor there, and with `adjoint` in
    the forward argument's place)."""
    if type(new) is wp.array and type(old) is wp.array and new.dtype is old.dtype and new.ndim == old.ndim:
        forward = launch.fwd_args[i] if adjoint and launch.fwd_args is not None else new
        launch.set_param_at_index_from_ctype(i, new.__ctype__(), adjoint=adjoint)
        if launch.fwd_args is not None:
            launch.fwd_args[i] = forward
        if adjoint and launch.adj_args is not None:
            launch.adj_args[i] = new
    else:
        launch.set_param_at_index(i, new, adjoint=adjoint)


def _same(a, b) -> bool:
    """Whether argument a may stand for b without repacking: the same object, or equal numbers."""
    return a is b or (type(a) is type(b) and not isinstance(a, wp.array) and getattr(a, "_cls", None) is None
                      and a == b)


class CachedLaunch:
    """One launch site of `kernel` on `device` (see the module docstring)."""

    __slots__ = ("kernel", "device", "_forward", "_args", "_dim", "_launches", "_adjoint", "_adjoint_packed")

    def __init__(self, kernel, device):
        self.kernel, self.device = kernel, device
        self._forward: Optional[wp.Launch] = None
        self._args: List = []
        self._dim = None
        self._launches = 0
        self._adjoint: Optional[wp.Launch] = None
        self._adjoint_packed: List = []
        """What the adjoint launch was packed with: the dim, then each argument and its adjoint."""

    def __call__(self, dim, args: Sequence, tape: Optional[wp.Tape] = None) -> None:
        """Launch over `dim` with `args` (inputs then outputs, in the kernel's order); with `tape` (the
        active one), the adjoint is recorded on it."""
        if self._forward is None:
            self._args, self._dim = list(args), dim
            self._forward = wp.launch(self.kernel, dim, inputs=self._args, device=self.device, record_cmd=True)
        else:
            old = self._args
            for i, a in enumerate(args):
                if not _same(a, old[i]):
                    _repack(self._forward, i, a, old[i])
                    old[i] = a
            if dim != self._dim:
                self._dim = dim
                self._forward.set_dim(dim)
        self._forward.launch()
        self._launches += 1
        if tape is not None:
            recorded = self._launches

            def backward():
                if self._launches != recorded:
                    raise StaleLaunchError(f"kernel {self.kernel.key}: its launch site was launched again before "
                                           f"the backward pass of the tape that recorded it (the simulator's buffers "
                                           f"were reused: call segment.cut() only after the backward pass)")
                self._adjoint_launch().launch()

            tape.record_func(backward=backward, arrays=[])

    def _adjoint_launch(self) -> wp.Launch:
        """The adjoint launch for the current arguments, their adjoints as they are now (an array's
        .grad may be set after the forward, as `wp.Tape.backward(grads=...)` does)."""
        args, packed = self._args, self._adjoint_packed
        if self._adjoint is None:
            self._adjoint = wp.launch(self.kernel, self._dim, inputs=args, adj_inputs=[adjoint_of(a) for a in args],
                                      device=self.device, adjoint=True, record_cmd=True)
            packed[:] = [self._dim, *((a, adjoint_of(a)) for a in args)]
            return self._adjoint
        if packed[0] != self._dim:
            packed[0] = self._dim
            self._adjoint.set_dim(self._dim)
        for i, a in enumerate(args):
            was, was_adjoint = packed[i + 1]
            adj = adjoint_of(a)
            if not _same(a, was):
                _repack(self._adjoint, i, a, was)
            if adj is not was_adjoint:
                _repack(self._adjoint, i, adj, was_adjoint, adjoint=True)
            packed[i + 1] = (a, adj)
        return self._adjoint


class LaunchSites:
    """The launch sites of one owner on `device`: after `begin()`, the k-th launch of a kernel uses
    that kernel's k-th site, so an owner that repeats its sequence of launches replays them."""

    def __init__(self, device):
        self.device = device
        self._sites: Dict[Tuple[object, int], CachedLaunch] = {}
        self._count: Dict[object, int] = {}

    def begin(self) -> None:
        """Start the owner's next sequence of launches."""
        self._count.clear()

    def site(self, kernel) -> CachedLaunch:
        """The next site of `kernel` (e.g. taken at forward time for a hand-written adjoint's launch)."""
        k = self._count.get(kernel, 0)
        self._count[kernel] = k + 1
        site = self._sites.get((kernel, k))
        if site is None:
            site = self._sites[(kernel, k)] = CachedLaunch(kernel, self.device)
        return site

    def __call__(self, kernel, dim, args: Sequence, tape: Optional[wp.Tape] = None) -> None:
        """Launch `kernel` at its next site (see `CachedLaunch.__call__`)."""
        self.site(kernel)(dim, args, tape)
