"""`StepGraphs`: a simulator's steps captured once as graphs and replayed.

A graph holds every launch of one `Simulator.step` (each substep's kernels and the zeroing of its
buffers), and with gradients a second one holds the step's backward pass (the tape's adjoint
launches, hand-written adjoints included). On a GPU they are CUDA graphs: a step is one launch from
the host and asks the host nothing; on the CPU they are Warp's recorded launch streams, replayed
without Python. Same kernels, same arguments: values and gradients are bit-identical to steps
launched one kernel at a time.

A graph reads and writes fixed buffers (`CapturedStep`: input state, control, output state), so
the caller copies its inputs in and its outputs out. With gradients every position of a segment
(the k-th step since the last `segment.cut()`) has its own graphs and buffers, as it has its own
substep buffers; without gradients one step serves every call. What a graph holds by value are its
settings: dt and the number of substeps. The physics is not among them: `Simulator.vary` (domain
randomisation) overwrites the kernel model's arrays in place, which a replayed graph reads, so a
randomised run captures once. A position runs launch by launch when its settings differ from its
last run's (its first run, which allocates what its launches need, so that no capture allocates), is
captured on the second run in a row with the same settings and replayed after. Every capture
happens in `forward`, the backward graph's too (once a backward pass has run launch by launch at
that position, so that it allocated its work arrays): on a GPU a capture must not overlap torch's
work on the default stream in another thread (Warp's streams synchronise with it), and training's
updates run beside the backward pass (algo.concurrent_updates), never beside the rollout. Capturing
costs more than launching (on the CPU a 64-environment taped window that captures took 5.5x one
launched kernel by kernel, `bench_diffsim.py --graphs`), which is why settings that change every
window would run launch by launch.

A graph replays no Python, so the check that its tape is still valid is the caller's: `forward`
hands out the segment's `TapeMark` of the step, `backward(mark)` checks it before it replays or
launches anything (`StaleTapeError` once the segment was cut since: the position's buffers and
graphs serve a later step then, whose gradient the replay would return).

Bundled steps only with the bundles on the device (`bundle.on_device`, bundling.device_bundler: the
same launches on the same buffers at every substep); the host's bundler decides on the host, every
substep, which branch rows to run (ValueError). Restarted environments reach the device bundler
before a step is replayed or captured (`Simulator.prepare_step`), and its buffers, like the
segment's, are per position.
"""
from typing import Callable, List, Optional, Tuple

import warp as wp

from .kernels.device_model import Tape
from .segment import TapeMark
from .state import Control, State

Settings = Tuple[float, int]
"""(dt [s], substeps): what a step's graphs hold by value."""


def _captured(sim, launches: Callable[[], None]) -> wp.Graph:
    """The graph of what `launches()` launches on `sim`'s device (captured, not run)."""
    with wp.ScopedCapture(device=sim.model.device) as capture:
        launches()
    return capture.graph


class CapturedStep:
    """One position's fixed buffers and graphs. Copy the inputs into `state_in` (q, qd) and `control`
    (every field), call `forward(dt)` (keep the mark it returns), read `state_out`; for the backward
    pass put the output adjoints in `state_out.q.grad` and `state_out.qd.grad`, call `backward(mark)`
    and read the adjoints of `state_in` and `control`. Shapes as in `State` and `Control`.

    A step runs launch by launch when its settings differ from those of the position's last run
    (see the module docstring); the first step and backward pass at a position so allocate whatever
    their launches need (the segment's substep buffers, the solvers' backward work arrays), and no
    capture allocates (on a GPU a graph would own the memory)."""

    def __init__(self, sim):
        self.sim = sim
        grad = sim.requires_grad
        self.state_in = State.zeros(sim.model, sim.num_envs, grad)
        self.control = Control.zeros(sim.model, sim.num_envs, grad)
        self.state_out = State.zeros(sim.model, sim.num_envs, grad)
        self._captured_with: Optional[Settings] = None
        """The settings of the forward graph: what it holds by value."""
        self._last_run: Optional[Settings] = None
        """The settings of the last run, captured or not."""
        self._forward: Optional[wp.Graph] = None
        self._tape: Optional[Tape] = None
        self._backward: Optional[wp.Graph] = None
        self._backward_ran = False

    def forward(self, dt: float) -> Optional[TapeMark]:
        """Advance `state_in` into `state_out` by dt [s]: replayed, captured (the second run in a row
        with these settings) or launch by launch. Returns the step's mark for `backward` (None
        without gradients)."""
        sim = self.sim
        mark = sim.segment.mark() if sim.requires_grad else None
        sim.prepare_step()
        settings = (dt, sim.config.substeps)
        if self._forward is not None and self._captured_with == settings:
            sim.segment.advance(sim.config.substeps)
            wp.capture_launch(self._forward)
        elif self._last_run == settings:
            self._forward, self._captured_with, self._backward = _captured(sim, lambda: self._run(dt)), settings, None
            wp.capture_launch(self._forward)
        else:
            self._run(dt)
            self._forward = self._backward = None
        self._last_run = settings
        if self._forward is not None and self._backward is None and self._backward_ran:
            self._backward = _captured(sim, self._tape.backward)
        if sim.check_finite:
            sim.raise_if_nonfinite(self.state_out)
        return mark

    def backward(self, mark: TapeMark) -> None:
        """The adjoints of `state_in` and `control` from those of `state_out` (zeroed by `forward`,
        then set by the caller): the graph `forward` captured, or launch by launch. `mark`: what the
        step's `forward` returned (StaleTapeError when the segment was cut since)."""
        if self._tape is None:
            raise RuntimeError("CapturedStep.backward: the simulator was built without gradients")
        mark.check()
        if self._backward is None:
            self._tape.backward()
            self._backward_ran = True
        else:
            wp.capture_launch(self._backward)

    def _run(self, dt: float) -> None:
        """The step's launches, on a new tape with gradients (the fixed buffers' adjoints zeroed first)."""
        sim = self.sim
        if not sim.requires_grad:
            sim.launch_step(self.state_in, self.state_out, self.control, dt)
            return
        self.state_in.zero_gradients()
        self.state_out.zero_gradients()
        self.control.zero_gradients()
        self._tape = Tape()
        with self._tape:
            sim.launch_step(self.state_in, self.state_out, self.control, dt, mark_tape=False)


class StepGraphs:
    """The captured steps of `sim` (see the module docstring); the simulator builds it when asked to
    (`Simulator(..., capture_graphs=True)`) and reaches it as `sim.graphs`."""

    def __init__(self, sim):
        if sim.bundler is not None and not sim.bundler.capturable:
            raise ValueError("capture_graphs: a simulator bundling on the host cannot run as captured graphs (its "
                             "bundler decides on the host, every substep, which branch rows to run); build it with "
                             "bundle.on_device (and max_branch_rows), with capture_graphs=False or without bundling")
        self.sim = sim
        self._steps: List[CapturedStep] = []
        self._position = 0
        if sim.requires_grad:
            sim.segment.before_cut(self._rewind)

    def next_step(self) -> CapturedStep:
        """The fixed buffers and graphs of the segment's next position: set its inputs, then call its
        `forward(dt)`."""
        k = self._position
        if self.sim.requires_grad:
            self._position += 1
        if k == len(self._steps):
            self._steps.append(CapturedStep(self.sim))
        return self._steps[k]

    def _rewind(self) -> None:
        self._position = 0

