"""The G1 imitation environment on the differentiable Warp simulator (implements `env_api.DiffEnv`).

Batched over N environments; states are torch tensors on `device` in the simulator's precision
(`cfg.sim.precision`: float64 or float32, the Model's and so the simulators'), and within a SHAC window
(between `cut_graph` calls: one simulator segment) the observations, ADD features and rewards are
differentiable w.r.t. the actions through `diffsim.torch_bridge`. Episodes start at a random phase
of the reference (reference state initialisation; a `rest_start_fraction` of them from rest at the
first frame, as the policy node starts the robot), fail when the pelvis drops below
`termination_height` or the bodies drift `termination_body_error` from the reference (in
`termination_body_frame`: the world, or with the horizontal drift of the root removed), and time out at
`episode_length_s` or the reference's end. Observations are built by `bcg.contract`'s observation
spec, the same code the policy node runs. The reward terms are the rows of `reward_terms.REWARD_TERMS`
that the config's weights turn on (the trainer adds its ADD term).
With bundling, SHAC's rollouts run under bundled physics: an environment inside a bundle moves as
the mean of its perturbed branches (`BundleExperiments.nominal_forward` keeps the plain trajectory).
Steps taken with gradients disabled (PPO, evaluation) use a second, plain simulator on the same
Model (no tape, no bundling) and close any open bundle. An environment whose state turns non-finite fails (terminated)
and restarts; the others are unaffected. With `cfg.randomization.enabled`, `DomainRandomizer` varies
the PD gains, delays the actions, adds observation noise, pushes the robots and varies the shared
physics (both simulators alike, only between gradient segments).
"""
import dataclasses
from typing import Dict

import numpy as np
import torch

from bcg.config_check import validate_config
from bcg.contract import ObservationInputs, PolicyContract, tracking_spec
from bcg.rotations import quat_rotate_inverse, tilted_about_horizontal
from bcg_train.diffsim import Model, Simulator, torch_bridge
from bcg_train.env_api import EnvStep
from bcg_train.motion.body_error import mean_body_error
from bcg_train.motion.clip import reference_frames
from bcg_train.motion.kinematics import RobotKinematics
from bcg_train.motion.library import load_clip
from bcg_train.motion.resample import ResampleConfig

from .config import ImitationEnvConfig
from .features import PoseState, add_features, feature_dim
from .randomization import DomainRandomizer
from .reward_terms import StepOutcome, active_terms, evaluate
from .start_sampling import AdaptiveStarts


