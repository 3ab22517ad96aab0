"""`collector_for_training()`: Python's cyclic garbage collector, set for a training run.

A training iteration allocates and frees a great many small Python objects (Warp arrays and launch
arguments, torch tensors, tape records) among a large set of objects that live for the whole run
(model, environments, networks, the simulator's buffers). With Python's defaults the collector runs
after every 700 net allocations and its older generations rescan the long-lived objects each time:
about a tenth of a cpu-small SHAC + BCG iteration on this 2-core machine (2026-12-06,
`bench/bench_train.py --variants shac`: 1,647 ms per iteration with the defaults, 1,457 ms with the
collector off, 1,466-1,482 ms as set here, the same peak memory). What it collects and when has no
effect on any computed number.
"""
import contextlib
import gc
from typing import Iterator

YOUNG_THRESHOLD = 10_000
"""Net allocations between collections of the youngest generation while training (Python's default: 700)."""


@contextlib.contextmanager
def collector_for_training(young_threshold: int = YOUNG_THRESHOLD) -> Iterator[None]:
    """While open: the objects that exist now (alive for the whole run) are moved out of the
    collector's scans (`gc.freeze`, after a full collection), and the youngest generation is collected
    after `young_threshold` net allocations. The thresholds and the frozen set are restored on exit."""
    old = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(young_threshold, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
