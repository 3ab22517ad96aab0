"""`profile_kernels()`: where a block of simulator work spends its device time, kernel by kernel.

Instrumentation for benchmarks (`bench/bench_diffsim.py --kernels`). While the context is open,
every Warp kernel launch made through `wp.launch` or by replaying a `wp.Launch` (the simulator's
cached launch sites, forward and adjoint; `kernels.launch`) is recorded in order with its kernel,
its pass (forward or adjoint) and its number of threads. Calls that only record a launch
(`record_cmd=True`) are not launches. Memsets and copies are not kernels and are not counted.

Time per launch:
- on the CPU, the launch call's wall time: a CPU kernel runs to its end in the calling thread, so
  this is the kernel's time plus the launch's own Python and argument packing (a few microseconds);
- on CUDA, the kernel's device time from Warp's activity timing (`wp.timing_begin` with
  `wp.TIMING_KERNEL`), matched to the recorded launches in order (both are in issue order on one
  stream). Launches are not synchronised one by one, so the host keeps running ahead as it does
  unprofiled.

`KernelProfile.rows()` sums them per kernel and pass; `table()` writes them as markdown, largest
first, with each row's share of the profiled wall time, which tells a latency-bound device (kernel
time near the wall time) from a host-bound one (kernel time far below it).
"""
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Tuple

import numpy as np
import warp as wp


@dataclass
class KernelRow:
    """One kernel in one pass, summed over its launches."""

    kernel: str
    adjoint: bool
    launches: int
    seconds: float
    """Total time of its launches [s]."""
    threads: float
    """Mean threads per launch."""

    @property
    def mean_us(self) -> float:
        """Mean time per launch [us]."""
        return 1e6 * self.seconds / self.launches


@dataclass
class KernelProfile:
    """What `profile_kernels` recorded on `device`: per launch (kernel key, adjoint, threads), the
    launch times [s] once the context has closed, and the profiled wall time [s]."""

    device: str
    launches: List[Tuple[str, bool, int]] = field(default_factory=list)
    seconds: List[float] = field(default_factory=list)
    wall_s: float = float("nan")
    note: str = ""
    """Why the times are incomplete, when they are (CUDA timing records that did not match)."""

    def rows(self) -> List[KernelRow]:
        """Per (kernel, pass), largest total time first."""
        totals: Dict[Tuple[str, bool], List[float]] = {}
        for (kernel, adjoint, threads), seconds in zip(self.launches, self.seconds):
            entry = totals.setdefault((kernel, adjoint), [0, 0.0, 0])
            entry[0] += 1
            entry[1] += seconds
            entry[2] += threads
        rows = [KernelRow(k, a, n, s, t / n) for (k, a), (n, s, t) in totals.items()]
        return sorted(rows, key=lambda r: -r.seconds)

    @property
    def kernel_s(self) -> float:
        """Sum of the launch times [s]."""
        return float(np.sum(self.seconds))

    def table(self, title: str) -> str:
        """Markdown: one row per kernel and pass, then the total against the wall time."""
        lines = [f"{title} ({self.device}; {len(self.launches)} launches, kernels {1e3 * self.kernel_s:.1f} ms of "
                 f"{1e3 * self.wall_s:.1f} ms wall){' ' + self.note if self.note else ''}",
                 "| kernel | pass | launches | total ms | share of wall | us per launch | threads per launch |",
                 "|---|---|---|---|---|---|---|"]
        for r in self.rows():
            lines.append(f"| {r.kernel} | {'adjoint' if r.adjoint else 'forward'} | {r.launches} | "
                         f"{1e3 * r.seconds:.2f} | {100 * r.seconds / self.wall_s:.1f}% | {r.mean_us:.1f} | "
                         f"{r.threads:.0f} |")
        return "\n".join(lines)


@contextlib.contextmanager
def profile_kernels(device: str) -> Iterator[KernelProfile]:
    """Record every kernel launch on `device` while open (see the module docstring); the profile's
    times are filled in when the context closes."""
    profile = KernelProfile(str(wp.get_device(device)))
    cuda = wp.get_device(device).is_cuda
    wall: List[float] = []

    def record(kernel, adjoint: bool, threads: int, launch: Callable[[], Any]) -> Any:
        profile.launches.append((kernel.key, bool(adjoint), int(threads)))
        if cuda:
            return launch()
        t = time.perf_counter()
        out = launch()
        wall.append(time.perf_counter() - t)
        return out

    wp.synchronize_device(device)
    if cuda:
        wp.timing_begin(cuda_filter=wp.TIMING_KERNEL)
    start = time.perf_counter()
    try:
        with intercepted_launches(record):
            yield profile
    finally:
        wp.synchronize_device(device)
        profile.wall_s = time.perf_counter() - start
        if cuda:
            records = [r for r in wp.timing_end() if r.device is None or str(r.device) == profile.device]
            wall = [1e-3 * r.elapsed for r in records]
            if len(wall) != len(profile.launches):
                profile.note = (f"(CUDA timing gave {len(wall)} kernel records for {len(profile.launches)} launches: "
                                f"times matched in order up to the shorter)")
        n = min(len(wall), len(profile.launches))
        profile.launches, profile.seconds = profile.launches[:n], wall[:n]


@contextlib.contextmanager
def intercepted_launches(around: Callable[[Any, bool, int, Callable[[], Any]], Any]) -> Iterator[None]:
    """While open, every Warp kernel launch (through `wp.launch`, but for calls that only record one,
    `record_cmd=True`; or a replayed `wp.Launch`, forward or adjoint) is made by
    `around(kernel, adjoint, threads, launch)`, which calls `launch()` to make it and returns its
    result. Warp is restored on exit."""
    launch, replay = wp.launch, wp.Launch.launch

    def intercepted_launch(kernel, dim, *args, **kwargs):
        if kwargs.get("record_cmd"):
            return launch(kernel, dim, *args, **kwargs)
        return around(kernel, kwargs.get("adjoint", False), int(np.prod(np.atleast_1d(dim))),
                      lambda: launch(kernel, dim, *args, **kwargs))

    def intercepted_replay(self, *args, **kwargs):
        return around(self.kernel, self.adjoint, self.bounds.size, lambda: replay(self, *args, **kwargs))

    wp.launch, wp.Launch.launch = intercepted_launch, intercepted_replay
    try:
        yield
    finally:
        wp.launch, wp.Launch.launch = launch, replay
