"""`Simulator(model, num_envs, config, requires_grad)`: the differentiable G1 simulator.

`step(state_in, state_out, control, dt)` advances every environment `dt` seconds in
`config.substeps` substeps (`Substep` has the physics). Gradients: a simulator built with
`requires_grad=True` records on the simulator tape active around `step` (`with Tape():`,
`bcg_train.diffsim.Tape`, a wp.Tape; the hand-written adjoints are added to the same tape) and
raises `TapeRequiredError` when none is (a plain wp.Tape included, which would not run the
hand-written adjoints), so a step can never silently drop its gradient; the tape's backward pass
checks first that the segment was not cut since (`StaleTapeError`, diffsim.segment). What the
simulator keeps between steps (taped buffers, restarted environments, the segment's generation) is
its `segment`; bundling, when `config.bundle.enabled`, is its
`bundler` (a `bundling.Bundler`: `HostBundler`, or `DeviceBundler` with `bundle.on_device`, chosen
once, where the simulator builds it). With `capture_graphs` (with a bundler only if it is
`capturable`) its `graphs` hold the steps captured as graphs, which `torch_bridge` replays
(diffsim.step_graphs). Runs on any Warp device with the same code, in the model's precision
(`Model.precision`, which `config.precision` must match).
"""
from typing import Optional

import numpy as np
import warp as wp

from .bundling import Bundler, BundleStats, DeviceBundler, HostBundler
from .config import SimConfig
from .errors import NonFiniteStateError, TapeRequiredError
from .kernels.integrator import IntegratorKernels
from .kernels.launch import CachedLaunch
from .model import Model
from .segment import Segment
from .state import Control, State
from .step_graphs import StepGraphs
from .substep import Substep
from .tapes import plain_tape_active, recording
from .variation import PhysicsVariation


def require_same_precision(model: Model, config: SimConfig) -> None:
    """ValueError unless `model` (whose arrays fix the simulator's precision) and `config` are of one precision."""
    if model.precision != config.precision:
        raise ValueError(f"the model is {model.precision}, the configuration {config.precision}: build the model "
                         f"with Model.from_mujoco(..., precision={config.precision!r}) or simulate with "
                         f"SimConfig(precision={model.precision!r})")


