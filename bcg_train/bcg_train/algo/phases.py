"""Where an iteration's time goes: named phases, timed by the training code itself when asked to.

The training loop marks its phases with `with phase("critic update"):`. Nothing is measured unless a
`PhaseTimer` is recording (`with PhaseTimer() as timer:`, as bench/bench_train.py does); otherwise
`phase` returns one shared no-op context manager (a global read and a call, well under a
microsecond). While recording, each phase accumulates its *exclusive* wall time (the time of phases
opened inside it is subtracted, so the phases of an iteration add up to the iteration), its number
of entries, and the host synchronisations `count_host_syncs` attributes to it.

Phases entered from another thread than the one that started the timer (updates that run beside the
actor's backward pass, see `concurrent_updates`) are timed in that thread, exclusive of the phases
nested in them there, and named in `PhaseTimer.parallel`: they overlap the recording thread's
phases, so they are not part of the sum that makes up the iteration.

Host synchronisations are counted as the explicit device-to-host conversions a phase makes: torch's
`item`, `bool`, `int`, `float`, `tolist`, `numpy`, `cpu` on a tensor and Warp's `array.numpy`, and
the copies from host memory that Warp makes (`wp.copy` from a CPU array that is not pinned and not a
torch tensor's: on a GPU, CUDA waits for the stream before such a copy to the device). On a GPU each
of them waits for the device; on the CPU they cost nothing, and implicit synchronisations
(data-dependent shapes such as `nonzero` or boolean indexing) are not seen, so on the CPU the count
is a lower bound of what the same code would do on a GPU.

Warp kernel launches (`count_kernel_launches`) are counted as the launches made through
`warp.launch` and replays of recorded `warp.Launch` objects, forward and adjoint (the simulator's
cached launch sites replay), and the replays of captured graphs (`warp.capture_launch`, one each: a
graph of a simulator step is one launch from the host, diffsim.step_graphs); memsets, copies and
torch's own kernels are not counted. On a GPU
each launch costs a few microseconds of host time whatever its size, so at small batches the
launch count, not the arithmetic, sets the time of a phase.
"""
import contextlib
import threading
import time
from collections import defaultdict
from typing import Callable, Dict, Iterator, List, Optional, Set

_NO_PHASE = contextlib.nullcontext()
_recording: Optional["PhaseTimer"] = None


def phase(name: str):
    """A context manager around one phase of the loop; a shared no-op unless a PhaseTimer records."""
    return _NO_PHASE if _recording is None else _recording.span(name)


class _Span:
    __slots__ = ("timer", "name")

    def __init__(self, timer: "PhaseTimer", name: str):
        self.timer, self.name = timer, name

    def __enter__(self):
        self.timer.open(self.name)

    def __exit__(self, *exc):
        self.timer.close()


