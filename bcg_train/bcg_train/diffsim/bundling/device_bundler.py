"""`DeviceBundler`: Bundled Contact Gradients with the bookkeeping on the device (`bundle.on_device`).

The same bundles as `HostBundler` (bundling.host_bundler: events, perturbations, branch means, H-step spans,
early release, onsets, restarts, the counters), kept in S = R // B fixed slots of B rows (R =
`max_branch_rows`) and decided by kernels (bundling.slot_kernels), so a substep launches the same
kernels over the same buffers whatever lands and asks the host nothing: a bundled step can be
captured as a graph (diffsim.step_graphs) and replayed. Per substep:
1. one run of the physics over the R branch rows and the N environments (a free slot's rows copy an
   environment's state and control, slot_kernels.row_env: valid values, zero adjoints);
2. kernels over the slots, branch rows and environments (bundling.slot_kernels) read the rows' leg
   loads and decide the re-perturbed branches, which environments open a bundle in which free slots
   (when more trigger than fit, each is admitted with the same probability, a seeded draw), which
   bundles end, and the counters;
3. the perturbations of the rows it marked (seeded by `seed` and the substep counter on the device),
   and a re-run of all R branch rows from their input (the marked ones perturbed, a new bundle's from
   its environment's row), whose result the marked rows take;
4. each open slot's mean (bundling.kernels.branch_mean) becomes its environment's state; the slots that
   end are freed.
What the host bundler reads back per substep is here read at the segment's cut (`stats`, one copy).

Buffers: with gradients every position of a segment (its k-th substep since the cut) has its own
(`_Frame`: the runs' states, intermediates, controls, perturbations and indices), so the backward
pass finds what its substep used and a graph captured at that position finds them again; a substep's
branch rows come from the position before, the first position's from `home`, the rows the last
substep left (copied there after each substep, without adjoint: the segment cut the gradient there).
Without gradients one frame serves every substep.

What it pays for the fixed shapes: R + N rows run and R rows re-run at every substep, whether a bundle
is open or not, and with gradients every position of a segment holds buffers (with adjoints) for
those R + N and R rows, where the host's bundler holds them for the rows it runs. Not here:
`auto_branches`, `alpha_order`, `branch_clip` and the spread of the branch gradients
(`BundleStats.branch_rse` stays NaN); the config refuses them.
"""
import dataclasses
from typing import List, Optional, Tuple

import numpy as np
import warp as wp

from ..config import BundleConfig
from ..kernels.launch import LaunchSites
from ..state import Control, State
from ..substep import Substep
from . import slot_kernels as sk
from .base import FIELDS, SEED_STRIDE, Bundler, BundleStats, Unused, gather_control, rows_of, state_fields
from .kernels import BundlingKernels

ADMISSION_SALT = 0x2545F491
"""Mixed into the seed of the admission draw, so that it is not the perturbations' stream."""


class Decisions:
    """What one substep's bookkeeping decides (bundling.slot_kernels), int32 on `device`: for R branch
    rows, N environments and S slots."""

    def __init__(self, envs: int, rows: int, slots: int, device):
        shapes = {"loads": (rows + envs, 2), "triggered": (envs, 2), "fired": (envs,), "legs": (rows, 2),
                  "rerun": (rows,), "src": (rows,), "branch_src": (rows,), "ending": (slots,), "loaded": (slots,),
                  "free": (slots,), "env_which": (envs,), "env_src": (envs,), "chunk_count": (sk.chunks(envs),),
                  "chunk_first": (sk.chunks(envs),), "admission": (len(sk.ADMISSION),)}
        for name, shape in shapes.items():
            setattr(self, name, wp.zeros(shape, dtype=wp.int32, device=device))

    def reuse(self) -> None:
        """Zero the counts the kernels add to."""
        self.chunk_count.zero_()
        self.admission.zero_()


