"""Typed configuration of the G1 imitation environment (the `env` section of a training preset)."""
from dataclasses import dataclass, field
from typing import Tuple

from bcg.config_check import (
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    RANGE,
    Rule,
    Settings,
    at_least,
    between,
    one_of,
    setting,
)
from bcg.robot import FALL_HEIGHT
from bcg_train.diffsim.config import BundleConfig, SimConfig

from .start_sampling import AdaptiveStartConfig


@dataclass
class RandomizationConfig(Settings):
    """Domain randomisation of the training environment, so a policy does not fit one simulator.
    Ranges are [low, high], drawn uniformly. Per environment, at each episode start: PD gains, action
    delay; at each step: observation noise; at random intervals: pushes. Shared by all environments
    and redrawn every `physics_every_steps` control steps (between gradient segments only): contact
    stiffness and stabilisation, floor friction, a payload and centre-of-mass shift of one body."""

    enabled: bool = False
    """Off: the nominal simulator (every field below is ignored)."""
    kp_scale: Tuple[float, float] = setting((0.85, 1.15), Rule(ordered=True, low=0, low_open=True))
    """Multiplier on each joint's PD stiffness, per environment and joint [-]."""
    kd_scale: Tuple[float, float] = setting((0.85, 1.15), Rule(ordered=True, low=0, low_open=True))
    """Multiplier on each joint's PD damping, per environment and joint [-]."""
    action_delay_steps: Tuple[int, int] = setting((0, 1), Rule(ordered=True, low=0))
    """Control steps the joint targets lag the policy's action, per environment [steps]."""
    joint_pos_noise: float = setting(0.01, NON_NEGATIVE)
    """Std of the noise on the observed joint angles [rad]."""
    joint_vel_noise: float = setting(0.3, NON_NEGATIVE)
    """Std of the noise on the observed joint velocities [rad/s]."""
    ang_vel_noise: float = setting(0.1, NON_NEGATIVE)
    """Std of the noise on the observed base angular velocity [rad/s]."""
    push_interval_s: Tuple[float, float] = setting((3.0, 6.0), Rule(ordered=True, low=0, low_open=True))
    """Time between two pushes of an environment [s]."""
    push_velocity: float = setting(0.4, NON_NEGATIVE)
    """Largest horizontal base velocity change of a push [m/s] (uniform in a disc)."""
    physics_every_steps: int = setting(32, at_least(1))
    """Control steps between draws of the shared physics variation (SHAC: one rollout window)."""
    kappa_scale: Tuple[float, float] = setting((0.67, 1.5), Rule(ordered=True, low=0, low_open=True))
    """Multiplier on the contact stiffness kappa [-]."""
    contact_stabilization: Tuple[float, float] = setting((0.1, 0.4), Rule(ordered=True, low=0))
    """Fraction of a penetration pushed out per substep [-]."""
    friction_scale: Tuple[float, float] = setting((0.6, 1.25), Rule(ordered=True, low=0, low_open=True))
    """Multiplier on the feet's Coulomb coefficient against the floor [-]."""
    payload_body: str = "torso_link"
    """Body that carries the payload and the centre-of-mass shift (a MuJoCo body name)."""
    payload_mass: Tuple[float, float] = setting((-1.0, 3.0), RANGE)
    """Mass added to `payload_body` [kg]."""
    com_shift: float = setting(0.03, NON_NEGATIVE)
    """Largest shift of `payload_body`'s centre of mass along each body axis [m]."""


BODY_ERROR_FRAMES = ("world", "root_xy")
"""Frames the termination's body error may be measured in (`ImitationEnvConfig.termination_body_frame`)."""