class Simulator:
    """Steps N environments of one Model with one set of solver settings (see the module docstring).
    Several simulators may share a Model (e.g. a bundled one with gradients and a plain one)."""

    def __init__(self, model: Model, num_envs: int, config: Optional[SimConfig] = None, requires_grad: bool = False,
                 check_finite: bool = True, capture_graphs: bool = False):
        self.config = config if config is not None else SimConfig()
        require_same_precision(model, self.config)
        self.model = model
        self.num_envs = num_envs
        self.requires_grad = requires_grad
        self.check_finite = check_finite
        self.physics = Substep(model, self.config)
        bundled = self.config.bundle.enabled
        self.segment = Segment(self.physics, num_envs, requires_grad, substep_buffers=not bundled)
        self.bundler: Optional[Bundler] = None
        if bundled:
            bundle = self.config.bundle
            self.bundler = (DeviceBundler(self.physics, bundle, requires_grad, num_envs) if bundle.on_device else
                            HostBundler(self.physics, bundle, requires_grad, self.segment.pool))
            self.segment.before_cut(self.bundler.at_cut)
        self._flags = wp.zeros(num_envs, dtype=int, device=model.device)
        self._nonfinite = CachedLaunch(IntegratorKernels.of(model.types).nonfinite_flags, model.device)
        self.graphs = StepGraphs(self) if capture_graphs else None
        """With `capture_graphs`: the steps as captured graphs (diffsim.step_graphs), which
        `torch_bridge` replays; None otherwise."""

    def vary(self, config: SimConfig, variation: PhysicsVariation) -> None:
        """Later steps run with `config` and `variation` (see `Substep.vary`); `self.config` follows.
        ValueError while the segment holds taped steps (their backward pass would read the new
        physics): `segment.cut()` first."""
        if self.segment.taped_substeps:
            raise ValueError(f"vary: {self.segment.taped_substeps} taped substeps since the segment's last cut "
                             "would take their backward pass with the new physics; cut the segment first")
        self.physics.vary(config, variation)
        self.config = config

    def state(self) -> State:
        return State.zeros(self.model, self.num_envs, self.requires_grad)

    def control(self) -> Control:
        return Control.zeros(self.model, self.num_envs, self.requires_grad)

    @property
    def bundle_stats(self) -> Optional[BundleStats]:
        """Bundling counters, None when bundling is off; with the bundles on the device as of the last
        `segment.cut()` (or `bundler.read_stats()`, a copy from the device)."""
        return None if self.bundler is None else self.bundler.stats

    def step(self, state_in: State, state_out: State, control: Control, dt: float) -> State:
        """Advance `dt` seconds in `config.substeps` substeps; returns state_out."""
        self.launch_step(state_in, state_out, control, dt)
        if self.check_finite:
            self.raise_if_nonfinite(state_out)
        return state_out

    def launch_step(self, state_in: State, state_out: State, control: Control, dt: float,
                    mark_tape: bool = True) -> None:
        """`step`'s launches, without its check of the result (nothing read back: what a graph captures).
        With gradients and `mark_tape`, the tape's backward pass checks the segment's `TapeMark` first
        (a captured step checks the mark it hands out instead, diffsim.step_graphs: a graph replays no
        Python)."""
        tape = recording() if self.requires_grad else None
        if self.requires_grad and tape is None:
            plain = ("a plain wp.Tape is active, which would not run the simulator's own adjoints; "
                     if plain_tape_active() else "")
            raise TapeRequiredError(f"Simulator(requires_grad=True).step needs an active simulator tape: {plain}call "
                                    "it inside `with Tape():` (bcg_train.diffsim.Tape, a wp.Tape; or use "
                                    "torch_bridge.step); build the simulator with requires_grad=False to step "
                                    "without gradients")
        substeps = self.config.substeps
        h = dt / substeps
        self.prepare_step()
        src = state_in
        for k in range(substeps):
            scratch, buf, sites = self.segment.buffers()   # buf: None with gradients and a bundler
            dst = state_out if k == substeps - 1 else buf
            if self.bundler is None:
                self.physics.run(src, dst, control, h, scratch, tape)
            else:
                position = self.segment.taped_substeps - 1 if self.requires_grad else 0
                dst = self.bundler.substep(src, dst, control, h, sites, tape, position, first=k == 0)
            src = dst
        if tape is not None and mark_tape:    # recorded last, so that the backward pass checks it first
            tape.record_func(backward=self.segment.mark().check, arrays=[])

    def prepare_step(self) -> None:
        """What the next step takes from the host before its launches: the environments restarted since
        the last step, whose bundles close in its first substep (`Bundler.restart`; a captured step calls
        this before it replays)."""
        restarted = self.segment.take_restarted()
        if self.bundler is not None:
            self.bundler.restart(restarted)

    def state_dict(self) -> dict:
        """What a later step depends on besides the states (open bundles and restarts not yet
        applied), as numpy arrays and numbers; {} without bundling."""
        if self.bundler is None:
            return {}
        return {**self.bundler.state_dict(), "restarted": np.array(self.segment.pending_restarts, dtype=np.int64)}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()` (same model, settings and number of environments). An empty state
        (saved without bundling) restarts every environment: no bundle may outlive the new states."""
        if self.bundler is None:
            return
        if not state:
            self.segment.restart(np.arange(self.num_envs))
            return
        if self.bundler.loads_at_cut and self.segment.taped_substeps:
            raise ValueError(f"load_state_dict: {self.segment.taped_substeps} taped substeps since the segment's last "
                             "cut; a bundler on the device restores its branch rows for the segment's first substep: "
                             "cut the segment first")
        self.bundler.load_state_dict(state)
        self.segment.take_restarted()
        if len(state["restarted"]):
            self.segment.restart(state["restarted"])

    def nonfinite_envs(self, state: State) -> np.ndarray:
        """Indices of environments whose q or qd hold NaN/Inf (one small kernel, one copy to host)."""
        self._nonfinite(self.num_envs, [state.q, state.qd, self._flags])
        return np.flatnonzero(self._flags.numpy())

    def raise_if_nonfinite(self, state: State) -> None:
        bad = self.nonfinite_envs(state)
        if len(bad):
            raise NonFiniteStateError(bad.tolist())