class _Frame:
    """The buffers of one substep position (shapes: R branch rows, N environments, S slots)."""

    def __init__(self, physics: Substep, envs: int, rows: int, slots: int, grad: bool, nominal_forward: bool):
        m, dev, real = physics.model, physics.model.device, physics.types.real
        n, r = envs, rows
        self.run_in, self.run_out = State.zeros(m, r + n, grad), State.zeros(m, r + n, grad)
        self.run_control = Control.zeros(m, r + n, grad)
        self.run_scratch = physics.scratch(r + n, grad)
        self.rerun_in, self.rerun_out = State.zeros(m, r, grad), State.zeros(m, r, grad)
        self.rerun_control = Control.zeros(m, r, grad)
        self.rerun_scratch = physics.scratch(r, grad)
        self.branch_out = State.zeros(m, r, grad)
        """The branch rows after this substep (R rows): the next substep's input."""
        self.mean = State.zeros(m, slots, grad)
        self.q_sum = wp.zeros((slots, m.nq), dtype=real, device=dev, requires_grad=grad)
        self.offset = State.zeros(m, n) if nominal_forward else None
        self.env_out = State.zeros(m, n, grad)
        """The environments after this substep when it is not the step's last (with gradients)."""
        self.nominal = rows_of(self.run_out, r, r + n)
        """The environments' rows of the run: their plain substep."""
        self.dq = wp.zeros((r, m.nv), dtype=real, device=dev)
        self.dqd = wp.zeros((r, m.nv), dtype=real, device=dev)
        self.env_of_row = wp.zeros(r + n, dtype=wp.int32, device=dev)
        self.run_which = wp.zeros(r + n, dtype=wp.int32, device=dev)
        self.run_src = wp.zeros(r + n, dtype=wp.int32, device=dev)
        self.rerun_env = wp.zeros(r, dtype=wp.int32, device=dev)
        self.d = Decisions(envs, rows, slots, dev)
        self._grads = [self.run_in, self.run_out, self.run_control, self.rerun_in, self.rerun_out,
                       self.rerun_control, self.branch_out, self.mean, self.env_out]

    def reuse(self, grad: bool) -> None:
        """Zero what this substep accumulates into, and with `grad` every adjoint (launches only: a
        graph captures them)."""
        self.d.reuse()
        self.run_scratch.reuse(self.run_scratch.capacity)
        self.rerun_scratch.reuse(self.rerun_scratch.capacity)
        for a in (self.mean.q, self.mean.qd, self.mean.contact_impulse, self.mean.contact_height, self.q_sum,
                  self.dq, self.dqd):
            a.zero_()
        if grad:
            for s in self._grads:
                s.zero_gradients()
            self.q_sum.grad.zero_()


