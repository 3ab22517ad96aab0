"""`HostBundler`: Bundled Contact Gradients (docs/method.md, "Bundling") inside the simulator's substep,
with the open bundles kept on the host.

A *bundle* is what an environment's contact event opens: B perturbed branches of that environment,
advanced together for H control steps, whose mean the environment follows. Per substep, with the
open bundles tracked per environment:
1. every environment takes its plain ("nominal") substep and the branches of the open bundles (B per
   bundle) take theirs, each under its environment's control, in one run of the physics (the
   branches' rows, then the environments'): one launch per kernel, whose cost on a GPU is its
   latency more than its rows;
2. events: an environment without a bundle whose foot sphere's normal impulse exceeds threshold x h
   opens one (with `onset_fraction` f > 0, only if that leg's spheres were all below f x threshold x h
   in the substep before: a contact's onset); a branch whose other leg now exceeds it gets that leg
   perturbed. Either way the substep is re-run, for just those rows, from its input state plus a
   constant perturbation of the contacting leg (foot moved by dp ~ N(0, sigma_p^2), dv ~ N(0,
   sigma_v^2), or with `experimental.auto_sigma` sizes that follow the contact's stiffness and the foot's approach
   speed, through the damped pseudo-inverse of the analytic foot Jacobian, clamped), so the
   contact event itself is bundled;
3. an environment in a bundle gets the mean of its branches (sign-aligned, renormalised base
   quaternion) as its state, differentiably: the sensitivity after the bundle is the branch mean
   of the branch sensitivities. The nominal-forward ablation keeps the nominal value and takes only
   the gradient from the branches;
4. a bundle lasts H control steps (H x substeps substeps, counted from its triggering substep);
   then its branches are dropped and the environment continues from the mean. With
   `end_when_released` it ends earlier, at the first later substep in which none of its branches has
   a foot sphere above the threshold: only the impact is bundled.

Each bundle keeps the B it was opened with. With gradients, the backward pass also measures how
much each new bundle's branches disagree (a kernel recorded on the tape reads the adjoints of the
branches' entry states as they are complete), and at the segment's cut (`measure_spread`) the
bundler turns it into the relative standard error of a bundle's mean gradient
(`stats.branch_rse`); with `auto_branches` the bundles opened next get the B that moves it halfway
(in log B) towards `branch_rse_target`. With `branch_clip`, the same pass first scales down each
branch's entry adjoint to at most branch_clip times its bundle's median: in measured G1 bundles one
branch often carries most of the gradient (a robust mean; off by default). With `alpha_order` the
same pass then mixes in the zero-order estimate along the directions the bundle's noise spans
(bk.alpha_order_mix), with the weight alpha = v0 / (v0 + v1) from the two estimates' variances pooled
over the bundles of a segment, averaged over the segments before (`alpha_memory`; 1 until measured):
each branch row carries a probe (a weight of one in the branch mean, moved with its row), whose
adjoint is that branch's own share of the loss; the perturbation kernel keeps each new branch's
draws and its leg's unit response.

Branches exist only for environments in a bundle, so memory and compute grow with the number of
triggered environments, not with N x B; `max_branch_rows` bounds them. Bundle bookkeeping is on the
host: one small copy to the host per substep (the leg events of the environments and of the branches
together), and one per segment for the spread; the counter of clamped perturbations stays on the
device (`clamped_perturbations` reads it). The states, perturbations and means are Warp kernels on
the simulator's device. The bundler runs substeps only through the
`Substep` seam it is given.
"""
import dataclasses
from typing import Iterator, List, Optional, Tuple

import numpy as np
import warp as wp

from ..config import BundleConfig
from ..kernels.launch import CachedLaunch, LaunchSites
from ..pool import BufferPool
from ..state import Control, State
from ..substep import Scratch, Substep
from .base import FIELDS, SEED_STRIDE, Bundler, BundleStats, Unused, gather_control, rows_of, state_fields
from .kernels import NOISE_PER_ROW, BundlingKernels


