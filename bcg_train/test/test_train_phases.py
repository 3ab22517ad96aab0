"""The phase timer: off unless recording, exclusive times that add up, host syncs counted per phase,
phases of other threads kept apart."""
import threading

import numpy as np
import pytest
import torch
import warp as wp

from bcg_train.algo import phases
from bcg_train.algo.phases import PhaseTimer, count_host_syncs, count_kernel_launches, phase


@pytest.fixture
def clock(monkeypatch):
    """time.perf_counter as seen by the timer: advances only when the test says so."""
    now = [0.0]
    monkeypatch.setattr(phases.time, "perf_counter", lambda: now[0])

    def advance(seconds):
        now[0] += seconds
    return advance


def test_nothing_is_recorded_unless_a_timer_records():
    assert phase("a") is phase("b")   # the shared no-op
    with PhaseTimer() as timer:
        assert phase("a") is not phase("a")
    assert phase("a") is phase("b")
    assert timer.seconds == {"other": timer.seconds["other"]}


def test_nested_phases_are_exclusive_and_add_up(clock):
    with PhaseTimer() as timer:
        clock(1.0)                    # other
        with phase("outer"):
            clock(2.0)
            with phase("inner"):
                clock(3.0)
            clock(4.0)
            with phase("inner"):
                clock(5.0)
        clock(6.0)                    # other
    assert dict(timer.seconds) == {"outer": 6.0, "inner": 8.0, "other": 7.0}
    assert timer.calls["inner"] == 2 and timer.calls["outer"] == 1
    assert sum(timer.seconds.values()) == 21.0


def test_reset_forgets_and_restarts_open_phases(clock):
    with PhaseTimer() as timer:
        with phase("a"):
            clock(1.0)
            timer.reset()
            clock(2.0)
    assert dict(timer.seconds) == {"a": 2.0, "other": 0.0}


def test_host_syncs_are_counted_in_the_innermost_phase_and_methods_restored():
    item, numpy_method, copy = torch.Tensor.item, wp.array.numpy, wp.copy
    x, w = torch.ones(3), wp.zeros(2, dtype=float, device="cpu")
    with PhaseTimer() as timer, count_host_syncs(timer):
        with phase("outer"):
            x.sum().item()
            wp.copy(w, wp.array(np.array([1.0, 2.0], dtype=np.float32), device="cpu", copy=False))   # counted
            with phase("inner"):
                bool(x.any())
                float(x[0])
                w.numpy()
        x.tolist()
    assert dict(timer.syncs) == {"outer": 2, "inner": 3, "other": 1}
    assert torch.Tensor.item is item and wp.array.numpy is numpy_method and wp.copy is copy
    assert "__bool__" not in torch.Tensor.__dict__   # inherited again, not shadowed


@wp.kernel
def _double(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


def test_kernel_launches_are_counted_forward_replayed_and_adjoint_and_functions_restored():
    from bcg_train.diffsim.kernels.launch import CachedLaunch
    launch, replay, graph_replay = wp.launch, wp.Launch.launch, wp.capture_launch
    x, y, z = (wp.ones(4, dtype=float, device="cpu", requires_grad=True) for _ in range(3))
    with PhaseTimer() as timer, count_kernel_launches(timer):
        with phase("plain"):
            wp.launch(_double, 4, inputs=[x, y], device="cpu")
            wp.launch(_double, 4, inputs=[x, y], device="cpu", record_cmd=True)    # recorded, not launched
        tape = wp.Tape()
        with phase("cached"), tape:
            CachedLaunch(_double, "cpu")(4, [x, y], tape)
            CachedLaunch(_double, "cpu")(4, [y, z], tape)
        with phase("backward"):
            tape.backward(grads={z: wp.ones(4, dtype=float, device="cpu")})
        with wp.ScopedCapture(device="cpu") as capture:
            wp.launch(_double, 4, inputs=[x, y], device="cpu")
            wp.launch(_double, 4, inputs=[y, z], device="cpu")
        with phase("graph"):
            wp.capture_launch(capture.graph)
    assert dict(timer.launches) == {"plain": 1, "cached": 2, "backward": 2, "other": 2, "graph": 1}
    assert wp.launch is launch and wp.Launch.launch is replay and wp.capture_launch is graph_replay
    assert z.numpy().tolist() == [4.0] * 4 and x.grad.numpy().tolist() == [4.0] * 4


def test_phases_of_another_thread_are_timed_there_and_named_parallel(clock):
    with PhaseTimer() as timer:
        with phase("backward"):
            clock(1.0)

            def update():
                with phase("critic update"):
                    clock(2.0)
                    with phase("target update"):
                        clock(0.5)
            worker = threading.Thread(target=update)
            worker.start()
            worker.join()
            clock(3.0)
    assert timer.parallel == {"critic update", "target update"}
    assert timer.seconds["critic update"] == 2.0 and timer.seconds["target update"] == 0.5
    assert timer.seconds["backward"] == 6.5    # the other thread's phases overlap it, not nested in it
    assert sum(v for k, v in timer.seconds.items() if k not in timer.parallel) == 6.5