class G1ImitationEnv:
    """See the module docstring. `motion`: what `--motion` takes (`bcg_train.motion.library.load_clip`)."""

    def __init__(self, cfg: ImitationEnvConfig, motion: str, num_envs: int, device: str = "cpu", seed: int = 0,
                 model_path=None):
        validate_config(cfg, "env.")
        self.cfg, self.motion_name, self.num_envs = cfg, str(motion), num_envs
        self.device = torch.device(device)
        wp_device = "cpu" if self.device.type == "cpu" else f"cuda:{self.device.index or 0}"
        self.bridge = torch_bridge
        self.model = Model.from_mujoco(model_path, device=wp_device, precision=cfg.sim.precision)
        self.dtype = self.model.types.torch
        plain_cfg = dataclasses.replace(cfg.sim, bundle=dataclasses.replace(cfg.sim.bundle, enabled=False))
        # non-finite states are handled per environment in `step` (a failure), not raised
        bundle = cfg.sim.bundle
        self.sim = Simulator(self.model, num_envs, cfg.sim, requires_grad=True, check_finite=False,
                             capture_graphs=cfg.capture_graphs and (not bundle.enabled or bundle.on_device))
        self.sim_plain = Simulator(self.model, num_envs, plain_cfg, check_finite=False,
                                   capture_graphs=cfg.capture_graphs)
        robot = self.robot = self.model.robot
        n = self.act_dim = robot.num_joints
        real = dict(dtype=self.dtype, device=self.device)
        dof = torch.as_tensor(self.model.joint_dof.numpy(), dtype=torch.long, device=self.device)
        self._jq, self._jv = dof + 1, dof
        self.kp = torch.as_tensor(robot.kp * cfg.kp_scale, **real)
        self.kd = torch.as_tensor(robot.kd * cfg.kd_scale, **real)
        self.default_q = torch.as_tensor(robot.default_q, **real)
        self.q_lower = torch.as_tensor(robot.q_lower, **real)
        self.q_upper = torch.as_tensor(robot.q_upper, **real)

        clip = load_clip(motion, RobotKinematics(robot), ResampleConfig(rate_hz=1.0 / cfg.control_period_s,
                                                                     lead_in_s=cfg.lead_in_s),
                         builtin_duration_s=cfg.motion_duration_s)
        if tuple(clip.joint_names) != tuple(robot.joint_names):
            raise ValueError(f"motion {motion}: joints {clip.joint_names} differ from the robot's {robot.joint_names}")
        self.ref = clip.to_torch(self.device, self.dtype)
        q_ref, qd_ref = clip.generalized()
        self._ref_q = torch.as_tensor(self._to_sim_layout(q_ref, 7), **real)
        self._ref_qd = torch.as_tensor(self._to_sim_layout(qd_ref, 6), **real)
        rest_q, _ = clip.rest_state(0, robot.default_q, robot.standing_height)
        self._rest_q = torch.as_tensor(self._to_sim_layout(rest_q[None], 7)[0], **real)
        """(nq,) the start from rest: the default pose standing on the reference's first frame, facing its way."""
        self._rest_root_host = torch.as_tensor(rest_q[3:7])
        """(4,) float64 on the host: that start's root quaternion (w, x, y, z)."""
        self.frames = tuple(int(f) for f in cfg.reference_frames)
        self._last_start = clip.num_frames - 1 - max(self.frames) - 1
        if self._last_start < 0:
            raise ValueError(f"motion {motion}: {clip.num_frames} frames is too short "
                             f"for reference frames {self.frames}")
        self.max_steps = int(round(cfg.episode_length_s / cfg.control_period_s))
        self.adaptive_starts = AdaptiveStarts(cfg.adaptive_starts, self._last_start, 1.0 / cfg.control_period_s,
                                              self.device) if cfg.adaptive_starts.enabled else None
        self.spec = tracking_spec(n, self.frames, cfg.reference_root_velocity)
        self.obs_dim = self.spec.size
        self.add_dim = feature_dim(n, self.model.nb)
        self.reward_terms = active_terms(self)
        """The reward terms `cfg` turns on (`reward_terms.REWARD_TERMS`), set up for this robot."""

        self.randomizer = None
        if cfg.randomization.enabled:
            self.randomizer = DomainRandomizer(cfg.randomization, self.model.body_names, num_envs, n,
                                               cfg.control_period_s, self.device, seed, self.dtype)
        delays = self.randomizer.max_delay if self.randomizer else 0
        self._history = torch.zeros(delays, num_envs, n, **real)
        """(D, N, n) the policy's actions 1..D control steps ago (D the longest action delay)."""
        self._taped = False            # a taped step since the last cut_graph: the physics must not change now
        self.generator = torch.Generator(device="cpu").manual_seed(seed)
        self.q = torch.zeros(num_envs, self.model.nq, **real)
        self.qd = torch.zeros(num_envs, self.model.nv, **real)
        self.frame = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.steps = torch.zeros(num_envs, dtype=torch.long)
        """(N,) control steps into each episode, on the host: the time limit and the pushes are decided
        from it without asking the device."""
        self.last_action = torch.zeros(num_envs, n, **real)
        self.env_steps = 0
        self._bundled_seen = (0, 0)   # bundle stats (env_substeps, bundled_env_substeps) when they last moved
        self._triggered = 0.0         # the fraction bundled over the substeps the stats last moved by

    # -- DiffEnv --------------------------------------------------------------------------------------
    def reset(self) -> torch.Tensor:
        all_envs = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self.q, self.qd, self.last_action = self._restart(all_envs, torch.arange(self.num_envs), self.q, self.qd,
                                                          self.last_action)
        return self._observation(self.q, self.qd, self.last_action, self.frame).detach().float()

    def step(self, actions: torch.Tensor) -> EnvStep:
        a = actions.to(self.dtype)
        rand = self.randomizer
        if rand and not self._taped and rand.steps_since_physics >= rand.cfg.physics_every_steps:
            rand.draw_physics()
            self._apply_physics()
        target = torch.clamp(self.default_q + self.cfg.action_scale * self._delayed(a), self.q_lower, self.q_upper)
        kp, kd = (self.kp * rand.kp_scale, self.kd * rand.kd_scale) if rand else (self.kp, self.kd)
        if torch.is_grad_enabled():
            q, qd = self.bridge.step(self.sim, self.q, self.qd, target, self.cfg.control_period_s, kp, kd)
            self._taped = True
        else:
            self.sim.segment.restart(np.arange(self.num_envs))   # its bundles no longer match the state
            q, qd = self.bridge.step_without_gradient(self.sim_plain, self.q, self.qd, target,
                                                      self.cfg.control_period_s, kp, kd)
        if rand:
            rand.steps_since_physics += 1
        if len(self._history):
            self._history = torch.cat([a[None], self._history[:-1]])
        # a diverged environment fails: its final state is taken as the reference's (finite, no graph);
        # selected on the device, without asking the host whether any diverged
        diverged = ~(torch.isfinite(q).all(dim=-1) & torch.isfinite(qd).all(dim=-1))
        q = torch.where(diverged[:, None], self._ref_q[self.frame + 1], q)
        qd = torch.where(diverged[:, None], self._ref_qd[self.frame + 1], qd)
        self.frame = self.frame + 1
        self.steps = self.steps + 1
        self.env_steps += self.num_envs

        sim_pose = self._pose(q, qd)
        ref_pose = self._reference_pose(self.frame)
        body_err = mean_body_error(sim_pose.body_pos, ref_pose.body_pos, self.cfg.termination_body_frame == "root_xy")
        fell = (q[:, 2] < self.cfg.termination_height) | diverged
        terminated = fell | (body_err > self.cfg.termination_body_error)
        if self.adaptive_starts is not None:
            self.adaptive_starts.record(self.frame, terminated)
        out_of_time = (self.steps >= self.max_steps).to(self.device) | (self.frame > self._last_start)
        truncated = out_of_time & ~terminated
        obs_end = self._observation(q, qd, a, self.frame)
        rewards = evaluate(self.reward_terms, StepOutcome(action=a, last_action=self.last_action, sim_pose=sim_pose,
                                                          ref_pose=ref_pose, body_err=body_err, terminated=terminated))

        done = terminated | truncated
        restart = done.cpu().nonzero().squeeze(-1)                  # the step's one question to the device
        any_done = len(restart) > 0
        if any_done:
            self.q, self.qd, self.last_action = self._restart(done, restart, q, qd, a)
        else:
            self.q, self.qd, self.last_action = q, qd, a
        if rand:
            self.qd, pushed = rand.push(self.qd, self.steps)   # decided on the host
            if len(pushed):
                self.sim.segment.restart(pushed)               # a bundle would carry on from its branches
        obs = self._observation(self.q, self.qd, self.last_action, self.frame) if any_done else obs_end
        return EnvStep(obs=obs.float(), reward_terms={k: v.float() for k, v in rewards.items()},
                       add_sim=add_features(sim_pose).float(), add_ref=add_features(ref_pose).float().detach(),
                       terminated=terminated, truncated=truncated, obs_before_reset=obs_end.float(),
                       counters=self._counters(), fell=fell)

    def cut_graph(self) -> None:
        """Detach the state. Call it after the segment's backward: the simulator then reuses the
        segment's buffers for the next one (without this, every taped substep would keep its own)."""
        self.q, self.qd, self.last_action = self.q.detach(), self.qd.detach(), self.last_action.detach()
        self._history = self._history.detach()
        self.sim.segment.cut()
        self._taped = False
        if self.adaptive_starts is not None:
            self.adaptive_starts.refresh()

    def policy_contract(self) -> PolicyContract:
        cfg, robot = self.cfg, self.robot
        return PolicyContract(
            joint_names=robot.joint_names, kp=robot.kp * cfg.kp_scale, kd=robot.kd * cfg.kd_scale,
            default_joint_pos=robot.default_q, action_scale=np.full(robot.num_joints, cfg.action_scale),
            observation=self.spec, control_period_s=cfg.control_period_s,
            contact_stiffness=cfg.sim.kappa, motion=self.motion_name, motion_lead_in_s=cfg.lead_in_s,
            simulator=cfg.sim.contract_settings(),
            randomization=self.randomizer.describe() if self.randomizer else {},
            description=f"SHAC imitation policy for {self.motion_name} (kappa {cfg.sim.kappa:g}, bundling "
                        f"{'on' if cfg.sim.bundle.enabled else 'off'})")

    def state_dict(self) -> dict:
        return {"q": self.q.detach().cpu(), "qd": self.qd.detach().cpu(), "frame": self.frame.cpu(),
                "steps": self.steps.clone(), "last_action": self.last_action.detach().cpu(),
                "generator": self.generator.get_state(), "env_steps": self.env_steps,
                "simulator": _to_torch(self.sim.state_dict()), "history": self._history.detach().cpu(),
                "randomizer": self.randomizer.state_dict() if self.randomizer else None,
                "bundled_seen": list(self._bundled_seen), "triggered": self._triggered,
                "adaptive_starts": self.adaptive_starts.state_dict() if self.adaptive_starts else None}

    def load_state_dict(self, state: dict) -> None:
        dev = self.device
        self.q, self.qd = state["q"].to(dev), state["qd"].to(dev)
        self.frame, self.steps = state["frame"].to(dev), state["steps"].cpu().clone()
        self.last_action = state["last_action"].to(dev)
        self.generator.set_state(state["generator"])
        self.env_steps = int(state["env_steps"])
        self.sim.load_state_dict(_to_numpy(state["simulator"]))
        self._history = state["history"].to(dev)
        self._bundled_seen = tuple(int(x) for x in state.get("bundled_seen", (0, 0)))   # older checkpoints: none
        self._triggered = float(state.get("triggered", 0.0))
        if self.randomizer:
            self.randomizer.load_state_dict(state["randomizer"])
            self._apply_physics()
        if self.adaptive_starts is not None:
            self.adaptive_starts.load_state_dict(state["adaptive_starts"])

    # -- internals ------------------------------------------------------------------------------------
    def _delayed(self, a: torch.Tensor) -> torch.Tensor:
        """The action each environment applies now: its own, or the one `delay` control steps ago."""
        if not len(self._history):
            return a
        choices = torch.cat([a[None], self._history])                  # (D + 1, N, n)
        return choices[self.randomizer.delay, torch.arange(self.num_envs, device=self.device)]

    def _apply_physics(self) -> None:
        """Both simulators follow the randomizer's current physics draw."""
        config, variation = self.randomizer.current(self.cfg.sim)
        self.sim.vary(config, variation)
        self.sim_plain.vary(dataclasses.replace(config, bundle=self.sim_plain.config.bundle), variation)

    def _restart(self, done: torch.Tensor, idx_host: torch.Tensor, q, qd, last_action):
        """Reference state initialisation of the `done` environments (at least one) at random phases
        (no graph). `done`: (N,) bool on the device; `idx_host`: (K,) their indices, on the host (the
        restart asks the device nothing more)."""
        idx = idx_host.to(self.device)
        if self.adaptive_starts is not None:
            start = self.adaptive_starts.draw(len(idx), self.generator)
        else:
            start = torch.randint(0, self._last_start + 1, (len(idx),), generator=self.generator)
        at_rest = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        if self.cfg.rest_start_fraction > 0:        # no draw otherwise: the paper's runs keep their random stream
            rest = torch.rand(len(idx), generator=self.generator) < self.cfg.rest_start_fraction
            start = torch.where(rest, torch.zeros_like(start), start)
            at_rest = at_rest.index_put((idx,), rest.to(self.device))
        start = start.to(self.device)
        self.frame = self.frame.index_put((idx,), start)
        self.steps[idx_host] = 0
        self.sim.segment.restart(idx_host)
        if self.randomizer:
            self.randomizer.episode_start(idx_host, self.steps[idx_host])
        if len(self._history):
            self._history = torch.where(done[None, :, None], torch.zeros_like(self._history), self._history)
        mask = done[:, None]
        rest_q, rest_qd = self._rest_states()
        q = torch.where(mask, torch.where(at_rest[:, None], rest_q, self._ref_q[self.frame]), q)
        qd = torch.where(mask, torch.where(at_rest[:, None], rest_qd, self._ref_qd[self.frame]), qd)
        return q, qd, torch.where(mask, torch.zeros_like(last_action), last_action)

    def _rest_states(self):
        """(q (N, nq), qd (N, nv)): a start from rest for every environment, leaning, tipping and
        sagging as `rest_start_tilt_deg`, `rest_start_tip_rate` and `rest_start_joint_noise_rad` draw
        (on the host; no draw when all three are 0 or no episode starts from rest)."""
        c, n = self.cfg, self.num_envs
        q = self._rest_q.expand(n, -1)
        qd = torch.zeros(n, self._ref_qd.shape[1], dtype=q.dtype, device=self.device)
        perturbed = c.rest_start_tilt_deg or c.rest_start_tip_rate or c.rest_start_joint_noise_rad
        if not (c.rest_start_fraction and perturbed):
            return q, qd
        g, dtype = self.generator, torch.float64
        tilt_axis, tilt = 2 * np.pi * torch.rand(n, generator=g, dtype=dtype), torch.rand(n, generator=g, dtype=dtype)
        tip_axis, tip = 2 * np.pi * torch.rand(n, generator=g, dtype=dtype), torch.rand(n, generator=g, dtype=dtype)
        noise = c.rest_start_joint_noise_rad * torch.randn(n, len(self._jq), generator=g, dtype=dtype)
        root = tilted_about_horizontal(self._rest_root_host, tilt_axis, np.radians(c.rest_start_tilt_deg) * tilt)
        rate = c.rest_start_tip_rate * tip
        omega = torch.stack([rate * torch.cos(tip_axis), rate * torch.sin(tip_axis), torch.zeros_like(rate)], -1)
        height = self.robot.standing_height
        velocity = torch.stack([omega[:, 1] * height, -omega[:, 0] * height, torch.zeros_like(rate)], -1)  # w x (0,0,h)
        q, qd = q.clone(), qd.clone()
        q[:, 3:7] = root.to(q)
        q[:, self._jq] += noise.to(q)
        qd[:, :3] = velocity.to(qd)
        qd[:, 3:6] = quat_rotate_inverse(root, omega).to(qd)      # the simulator's is in the root frame
        return q, qd

    def _to_sim_layout(self, x: np.ndarray, base: int) -> np.ndarray:
        """Reference (T, base + n) with joints in the description's order -> the simulator's dof order."""
        out = x.copy()
        out[:, base + self.model.joint_dof.numpy() - 6] = x[:, base:]
        return out

    def feet(self):
        """Per side: (the foot body's name, (K, 3) its contact spheres' centres in its frame [m], their
        largest radius [m]). ValueError when a foot's spheres sit on more than one body."""
        m = self.model
        body, pos, leg = m.sphere_body.numpy(), m.sphere_pos.numpy(), m.sphere_leg.numpy()
        radius = m.sphere_radius.numpy()
        feet = {}
        for k, side in enumerate(("left", "right")):
            bodies = sorted({m.body_names[b] for b in body[leg == k]})
            if len(bodies) != 1:
                raise ValueError(f"leg clearance: the {side} foot's contact spheres sit on {bodies}, not on one body")
            feet[side] = (bodies[0], pos[leg == k], float(radius[leg == k].max()))
        return feet

    def _pose(self, q, qd) -> PoseState:
        body_pos, body_quat = self.bridge.body_frames(self.sim, q)
        return PoseState(root_pos=q[:, :3], root_quat=q[:, 3:7], joint_pos=q[:, self._jq], joint_vel=qd[:, self._jv],
                         body_pos=body_pos, root_lin_vel=qd[:, :3], root_ang_vel=qd[:, 3:6], body_quat=body_quat)

    def _reference_pose(self, frame) -> PoseState:
        r = self.ref
        return PoseState(root_pos=r.root_pos[frame], root_quat=r.root_quat[frame], joint_pos=r.joint_pos[frame],
                         joint_vel=r.joint_vel[frame], body_pos=r.body_pos[frame], root_lin_vel=r.root_lin_vel[frame],
                         root_ang_vel=self._ref_qd[frame, 3:6])

    def _observation(self, q, qd, last_action, frame) -> torch.Tensor:
        future = torch.clamp(frame[:, None] + torch.as_tensor(self.frames, device=self.device),
                             max=self.ref.num_frames - 1)
        reference = reference_frames(self.ref, future)
        ang_vel, joint_pos, joint_vel = qd[:, 3:6], q[:, self._jq], qd[:, self._jv]
        rand = self.randomizer
        if rand:                                    # sensor noise: constants, no gradient through them
            ang_vel = ang_vel + rand.observation_noise(ang_vel, rand.cfg.ang_vel_noise)
            joint_pos = joint_pos + rand.observation_noise(joint_pos, rand.cfg.joint_pos_noise)
            joint_vel = joint_vel + rand.observation_noise(joint_vel, rand.cfg.joint_vel_noise)
        return self.spec.build(ObservationInputs(
            base_quat=q[:, 3:7], base_ang_vel=ang_vel, joint_pos=joint_pos, joint_vel=joint_vel,
            last_action=last_action, default_joint_pos=self.default_q, reference=reference))

    def _counters(self) -> Dict[str, float]:
        """Running totals (bundles opened, ended early among them, environment-substeps refused for
        want of rows), this step's fraction of environment-substeps inside a bundle (with the bundles on
        the device, whose counters are read at the segment's cut: the fraction over the last window, and
        the totals as of that cut), the B of the bundles opened next, the last measured spread of a
        bundle's branch gradients, the perturbed feet's mean approach speed [m/s] and the alpha-order
        weight; with adaptive starts, the likeliest bin's start probability over a uniform bin's
        (`start_weight_max`)."""
        out = {"env_steps": float(self.env_steps)}
        st = self.sim.bundle_stats
        if st is not None:
            seen_env, seen_bundled = self._bundled_seen
            stepped = st.env_substeps - seen_env
            if stepped:     # every step on the host; on the device (read at the cut) the last window
                self._triggered = (st.bundled_env_substeps - seen_bundled) / stepped
                self._bundled_seen = (st.env_substeps, st.bundled_env_substeps)
            out.update(branch_substeps=float(st.branch_substeps), bundles=float(st.bundles),
                       released=float(st.released), skipped_events=float(st.skipped_events),
                       triggered_fraction=self._triggered,
                       branches=float(st.branches), branch_rse=st.branch_rse,
                       branch_top_share=st.branch_top_share, approach_speed=st.approach_speed, alpha=st.alpha)
        if self.randomizer:
            out.update(self.randomizer.counters())
        if self.adaptive_starts is not None:
            out["start_weight_max"] = float(self.adaptive_starts.weights.max()) * self.adaptive_starts.num_bins
        return out


def _to_torch(x):
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x.copy())
    if isinstance(x, dict):
        return {k: _to_torch(v) for k, v in x.items()}
    return x


def _to_numpy(x):
    if isinstance(x, torch.Tensor):
        return x.numpy()
    if isinstance(x, dict):
        return {k: _to_numpy(v) for k, v in x.items()}
    return x