class HostBundler(Bundler):
    """The open bundles of one simulator, kept on the host (see the module docstring; the simulator
    builds it when bundling is enabled without `bundle.on_device`), running substeps through `physics`.
    Every buffer it fills comes from `pool` (the segment's), and every kernel it launches goes through
    the launch sites of the substep it is in (see diffsim.segment)."""

    def __init__(self, physics: Substep, cfg: BundleConfig, requires_grad: bool, pool: BufferPool):
        self.physics, self.cfg, self.requires_grad, self.pool = physics, cfg, requires_grad, pool
        self.kernels, self.real = BundlingKernels.of(physics.types), physics.types.real
        """The bundling kernels and the float type of the simulator's precision."""
        bk = self.kernels
        self._sites: Optional[LaunchSites] = None   # the current substep's
        self.model = physics.model
        self._substeps_per_bundle = cfg.span_steps * physics.config.substeps
        self.stats = BundleStats(branches=cfg.branches)
        self._clamped = wp.zeros(1, dtype=wp.int32, device=physics.model.device)
        self._sums = wp.zeros(8, dtype=wp.float64, device=physics.model.device)
        """On the device until `measure_spread` reads them: the branch-gradient spread sums (0-3,
        bk.branch_gradient_spread), the approach speeds of the perturbed feet (4: sum [m/s], 5: count)
        and the variances of the zero- and first-order estimates of the bundles mixed (6, 7;
        bk.alpha_order_mix)."""
        self._probing = cfg.experimental.alpha_order and requires_grad
        """Branch probes (bk.branch_mean) are kept, and new bundles' noise, for the alpha-order mix."""
        device = physics.model.device
        self._unused = Unused(device, physics.types)
        self._mix_launch = CachedLaunch(bk.alpha_order_mix, device)
        self._spread, self._approach = self._sums[:4], self._sums[4:]
        self._sigma_p, self._sigma_v, self._sigma_v_per_speed = cfg.perturbation_scales(physics.config.kappa)
        self._spread_launch = CachedLaunch(bk.branch_gradient_spread, physics.model.device)
        self._clip_launch = CachedLaunch(bk.clip_branch_adjoints, physics.model.device)
        self._events = 0
        self._alpha = 1.0       # the weight of the first order; first-order only until both are measured
        self.recorded: Optional[List[Tuple[np.ndarray, np.ndarray]]] = None
        """When a list: every perturbation (dq, dqd), (rows, nv) each, is appended in order."""
        self.replay: Optional[Iterator[Tuple[np.ndarray, np.ndarray]]] = None
        """When set: perturbations are taken from it instead of sampled (e.g. a recorded list, to compare
        bundled gradients with finite differences of the same bundled map)."""
        self._clear()

    def _clear(self) -> None:
        self.bundle_env: List[int] = []        # environment of each open bundle, in branch-row order
        self.counts = np.zeros(0, dtype=int)   # branches per bundle
        self.left = np.zeros(0, dtype=int)     # substeps left per bundle
        self._spread_recorded = False          # a bundle opened on a tape since the last measure_spread
        self.flags = np.zeros((0, 2), dtype=np.int32)   # (M, 2) legs already perturbed per branch
        self.branch_in = None                  # State of the branches (M rows) entering the next substep
        self.branch_probe = None               # (M,) their probes (ones) when `_probing`
        self.unloaded: Optional[np.ndarray] = None    # (N, 2) bool: legs below the onset level last substep
        self._closing: List[int] = []          # environments whose bundles close at the next step's first substep

    @property
    def clamped_perturbations(self) -> int:
        """Leg perturbations in which a joint clamp (max_dq, max_dqd) cut the mapped foot motion, since
        the simulator was built (or `reset`). Counted on the device; reading it is a host sync."""
        return int(self._clamped.numpy()[0])

    def reset(self) -> None:
        """Close every bundle and zero the counters and the noise stream: the simulator then bundles
        exactly as a new one."""
        self._clear()
        self.stats = BundleStats(branches=self.cfg.branches)
        self._clamped.zero_()
        self._sums.zero_()
        self._events = 0
        self._alpha = 1.0

    def state_dict(self) -> dict:
        """Open bundles, branch states, counters and the noise stream position (numpy arrays, numbers)."""
        bi = self.branch_in
        return {"bundle_env": np.array(self.bundle_env, dtype=np.int64), "counts": self.counts.copy(),
                "left": self.left.copy(), "flags": self.flags.copy(),
                "unloaded": None if self.unloaded is None else self.unloaded.copy(),
                "events": self._events, "stats": dataclasses.asdict(self.stats),
                "clamped_perturbations": self.clamped_perturbations,
                "branch": {} if bi is None else {k: v.numpy().copy() for k, v in zip(FIELDS, state_fields(bi))}}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()` (same model and number of environments). ValueError, with nothing
        restored, when the B its bundles open with does not fit `max_branch_rows` (no bundle could open),
        or for a device bundler's state (`bundle.on_device`)."""
        real = self.real
        if state.get("on_device"):
            raise ValueError("bundle.on_device: this state was saved by a bundler on the device (bundle.on_device "
                             "true); resume with the settings it was saved with")
        branches, cap = int(state["stats"].get("branches", self.cfg.branches)), self.cfg.max_branch_rows
        if cap and branches > cap:
            raise ValueError(f"bundle.max_branch_rows={cap} cannot hold one bundle of the {branches} branches this "
                             f"state's bundles open with: give at least {branches}, or 0 (unbounded)")
        self.bundle_env = [int(e) for e in np.asarray(state["bundle_env"])]
        self.counts = np.asarray(state.get("counts", np.full(len(self.bundle_env), self.cfg.branches)), dtype=int)
        self.left = np.asarray(state["left"], dtype=int).copy()
        self.flags = np.asarray(state["flags"], dtype=np.int32).reshape(-1, 2).copy()
        unloaded = state.get("unloaded")                    # older checkpoints: none
        self.unloaded = None if unloaded is None else np.asarray(unloaded, dtype=bool).copy()
        self._events = int(state["events"])
        stats = dict(state["stats"])
        clamped = stats.pop("clamped_perturbations", state.get("clamped_perturbations", 0))  # older checkpoints
        self.stats = BundleStats(**{"branches": self.cfg.branches, **stats})
        self._alpha = self.stats.alpha if np.isfinite(self.stats.alpha) else 1.0
        self._clamped.fill_(int(clamped))
        self._spread_recorded = False
        self._sums.zero_()
        self.branch_in = self.branch_probe = None
        if state["branch"]:
            rows = int(self.counts.sum())
            self.branch_in = State.zeros(self.model, rows, self.requires_grad)
            for name, arr in zip(FIELDS, state_fields(self.branch_in)):
                arr.assign(np.asarray(state["branch"][name]))
            if self._probing:
                self.branch_probe = wp.ones(rows, dtype=real, device=self.model.device, requires_grad=True)

    def restart(self, env_ids: List[int]) -> None:
        self._closing = list(env_ids)

    def at_cut(self) -> None:
        self.measure_spread()

    def _close(self, env_ids: List[int], tape: Optional[wp.Tape]) -> None:
        """Close the bundles of `env_ids` now, dropping their branch rows (recorded on `tape`, the
        active one when the rows carry gradients: at the substep that follows a restart, so the other
        bundles keep their gradients)."""
        closing = set(env_ids)
        if self.unloaded is not None:
            self.unloaded[list(closing)] = True
        keep = [w for w, e in enumerate(self.bundle_env) if e not in closing]
        if len(keep) != len(self.bundle_env):
            self._keep_bundles(np.array(keep, dtype=int), tape)

    # -- the substep ---------------------------------------------------------------------------------
    def substep(self, s_in: State, s_out: Optional[State], control: Control, h: float, sites: LaunchSites,
                tape: Optional[wp.Tape], position: int, first: bool) -> State:
        """`Bundler.substep` (`position` unused: every buffer comes from the pool, s_out too when None).
        The open bundles' branches and the environments take their plain substep in one run (the
        branches' rows first), so a substep launches the physics once, and a second time only when an
        event re-runs rows."""
        self._sites, pool = sites, self.pool
        if first and self._closing:
            self._close(self._closing, tape)
            self._closing = []
        if s_out is None:
            s_out = pool.state(s_in.q.shape[0])
        cfg, b = self.cfg, self.stats.branches
        n = s_in.q.shape[0]
        m0 = int(self.counts.sum())
        if m0:
            run_in = pool.state(m0 + n)
            self._select(None, None, self.branch_in, s_in, run_in, tape)
            run_control = self._gather_control(control, np.r_[np.repeat(self.bundle_env, self.counts), np.arange(n)],
                                               tape)
        else:
            run_in, run_control = s_in, control
        run_out, sc = pool.state(m0 + n), pool.scratch(m0 + n)
        self.physics.run(run_in, run_out, run_control, h, sc, tape)
        nominal = rows_of(run_out, m0, m0 + n)
        b_out = rows_of(run_out, 0, m0) if m0 else None
        loads = self._leg_loads(run_out.contact_impulse, cfg.threshold * h, cfg.onset_fraction * cfg.threshold * h)
        above = (loads == 2).astype(np.int32)
        in_bundle = np.zeros((n, 1), dtype=bool)
        in_bundle[self.bundle_env] = True
        onset = above[m0:]
        if cfg.onset_fraction > 0:
            if self.unloaded is not None:
                onset = np.where(self.unloaded, onset, 0)
            self.unloaded = loads[m0:] == 0
        env_ev = np.where(in_bundle, 0, onset)
        br_ev = np.where(self.flags == 0, above[:m0], 0)
        triggered = np.flatnonzero(env_ev.any(axis=1))
        new_envs = self._admit(triggered, m0, b, n)
        if cfg.onset_fraction > 0 and len(new_envs) < len(triggered):     # a refused onset stays pending
            refused = np.setdiff1d(triggered, new_envs)
            self.unloaded[refused] |= env_ev[refused] > 0
        released = np.zeros(len(self.bundle_env) + len(new_envs), dtype=bool)   # bundles opened now: never
        if cfg.end_when_released and m0:
            released[:len(self.bundle_env)] = np.add.reduceat(above[:m0].any(axis=1), self._first_rows()) == 0
        rerun = np.flatnonzero(br_ev.any(axis=1))

        new_src = np.repeat(new_envs, b)
        b_final, p_final = b_out, self.branch_probe
        if len(rerun) or len(new_src):
            r_out, r_probe = self._rerun(run_in, sc, m0, new_src, env_ev[new_src], rerun, br_ev[rerun], control, h,
                                         tape)
            m1 = m0 + len(new_src)
            which = np.zeros(m1, dtype=np.int32)
            src = np.arange(m1, dtype=np.int32)
            which[rerun] = 1
            src[rerun] = np.arange(len(rerun))
            which[m0:] = 1
            src[m0:] = len(rerun) + np.arange(len(new_src))
            b_final, p_final = self._take(which, src, (b_out, self.branch_probe) if m0 else (r_out, r_probe),
                                          (r_out, r_probe), tape)
        self.flags = np.concatenate([self.flags | br_ev, env_ev[new_src]]).astype(np.int32)
        self.bundle_env = self.bundle_env + [int(e) for e in new_envs]
        self.counts = np.concatenate([self.counts, np.full(len(new_envs), b)])
        self.left = np.concatenate([self.left, np.full(len(new_envs), self._substeps_per_bundle)])
        self._set_branches(b_final, p_final, run_out if b_final is b_out else None)
        self._assemble(nominal, s_out, n, tape)

        st = self.stats
        st.env_substeps += n
        st.bundled_env_substeps += len(self.bundle_env)
        st.branch_substeps += m0 + len(rerun) + len(new_src)
        st.bundles += len(new_envs)
        st.reperturbations += int(br_ev.sum())
        self.left = self.left - 1
        st.released += int((released & (self.left > 0)).sum())
        ending = (self.left <= 0) | released
        if ending.any():
            self._keep_bundles(np.flatnonzero(~ending), tape)
        return s_out

    def _admit(self, triggered: np.ndarray, rows: int, b: int, n: int) -> np.ndarray:
        """The environments among `triggered` (sorted indices < n, the environments' count) that open a
        bundle of `b` branches this substep, sorted, with `rows` branch rows open: all of them, or with
        `max_branch_rows` as many as fit, drawn uniformly without replacement (seeded by `seed` and the
        substeps simulated so far, so a resumed run draws the same); the others count in
        `stats.skipped_events`."""
        cap = self.cfg.max_branch_rows
        fit = max((cap - rows) // b, 0) if cap else len(triggered)
        if len(triggered) <= fit:
            return triggered
        draw = np.random.default_rng([self.cfg.seed % 2**32, self.stats.env_substeps // n])
        self.stats.skipped_events += len(triggered) - fit
        return np.sort(draw.choice(triggered, fit, replace=False))

    def _rerun(self, run_in: State, sc: Scratch, env_row: int, new_src, new_legs, rerun, rerun_legs, control, h,
               tape) -> Tuple[State, Optional[wp.array]]:
        """Re-run this substep for the re-perturbed branches `rerun` (rows first) and the new bundles'
        branches (of environments `new_src`), from their rows in the substep's run (input `run_in`,
        intermediates `sc`: the branches' rows, then the environments' from row `env_row`); their
        states and (when `_probing`) probes: the re-run branches keep theirs, the new ones get fresh
        ones, whose adjoints the alpha-order mix reads."""
        bk, real = self.kernels, self.real
        m, cfg, pool, sites = self.model, self.cfg, self.pool, self._sites
        r = len(rerun) + len(new_src)
        b = self.stats.branches
        dq = pool.array(r, (m.nv,), real, zero=True)
        dqd = pool.array(r, (m.nv,), real, zero=True)
        mixing = self._probing and tape is not None and len(new_src) and b >= 2
        if mixing and self.replay is not None:
            raise ValueError("bundle.experimental.alpha_order needs sampled perturbations, not replayed ones")
        noise, response, scales = ((pool.array(r, (NOISE_PER_ROW,), real, zero=True),
                                    pool.array(r, (m.nv, 3), real, zero=True), pool.array(r, (4,), real, zero=True))
                                   if mixing else self._unused.noise)
        parts = [(pool.ints(src), len(src), legs, first)
                 for src, legs, first in ((rerun, rerun_legs, 0), (env_row + new_src, new_legs, len(rerun)))
                 if len(src)]
        if self.replay is not None:
            dq_np, dqd_np = next(self.replay)
            dq.assign(dq_np)
            dqd.assign(dqd_np)
        else:
            for src, count, legs, first in parts:
                self._events += 1
                seed = (cfg.seed * SEED_STRIDE + self._events) & 0x7FFFFFFF
                rows = slice(first, first + count)
                kept = (noise[rows], response[rows], scales[rows]) if mixing else self._unused.noise
                sites(bk.foot_perturbation, (count, 2), [
                    self.physics.kernel_model, run_in.q, sc.xrot, sc.xpos, sc.s_ang, sc.s_lin, sc.vel_ang, sc.vel_lin,
                    src, pool.ints(legs), seed, self._unused.seed_offset, real(self._sigma_p), real(self._sigma_v),
                    real(self._sigma_v_per_speed),
                    real(cfg.damping), real(cfg.max_dq), real(cfg.max_dqd), dq[rows], dqd[rows], self._clamped,
                    self._approach, int(mixing), *kept])
        if self.recorded is not None:
            self.recorded.append((dq.numpy().copy(), dqd.numpy().copy()))
        r_in = pool.state(r)
        for src, count, _, first in parts:
            sites(bk.perturbed_rows, (count, m.nq), [run_in.q, run_in.qd, src, first, dq, dqd, r_in.q, r_in.qd], tape)
        probe = fresh = None
        if self._probing:
            fresh = pool.array(len(new_src), (), real, requires_grad=True)
            fresh.fill_(1.0)
        if tape is not None and len(new_src) and b >= 2:
            self._record_entry_adjoints(r_in, len(rerun), len(new_src) // b, b, tape,
                                        (fresh, noise, response, scales) if mixing else None)
        if self._probing:       # recorded after the hook: the backward pass completes fresh.grad before it
            which = np.r_[np.zeros(len(rerun), np.int32), np.ones(len(new_src), np.int32)]
            src = np.r_[rerun, np.arange(len(new_src))]
            probe = self._take_probes(which, src, self.branch_probe if len(rerun) else fresh, fresh, tape)
        r_env = np.concatenate([np.repeat(self.bundle_env, self.counts)[rerun], new_src]).astype(int)
        r_out = pool.state(r)
        control_r = self._gather_control(control, r_env, tape)
        self.physics.run(r_in, r_out, control_r, h, pool.scratch(r, kind="rerun"), tape)
        return r_out, probe

    def _assemble(self, nominal: State, s_out: State, n: int, tape) -> None:
        """s_out <- nominal, or the branch mean (plus the nominal-forward offset) in a bundle."""
        bk, real = self.kernels, self.real
        m, pool = self.model, self.pool
        w = len(self.bundle_env)
        if not w:
            self._select(np.zeros(n, np.int32), np.arange(n), nominal, nominal, s_out, tape)
            return
        slot = np.full(n, -1, dtype=np.int32)
        slot[self.bundle_env] = np.arange(w, dtype=np.int32)
        mean = pool.state(w, zero=True)
        q_sum = pool.array(w, (m.nq,), real, zero=True, requires_grad=self.requires_grad)
        bi = self.branch_in
        probe = self.branch_probe
        self._sites(bk.branch_mean, w, [pool.ints(self._first_rows()), pool.ints(self.counts), bi.q, bi.qd,
                                        bi.contact_impulse, bi.contact_height, int(probe is not None),
                                        self._unused.probe if probe is None else probe, q_sum, mean.q, mean.qd,
                                        mean.contact_impulse, mean.contact_height], tape)
        offset = None
        if self.cfg.experimental.nominal_forward:
            offset = pool.state(n, zero=True, requires_grad=False)
            self._sites(bk.nominal_offset, (n, m.nq), [pool.ints(slot), *state_fields(nominal), *state_fields(mean),
                                                       *state_fields(offset)])
        self._select((slot >= 0).astype(np.int32), np.where(slot >= 0, slot, np.arange(n)), nominal, mean, s_out,
                     tape, offset)

    def _keep_bundles(self, keep: np.ndarray, tape) -> None:
        """Keep only the bundles `keep` (indices into the open ones), with their branch rows."""
        first = self._first_rows()
        rows = np.concatenate([np.arange(first[w], first[w] + self.counts[w]) for w in keep]
                              + [np.zeros(0, int)]).astype(np.int32)
        self.bundle_env = [self.bundle_env[w] for w in keep]
        self.counts = self.counts[keep]
        self.left = self.left[keep]
        self.flags = self.flags[rows]
        branches = probes = None
        if len(rows):
            kept = (self.branch_in, self.branch_probe)
            branches, probes = self._take(np.zeros(len(rows), np.int32), rows, kept, kept, tape)
        self._set_branches(branches, probes)

    # -- the spread of the branches' gradients ----------------------------------------------------
    def _record_entry_adjoints(self, entry: State, first: int, bundles: int, b: int, tape: wp.Tape,
                               mix: Optional[Tuple[wp.array, ...]]) -> None:
        """On `tape`: once the backward pass has brought the adjoints of the new bundles' entry states
        (`bundles` bundles of `b` rows from row `first` of `entry`; recorded after their perturbation,
        before their substep, so it runs in between), clip them (`branch_clip`), add their spread to
        the segment's sums and, given `mix` (the new branches' probes and the noise, response and stds
        of the re-run rows), move them to the alpha-order gradient (bk.alpha_order_mix)."""
        def on_entry_adjoints():
            grads = [entry.q.grad, entry.qd.grad, first, b]
            clip = self.cfg.experimental.branch_clip
            if clip > 0:
                self._clip_launch(bundles, [*grads, self.real(clip)])
            self._spread_launch(bundles, [*grads, self._spread])
            if mix is not None:
                probe, noise, response, scales = mix
                self._mix_launch(bundles, [self.physics.kernel_model, entry.q.grad, entry.qd.grad, probe.grad, noise,
                                           response, scales, first, b, wp.float64(self._alpha), self._sums])
        tape.record_func(backward=on_entry_adjoints, arrays=[])
        self._spread_recorded = True

    def measure_spread(self) -> None:
        """After a segment's backward pass (the segment calls it at its cut): the relative standard error
        of the mean gradient of the bundles opened in it, pooled (sqrt(sum of squared standard errors /
        sum of squared means), bundles with a zero gradient left out) -> stats.branch_rse; with
        `auto_branches`, stats.branches <- B x rse / target (clamped), halfway in log B to the B that
        would reach the target (B x (rse / target)^2); the mean approach speed of the feet perturbed
        since the last reading -> stats.approach_speed; with `alpha_order`, the running alpha ->
        stats.alpha. One copy to the host; none when no bundle opened."""
        if not self._spread_recorded:
            return
        self._spread_recorded = False
        squared_error, squared_mean, measured, top_share, speed_sum, legs, v0, v1 = self._sums.numpy()
        self._sums.zero_()
        if legs:
            self.stats.approach_speed = float(speed_sum / legs)
        if v0 + v1 > 0:
            zero_order_share = float(v0 / (v0 + v1))
            keep = self.cfg.experimental.alpha_memory if np.isfinite(self.stats.alpha) else 0.0
            self.stats.alpha = self._alpha = keep * self._alpha + (1.0 - keep) * zero_order_share
        if not measured:
            return
        rse = float(np.sqrt(squared_error / squared_mean))
        self.stats.branch_rse = rse
        self.stats.branch_top_share = float(top_share / measured)
        x = self.cfg.experimental
        if x.auto_branches:
            wanted = self.stats.branches * rse / x.branch_rse_target
            self.stats.branches = int(np.clip(round(wanted), x.min_branches, x.max_branches))

    # -- helpers -------------------------------------------------------------------------------------
    def _first_rows(self) -> np.ndarray:
        """First branch row of each open bundle."""
        return (np.cumsum(self.counts) - self.counts).astype(int)

    def _set_branches(self, branches: Optional[State], probes: Optional[wp.array], storage: Optional[State] = None
                      ) -> None:
        """branch_in, branch_probe <- `branches`, `probes` (from the pool, which keeps them, or the
        pooled `storage` that `branches` are rows of, until the next substep has read them)."""
        self.branch_in, self.branch_probe = branches, probes
        self.pool.carry(branches if storage is None else storage, probes)

    def _leg_loads(self, impulse: wp.array, threshold: float, onset_level: float) -> np.ndarray:
        """(rows, 2) int32 on the host: bk.leg_loads of the contact impulses (rows, nc) at `threshold`
        and `onset_level` [N s], in one copy."""
        bk, real = self.kernels, self.real
        rows = impulse.shape[0]
        out = self.pool.array(rows, (2,), wp.int32)
        self._sites(bk.leg_loads, (rows, 2), [self.physics.kernel_model, impulse, real(threshold), real(onset_level),
                                              out])
        return out.numpy().copy()

    def _gather_control(self, control: Control, env_of_row: np.ndarray, tape) -> Control:
        out = self.pool.control(len(env_of_row))
        gather_control(self._sites, self.kernels, self.pool.ints(env_of_row), control, out, tape)
        return out

    def _take(self, which: np.ndarray, src: np.ndarray, a: Tuple[State, Optional[wp.array]],
              b: Tuple[State, Optional[wp.array]], tape) -> Tuple[State, Optional[wp.array]]:
        """A new batch of (states, probes): row i is row src[i] of a (which[i] == 0) or of b (probes
        None unless `_probing`)."""
        out = self.pool.state(len(src))
        self._select(which, src, a[0], b[0], out, tape)
        return out, self._take_probes(which, src, a[1], b[1], tape) if self._probing else None

    def _take_probes(self, which: np.ndarray, src: np.ndarray, a: wp.array, b: wp.array, tape) -> wp.array:
        """`_take` of the probes."""
        bk, real = self.kernels, self.real
        out = self.pool.array(len(src), (), real, requires_grad=True)
        self._sites(bk.select_probe, len(src), [self.pool.ints(which), self.pool.ints(src), a, b, out], tape)
        return out

    def _select(self, which: Optional[np.ndarray], src: Optional[np.ndarray], a: State, b: State, out: State, tape,
                offset: State = None) -> None:
        """out <- bk.select_rows of a and b: by `which` and `src` (out's rows), or with both None a's
        rows then b's."""
        bk = self.kernels
        rows = out.q.shape[0] if which is None else len(src)
        if which is None:
            which = src = np.zeros(0, np.int32)
        self._sites(bk.select_rows, (rows, self.model.nq), [
            self.pool.ints(which), self.pool.ints(src), a.q.shape[0], int(offset is not None), *state_fields(a),
            *state_fields(b), *state_fields(offset if offset is not None else b), *state_fields(out)], tape)