@dataclass
class ImitationEnvConfig(Settings):
    """Units in brackets."""

    control_period_s: float = setting(0.02, POSITIVE)
    """Policy period [s] (50 Hz); the simulator takes `sim.substeps` substeps per period."""
    sim: SimConfig = field(default_factory=lambda: SimConfig(bundle=BundleConfig(enabled=True)))
    """The simulator: contact stiffness `sim.kappa` [1/m], substeps, solver constants, and bundling
    (on in the presets the paper's results use). Steps without gradients run it with bundling off."""
    capture_graphs: bool = True
    """Step the simulators as captured graphs where they can (diffsim.step_graphs: CUDA graphs on a
    GPU, Warp's recorded launch streams on the CPU; the same values and gradients, bit for bit): the
    one without gradients always, the one with gradients when bundling is off or on the device
    (`sim.bundle.on_device`; the host's bundler decides on the host, every substep, which branches to
    run). False: one kernel launch at a time."""
    kp_scale: float = setting(1.0, NON_NEGATIVE)
    """Multiplier on the description's PD stiffness (config/g1.yaml) [-]; the exported contract carries the product."""
    kd_scale: float = setting(1.0, NON_NEGATIVE)
    """Multiplier on the description's PD damping [-]."""
    action_scale: float = setting(0.25, POSITIVE)
    """Joint target = default pose + action_scale * action [rad per unit action]."""
    reference_frames: Tuple[int, ...] = setting((1, 2, 3), Rule(low=1, non_empty=True))
    """Future reference frames in the observation [control periods ahead]."""
    reference_root_velocity: bool = False
    """Also observe the reference root's linear velocity in its own frame at those frames [m/s]
    (`ref_root_lin_vel`): without it the policy sees no sign of where a travelling motion goes."""
    episode_length_s: float = setting(10.0, POSITIVE)
    """Time limit of an episode [s] (also ends at the end of the reference motion): a time-out, not a failure."""
    termination_height: float = setting(FALL_HEIGHT, NON_NEGATIVE)
    """Failure when the pelvis is below this height [m]."""
    termination_body_error: float = setting(0.5, POSITIVE)
    """Failure when the mean body position error to the reference exceeds this [m] (measured in
    `termination_body_frame`)."""
    termination_body_frame: str = setting("world", one_of(*BODY_ERROR_FRAMES))
    """Where that error is measured: "world" (the bodies as they are: a drift of the whole robot over
    the floor counts) or "root_xy" (each pose shifted so its root is over the origin: posture, height
    and heading count, the horizontal drift does not). The policy observes no global position (the
    robot has none to give), so under "world" a travelling reference ends its episodes by a drift it
    cannot see, within about a second on run or dance."""
    action_rate_scale: float = setting(0.8, NON_NEGATIVE)
    """Weight of the action-rate penalty (docs/method.md: 0.8) on the joint targets' change per control
    step: -w sum_j (action_scale (a_j - a_prev_j))^2 [rad^2]."""
    alive_reward: float = setting(0.0, NON_NEGATIVE)
    """Reward for each control step that does not end in a failure [per step] (0: the paper's reward,
    no such term). The ADD reward is >= 0 but the action-rate penalty on exploring actions is not: at
    the initial action std of 1 it is about -3.3 per step against an ADD reward of 0.2, so a failure,
    whose value is 0, is worth more than surviving and the critic learns that; this term makes
    surviving worth something. A constant: it moves the critic's values, not the reward's gradient."""
    root_velocity_reward: float = setting(0.0, NON_NEGATIVE)
    """Weight of a reward for moving with the reference [per step]:
    w exp(-|v_xy - v_ref_xy|^2 / root_velocity_sigma^2), v_xy the root's horizontal velocity in the
    world and v_ref_xy the reference's (m/s). The ADD reward sees the root's position too, but one
    feature among hundreds, normalised by a running mean of its (large) drift: policies trained on
    it keep the poses and fall behind a travelling reference. This term, computed from the robot's
    own state and differentiable, asks for the reference's speed and direction; with
    `reference_root_velocity` the policy observes that velocity. 0: the paper's reward."""
    root_velocity_sigma: float = setting(0.5, POSITIVE)
    """Width of that reward's kernel [m/s]: an error of sigma pays w / e."""
    leg_clearance_penalty: float = setting(0.0, NON_NEGATIVE)
    """Weight of a penalty for bringing the legs into each other [per step]: -w x `LegClearance`'s
    sum over pairs of balls on the two legs (thigh and shin 5 cm, the feet's contact spheres) of
    relu(1 - gap / leg_clearance_margin_m)^2, gap their surface-to-surface distance. The simulator
    does not collide the legs with each other, MuJoCo and the robot do: without this a policy may
    pass its legs through each other where the reference brings them close (run's turns). 0: the
    paper's reward."""
    leg_clearance_margin_m: float = setting(0.02, POSITIVE)
    """Gap between two of those balls below which that penalty starts [m] (1 per pair at touching)."""
    failure_margin_penalty: float = setting(0.0, NON_NEGATIVE)
    """Weight of a penalty for coming near a failure [per step], the gradient a failure itself does not
    give (it ends the episode by a discrete test, so SHAC's actor sees no cost in it):
    -w (ramp(e, m L, L) + ramp(p, m P, P)), ramp(x, a, b) = (relu(x - a) / (b - a))^2, e the
    termination's body error and L its limit (`termination_body_error`), p the posture error (the mean
    body error with the root's horizontal drift removed: a fall is a posture error) and P
    `posture_error_limit_m`, m `failure_margin`. Differentiable through the simulator. 0: the paper's
    reward."""
    failure_margin: float = setting(0.5, between(0, 1, high_open=True))
    """Fraction of each limit at which that penalty starts [-] (1 at the limit)."""
    posture_error_limit_m: float = setting(0.3, POSITIVE)
    """Posture error at which that penalty's posture ramp reaches 1 [m] (a policy that keeps the
    reference's poses is at 2-6 cm; not a termination)."""
    adaptive_starts: AdaptiveStartConfig = field(default_factory=AdaptiveStartConfig)
    """Where reference starts are drawn: uniformly (off, the paper's) or more where episodes fail
    (`start_sampling`)."""
    rest_start_fraction: float = setting(0.0, FRACTION)
    """Fraction of episodes that start from rest, as the policy node starts the robot [-]: the
    default joint pose, no velocity, upright at the default pose's standing height, on the
    reference's first frame's horizontal position and heading (the node turns the reference to
    the robot's heading) and at that frame. The others start on the reference at a random phase
    (reference state initialisation, the paper's; 0: all of them)."""
    rest_start_tilt_deg: float = setting(0.0, Rule(low=0, high=30, expected="a lean of 0..30 deg (not a fall)"))
    """Those starts lean: the root tilted from upright about a random horizontal axis by up to this
    angle [deg] (uniform). On the node's start the robot has stood in HOLD with the policy's gains,
    held by a band or a hand, and leans and sags when let go; a policy trained only from exact rest
    can fall there (`bench/results/dds_checks/`). 0: upright."""
    rest_start_tip_rate: float = setting(0.0, NON_NEGATIVE)
    """... and tip: a root angular velocity about a random horizontal axis of up to this [rad/s]
    (uniform), pivoting about the feet (the root's linear velocity to match). 0: still."""
    rest_start_joint_noise_rad: float = setting(0.0, NON_NEGATIVE)
    """... and sag: N(0, this^2) [rad] added to each default joint angle. 0: the default pose."""
    lead_in_s: float = setting(0.0, NON_NEGATIVE)
    """Blend the clip's first seconds in from rest [s] (`bcg.motion.lead_in`): the reference then
    begins with the robot standing still in its default pose where the clip starts and reaches the
    clip's own frames, with their velocities, after this long. The exported contract carries it, so
    the policy node and the evaluation blend the same motion file in the same way. For a clip that
    opens mid-move, where a robot handed over standing cannot follow its first frame. 0: the clip
    as it is."""
    motion_duration_s: float = setting(15.0, POSITIVE)
    """Length of a built-in synthetic motion [s]."""
    randomization: RandomizationConfig = field(default_factory=RandomizationConfig)
    """Domain randomisation (off by default; on in the presets that train policies for transfer)."""