class DeviceBundler(Bundler):
    """The open bundles of one simulator, on its device (see the module docstring); the simulator builds
    it for `bundle.on_device`."""

    capturable = True
    loads_at_cut = True

    def __init__(self, physics: Substep, cfg: BundleConfig, requires_grad: bool, num_envs: int):
        self.physics, self.cfg, self.requires_grad, self.num_envs = physics, cfg, requires_grad, num_envs
        self.kernels, self.real = BundlingKernels.of(physics.types), physics.types.real
        """The bundling kernels and the float type of the simulator's precision."""
        m, dev = physics.model, physics.model.device
        b, r = cfg.branches, cfg.max_branch_rows
        self.branches, self.rows, self.slots = b, r, r // b
        self._span = cfg.span_steps * physics.config.substeps
        self._sigma_p, self._sigma_v, self._sigma_v_per_speed = cfg.perturbation_scales(physics.config.kappa)
        self._seed = (cfg.seed * SEED_STRIDE) & 0x7FFFFFFF
        ints = {"slot_env": (self.slots,), "slot_left": (self.slots,), "slot_opened": (self.slots,),
                "env_slot": (num_envs,), "flags": (r, 2), "unloaded": (num_envs, 2), "restart": (num_envs,),
                "key": (1,), "clamped": (1,)}
        self._ints = {name: wp.zeros(shape, dtype=wp.int32, device=dev) for name, shape in ints.items()}
        self._counters = wp.zeros(len(sk.COUNTERS), dtype=wp.int64, device=dev)
        self._approach = wp.zeros(2, dtype=wp.float64, device=dev)
        self._first = wp.array(np.arange(self.slots, dtype=np.int32) * b, dtype=wp.int32, device=dev)
        self._count = wp.full(self.slots, b, dtype=wp.int32, device=dev)
        self._unused = Unused(dev, physics.types)
        self._no_rows = wp.zeros(0, dtype=wp.int32, device=dev)
        self.home = State.zeros(m, r, requires_grad)
        """The branch rows the last substep left (R rows), where the first position reads them."""
        self._frames: List[_Frame] = []
        self.stats = BundleStats(branches=b)
        """The counters as read at the last segment cut (`read_stats`)."""
        self.recorded: Optional[List[Tuple[np.ndarray, np.ndarray]]] = None
        """When a list: every substep with re-run rows appends their perturbations (dq, dqd), (rows, nv)
        each, in the host bundler's row order (the re-perturbed branches by bundle age, then the new
        bundles by environment), which `HostBundler.replay` reads: the two bundlers then compute the same
        bundles (tests). A copy to the host per substep."""
        self.reset()

    # -- state ---------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Close every bundle and zero the counters and the noise stream."""
        for name, a in self._ints.items():
            a.fill_(-1 if name in ("slot_env", "env_slot") else 1 if name == "unloaded" else 0)
        self._counters.zero_()
        self._approach.zero_()
        for a in state_fields(self.home):
            a.zero_()
        self.stats = BundleStats(branches=self.branches)

    @property
    def clamped_perturbations(self) -> int:
        """Leg perturbations a joint clamp cut (see `HostBundler.clamped_perturbations`); a host sync."""
        return int(self._ints["clamped"].numpy()[0])

    def at_cut(self) -> None:
        self.read_stats()

    def read_stats(self) -> None:
        """stats <- the device's counters and the mean approach speed of the feet perturbed since the
        last reading (one copy each; `at_cut`, at every segment cut)."""
        self._read_counters()
        speed_sum, legs = self._approach.numpy()
        if legs:
            self.stats.approach_speed = float(speed_sum / legs)
            self._approach.zero_()

    def _read_counters(self) -> None:
        for name, value in zip(sk.COUNTERS, self._counters.numpy()):
            setattr(self.stats, name, int(value))

    def state_dict(self) -> dict:
        """Slots, flags, counters, the noise stream's position and the branch rows (numpy arrays)."""
        self._read_counters()
        return {"on_device": True, "branches": self.branches, "max_branch_rows": self.rows,
                **{k: a.numpy().copy() for k, a in self._ints.items()},
                "counters": self._counters.numpy().copy(), "stats": dataclasses.asdict(self.stats),
                "branch": {k: a.numpy().copy() for k, a in zip(FIELDS, state_fields(self.home))}}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()` of a device bundler of the same B, R and number of environments;
        ValueError (nothing restored) for a host bundler's state or another shape. The next substep reads
        the restored branch rows: restore at a segment's cut (the simulator checks)."""
        if not state.get("on_device"):
            raise ValueError("bundle.on_device: this state was saved by the host's bundler (bundle.on_device "
                             "false); resume with the settings it was saved with")
        for name, mine in (("branches", self.branches), ("max_branch_rows", self.rows)):
            if int(state[name]) != mine:
                raise ValueError(f"bundle.{name}: the state was saved with {int(state[name])}, this bundler has "
                                 f"{mine}; resume with the settings it was saved with")
        for k, a in self._ints.items():
            if tuple(np.shape(state[k])) != tuple(a.shape):
                raise ValueError(f"bundle.on_device: the state's {k} has shape {np.shape(state[k])}, this "
                                 f"bundler's {a.shape} (another max_branch_rows, branches or number of environments)")
        for k, a in self._ints.items():
            a.assign(np.asarray(state[k], dtype=np.int32))
        self._counters.assign(np.asarray(state["counters"], dtype=np.int64))
        for k, a in zip(FIELDS, state_fields(self.home)):
            a.assign(np.asarray(state["branch"][k]))
        self.stats = BundleStats(**{**dataclasses.asdict(BundleStats(branches=self.branches)), **state["stats"]})

    def restart(self, env_ids: List[int]) -> None:
        """The bundles of `env_ids` close at the next step's first substep (a copy to the device, when
        any; call it before a step, not while one is being captured)."""
        if env_ids:     # the mask is all zero: the first substep of every step consumes it
            mask = np.zeros(self.num_envs, dtype=np.int32)
            mask[np.asarray(env_ids, dtype=int)] = 1
            self._ints["restart"].assign(mask)

    # -- the substep ---------------------------------------------------------------------------------
    def substep(self, s_in: State, s_out: Optional[State], control: Control, h: float, sites: LaunchSites,
                tape: Optional[wp.Tape], position: int, first: bool) -> State:
        """One bundled substep of h [s] from s_in (N rows) at the segment's `position` (0 without
        gradients), into s_out or, when None (with gradients only), the position's own state, which it
        returns; `first`: the step's first substep (restarted environments' bundles close before it)."""
        bk, real = self.kernels, self.real
        cfg, ints, r, n = self.cfg, self._ints, self.rows, self.num_envs
        mdl = self.physics.kernel_model
        f = self._frame(position)
        branch_in = self._frames[position - 1].branch_out if position > 0 and self.requires_grad else self.home
        s_out = f.env_out if s_out is None else s_out
        if first:
            sites(sk.close_restarted, n, [ints["restart"], ints["slot_env"], ints["env_slot"], ints["unloaded"]])
        sites(sk.run_rows, r + n, [ints["slot_env"], self.branches, r, n, f.env_of_row, f.run_which, f.run_src])
        sites(bk.select_rows, (r + n, self.physics.model.nq), [
            f.run_which, f.run_src, 0, 0, *state_fields(branch_in), *state_fields(s_in), *state_fields(s_in),
            *state_fields(f.run_in)], tape)
        gather_control(sites, bk, f.env_of_row, control, f.run_control, tape)
        self.physics.run(f.run_in, f.run_out, f.run_control, h, f.run_scratch, tape)
        d = f.d
        sites(bk.leg_loads, (r + n, 2), [mdl, f.run_out.contact_impulse, real(cfg.threshold * h),
                                         real(cfg.onset_fraction * cfg.threshold * h), d.loads])
        self.decide(sites, d)
        sc = f.run_scratch
        sites(bk.foot_perturbation, (r, 2), [
            mdl, f.run_in.q, sc.xrot, sc.xpos, sc.s_ang, sc.s_lin, sc.vel_ang, sc.vel_lin, d.src, d.legs, self._seed,
            ints["key"], real(self._sigma_p), real(self._sigma_v), real(self._sigma_v_per_speed), real(cfg.damping),
            real(cfg.max_dq), real(cfg.max_dqd), f.dq, f.dqd, ints["clamped"], self._approach, 0, *self._unused.noise])
        if self.recorded is not None:
            self._record(f)
        sites(bk.perturbed_rows, (r, self.physics.model.nq), [f.run_in.q, f.run_in.qd, d.src, 0, f.dq, f.dqd,
                                                             f.rerun_in.q, f.rerun_in.qd], tape)
        sites(sk.slot_rows, r, [ints["slot_env"], self.branches, r, n, f.rerun_env])
        gather_control(sites, bk, f.rerun_env, control, f.rerun_control, tape)
        self.physics.run(f.rerun_in, f.rerun_out, f.rerun_control, h, f.rerun_scratch, tape)
        sites(bk.select_rows, (r, self.physics.model.nq), [
            d.rerun, d.branch_src, 0, 0, *state_fields(f.run_out), *state_fields(f.rerun_out),
            *state_fields(f.rerun_out), *state_fields(f.branch_out)], tape)
        sites(bk.branch_mean, self.slots, [
            self._first, self._count, *state_fields(f.branch_out), 0, self._unused.probe, f.q_sum,
            *state_fields(f.mean)], tape)
        nominal = f.nominal
        offset = f.offset if f.offset is not None else f.mean
        if f.offset is not None:
            sites(bk.nominal_offset, (n, self.physics.model.nq), [ints["env_slot"], *state_fields(nominal),
                                                                    *state_fields(f.mean), *state_fields(f.offset)])
        sites(bk.select_rows, (n, self.physics.model.nq), [
            d.env_which, d.env_src, 0, int(f.offset is not None), *state_fields(nominal), *state_fields(f.mean),
            *state_fields(offset), *state_fields(s_out)], tape)
        sites(sk.close_ending, self.slots, [d.ending, ints["slot_env"], ints["env_slot"]])
        sites(bk.select_rows, (r, self.physics.model.nq), [
            self._no_rows, self._no_rows, r, 0, *state_fields(f.branch_out), *state_fields(f.branch_out),
            *state_fields(f.branch_out), *state_fields(self.home)])
        return s_out

    def decide(self, sites: LaunchSites, d: Decisions) -> None:
        """The substep's bookkeeping from the leg loads in `d` (bundling.slot_kernels, in its order): the
        slots, flags, onsets and counters move on, `d` holds the rows to re-run and the selections."""
        cfg, ints, b, n = self.cfg, self._ints, self.branches, self.num_envs
        onset = int(cfg.onset_fraction > 0)
        slot_env, counters = ints["slot_env"], self._counters
        sites(sk.slot_start, self.slots, [slot_env, d.ending, d.loaded, d.admission])
        sites(sk.branch_events, self.rows, [d.loads, b, slot_env, ints["flags"], d.loaded, counters, d.rerun, d.legs,
                                            d.src, d.branch_src])
        sites(sk.env_events, n, [d.loads, self.rows, onset, ints["env_slot"], ints["unloaded"], d.triggered, d.fired,
                                 d.chunk_count])
        sites(sk.admission_draw, 1, [self._seed ^ ADMISSION_SALT, n, ints["key"], d.chunk_count, d.chunk_first,
                                     d.admission, counters])
        sites(sk.free_slots, self.slots, [slot_env, d.free])
        sites(sk.open_bundles, n, [
            b, self._span, onset, d.fired, d.triggered, d.chunk_first, d.admission, d.free, slot_env,
            ints["slot_left"], ints["slot_opened"], ints["env_slot"], ints["flags"], ints["unloaded"], counters,
            d.rerun, d.legs, d.src, d.branch_src, d.env_which, d.env_src])
        sites(sk.count_down, self.slots, [int(cfg.end_when_released), d.admission, slot_env, ints["slot_left"],
                                          ints["slot_opened"], d.loaded, d.ending, counters])

    def _frame(self, position: int) -> _Frame:
        """The buffers of `position`, made at its first substep, zeroed for reuse."""
        if position == len(self._frames):
            self._frames.append(_Frame(self.physics, self.num_envs, self.rows, self.slots, self.requires_grad,
                                       self.cfg.experimental.nominal_forward))
        f = self._frames[position]
        f.reuse(self.requires_grad)
        if position == 0 and self.requires_grad:
            self.home.zero_gradients()
        return f

    def _record(self, f: _Frame) -> None:
        """Append this substep's perturbations of the re-run rows, in the host bundler's order."""
        rerun = np.flatnonzero(f.d.rerun.numpy())
        if not len(rerun):
            return
        slot_env, opened = self._ints["slot_env"].numpy(), self._ints["slot_opened"].numpy()
        slot = rerun // self.branches
        order = rerun[np.lexsort((rerun, slot_env[slot], opened[slot]))]
        self.recorded.append((f.dq.numpy()[order].copy(), f.dqd.numpy()[order].copy()))