class PhaseTimer:
    """Accumulates per phase: `seconds` (exclusive wall time), `calls`, `syncs` (see the module docstring).

    Time outside every phase goes to the phase "other", so the phases add up to the wall time the
    timer recorded. `synchronize`, when given, is called at every phase boundary (e.g.
    `torch.cuda.synchronize` on a GPU, where work is asynchronous and would otherwise be billed to
    whichever phase waits for it). One timer records at a time. Each thread has its own stack of
    open phases; `parallel` names the phases entered from threads other than the recording one
    (their time overlaps the recording thread's, see the module docstring).
    """

    OUTSIDE = "other"

    def __init__(self, synchronize: Optional[Callable[[], None]] = None):
        self.synchronize = synchronize
        self.seconds: Dict[str, float] = defaultdict(float)
        self.calls: Dict[str, int] = defaultdict(int)
        self.syncs: Dict[str, int] = defaultdict(int)
        self.launches: Dict[str, int] = defaultdict(int)
        self.parallel: Set[str] = set()
        self._stacks: Dict[int, List[list]] = {}   # thread -> [name, start, seconds in phases nested in it]
        self._recording_thread = threading.get_ident()
        self._lock = threading.Lock()

    def __enter__(self) -> "PhaseTimer":
        global _recording
        if _recording is not None:
            raise RuntimeError("PhaseTimer: another timer is already recording")
        _recording = self
        self._recording_thread = threading.get_ident()
        self._stacks = {self._recording_thread: [[self.OUTSIDE, time.perf_counter(), 0.0]]}
        return self

    def __exit__(self, *exc):
        global _recording
        while self._stacks[self._recording_thread]:
            self.close()
        self._stacks = {}
        _recording = None

    def span(self, name: str) -> _Span:
        return _Span(self, name)

    def _stack(self) -> List[list]:
        """The calling thread's open phases (created empty for a thread other than the recording one)."""
        return self._stacks.setdefault(threading.get_ident(), [])

    def open(self, name: str) -> None:
        if self.synchronize is not None:
            self.synchronize()
        stack = self._stack()
        stack.append([name, time.perf_counter(), 0.0])
        if threading.get_ident() != self._recording_thread:
            with self._lock:
                self.parallel.add(name)

    def close(self) -> None:
        if self.synchronize is not None:
            self.synchronize()
        stack = self._stack()
        name, start, nested = stack.pop()
        elapsed = time.perf_counter() - start
        with self._lock:
            self.seconds[name] += elapsed - nested
            self.calls[name] += 1
        if stack:
            stack[-1][2] += elapsed

    def _innermost(self) -> str:
        """The calling thread's innermost open phase's name (OUTSIDE when none is open)."""
        stack = self._stack()
        return stack[-1][0] if stack else self.OUTSIDE

    def count_sync(self) -> None:
        """One host synchronisation in the calling thread's innermost open phase."""
        name = self._innermost()
        with self._lock:
            self.syncs[name] += 1

    def count_launch(self) -> None:
        """One Warp kernel launch in the calling thread's innermost open phase."""
        name = self._innermost()
        with self._lock:
            self.launches[name] += 1

    def reset(self) -> None:
        """Forget what was measured so far (open phases restart now, in every thread)."""
        with self._lock:
            self.seconds.clear()
            self.calls.clear()
            self.syncs.clear()
            self.launches.clear()
            self.parallel.clear()
            now = time.perf_counter()
            for stack in self._stacks.values():
                for entry in stack:
                    entry[1], entry[2] = now, 0.0


_TORCH_CONVERSIONS = ("item", "__bool__", "__int__", "__float__", "tolist", "numpy", "cpu")


@contextlib.contextmanager
def count_host_syncs(timer: PhaseTimer) -> Iterator[PhaseTimer]:
    """While open, every torch/Warp device-to-host conversion (see the module docstring) counts one
    synchronisation in `timer`'s innermost phase. Instrumentation for benchmarks: it wraps methods of
    `torch.Tensor` and `warp.array` for the duration."""
    import torch
    import warp as wp

    patched = [(owner, name, owner.__dict__.get(name), getattr(owner, name))
               for owner, names in ((torch.Tensor, _TORCH_CONVERSIONS), (wp.array, ("numpy",))) for name in names]
    copy = wp.copy

    def counting(method):
        def wrapper(*args, **kwargs):
            timer.count_sync()
            return method(*args, **kwargs)
        return wrapper

    def counting_copy(dest, src, *args, **kwargs):
        if isinstance(src, wp.array) and src.device.is_cpu and not src.pinned and getattr(src, "_tensor", None) is None:
            timer.count_sync()   # not a torch tensor's memory (wp.from_torch): on a GPU that would be the GPU's
        return copy(dest, src, *args, **kwargs)

    for owner, name, _, method in patched:
        setattr(owner, name, counting(method))
    wp.copy = counting_copy
    try:
        yield timer
    finally:
        wp.copy = copy
        for owner, name, own, _ in patched:
            if own is None:
                delattr(owner, name)
            else:
                setattr(owner, name, own)


@contextlib.contextmanager
def count_kernel_launches(timer: PhaseTimer) -> Iterator[PhaseTimer]:
    """While open, every Warp kernel launch (see the module docstring) counts one in `timer`'s
    innermost phase. Instrumentation for benchmarks: launches are intercepted as the kernel profile
    intercepts them (`diffsim.kernel_profile.intercepted_launches`) for the duration."""
    import warp as wp

    from bcg_train.diffsim.kernel_profile import intercepted_launches

    def counted(kernel, adjoint, threads, launch):
        timer.count_launch()
        return launch()

    replay = wp.capture_launch

    def counted_replay(*args, **kwargs):
        timer.count_launch()
        return replay(*args, **kwargs)

    wp.capture_launch = counted_replay
    try:
        with intercepted_launches(counted):
            yield timer
    finally:
        wp.capture_launch = replay
