"""Typed configuration of the sim bridge, read from a ROS parameter YAML and overridden by flags.

The same dataclass is the CLI's defaults, the `ros__parameters` of config/sim_bridge.yaml and the
parameters the ROS 2 node declares. Every field's type and rule is checked at construction
(`bcg.config_check.validate_config`): a bad value raises `ConfigError` naming `sim_bridge.KEY=VALUE`.
"""
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from bcg.config_check import (
    NON_NEGATIVE,
    POSITIVE,
    Rule,
    Settings,
    check,
    convert_fields,
    one_of,
    setting,
    validate_config,
)
from bcg.robot import FALL_HEIGHT
from bcg.ros_params import layered_parameters
from bcg.transport import DOMAIN_SETTING, TRANSPORT_SETTING

NODE_NAME = "sim_bridge"
"""The node's name: its ROS 2 node name and its section in a ROS 2 parameter file."""
ROS_EXECUTABLE = "sim_bridge"
"""The executable `ros2 run` / `ros2 launch` start (setup.py); started as it, the bridge is a ROS 2 node."""
LOGGER_NAME = "bcg_sim_bridge"
"""The std logger every module of the bridge logs to (routed to rclpy's logger in a ROS 2 node)."""
SIMULATOR_DOMAIN = 1
"""The DDS domain when `domain` is -1 outside ROS 2 (or ROS_DOMAIN_ID is unset): Unitree's simulator's."""
EMULATIONS = ("", "unitree_mujoco")
"""`emulate` values (`unitree_emulation.py`; kept here for the same reason as BAND_MODES)."""
START_JOINT_NOISE_RAD = 0.02
"""rad: standard deviation of the joint noise a `seed` adds to the initial pose (as bcg-eval's seeds)."""
LOCKSTEP_TIMEOUT_S = 10.0
"""Wall seconds the bridge waits in lockstep for an answer before it steps on without one."""
BAND_MODES = ("hold", "hang")
"""Elastic band modes (`elastic_band.py`). Kept here, not there: this module must not import mujoco,
which reads $MUJOCO_GL once, at its import (`display.choose_offscreen_backend`)."""


@dataclass(frozen=True)
class BridgeConfig(Settings):
    """Everything the bridge needs besides the robot model itself."""

    model: str = ""
    """Path of the G1 MuJoCo XML (scene with a floor); empty: $BCG_G1_MODEL."""
    transport: str = setting("auto", TRANSPORT_SETTING)
    """'auto': ROS 2 in a ROS 2 node (started by ros2 run / ros2 launch, or with --ros-args), else
    Cyclone DDS directly, like the robot; 'ros2' or 'dds' to insist (`bcg.transport.endpoint`)."""
    domain: int = setting(-1, DOMAIN_SETTING)
    """DDS domain id (the robot uses 0, Unitree's simulator 1); -1: $ROS_DOMAIN_ID in a ROS 2 node, else 1."""
    interface: str = "lo"
    """Network interface DDS binds to (loopback by default)."""
    emulate: str = setting("", one_of(*EMULATIONS))
    """'': behave like the robot (validate LowCmd, PD inside every physics step, CRC on LowState);
    'unitree_mujoco': behave like Unitree's MuJoCo simulator, as measured (`unitree_emulation.py`:
    crc / mode_machine / tick 0, zero LowStates before the first step, zero torque before the first
    LowCmd, explicit PD once per command from one-step-old sensors; it never holds the robot:
    wait_for_command does not apply; in lockstep the tick counts ms, which the node's clock needs).
    Needs state_hz = physics_hz."""
    physics_hz: float = setting(1000.0, POSITIVE)
    """MuJoCo step rate, Hz (model.opt.timestep = 1 / physics_hz); the PD law runs every step."""
    state_hz: float = setting(500.0, POSITIVE)
    """LowState publish rate, Hz of simulated time; physics_hz must be a whole multiple of it."""
    fast: bool = False
    """True: step as fast as possible; False: pace simulated time to the wall clock."""
    duration: float = setting(0.0, NON_NEGATIVE)
    """Simulated seconds to run, then exit; 0: run until SIGINT / SIGTERM."""
    wait_for_command: float = setting(-1.0, Rule(low=0, also=(-1,), expected="seconds >= 0, or -1"))
    """Wall seconds to hold the robot still, simulated time at 0 (publishing LowState at the state
    rate), until the first valid LowCmd arrives: a bridge started before its controller does not drop
    the robot (the node takes seconds to start). -1: as long as it takes; 0: simulate from the start
    (the robot then stands only on the band or a command). Not when emulating Unitree's simulator,
    which steps from the start."""
    lockstep: bool = False
    """After the first accepted LowCmd, step on only when the controller has answered the LowState
    just published (a LowCmd echoing its tick in reserve[0]: `bcg-policy-node --lockstep`): simulated
    time advances as fast as the controller answers, never past it, whatever the machine's load. A
    controller silent for `LOCKSTEP_TIMEOUT_S` wall seconds ends lockstep (logged; the run goes on as
    `fast` says). For checks (mujoco_check), not for timing measurements."""
    command_timeout: float = setting(0.1, POSITIVE)
    """Simulated seconds without an accepted LowCmd after which the bridge falls back to damping."""
    damping_kd: float = -1.0
    """Damping-mode gain, N m s/rad (kp = 0); negative: the robot description's damping_kd."""
    initial_pose: str = setting("default", one_of("default", "zero"))
    """Joint angles at start: 'default' (robot default pose) or 'zero' (the model's qpos0)."""
    seed: int = setting(-1, Rule(low=0, also=(-1,), expected="a seed >= 0, or -1 (none)"))
    """>= 0: perturb the start, drawn from this seed: the heading uniform in [-180, 180) deg and every
    joint angle plus N(0, START_JOINT_NOISE_RAD^2) (bcg-eval's seeds); -1: the initial pose exactly."""
    elastic_band: bool = False
    """Hold the torso with Unitree's elastic band at start."""
    band_mode: str = setting("hold", one_of(*BAND_MODES))
    """'hold': the band is just taut in the initial pose (rest length = anchor distance at the start
    + band_length): it never lifts the robot and pulls back as the body sinks; 'hang': rest length
    band_length, as Unitree's simulator (0 lifts the G1 until it hangs about 0.5 m up)."""
    band_stiffness: float = setting(200.0, NON_NEGATIVE)
    """Elastic band spring constant, N/m."""
    band_damping: float = setting(100.0, NON_NEGATIVE)
    """Elastic band damping along the band, N s/m."""
    band_anchor_height: float = 3.0
    """Height of the band's anchor above the floor, m, straight above the initial root position."""
    band_length: float = 0.0
    """Rest length of the band, m ('hold' mode: added to the anchor distance at the start)."""
    band_body: str = setting("torso_link", Rule(non_empty=True, expected="the name of a body of the model"))
    """Model body the band pulls on."""
    band_release_time: float = setting(0.0, NON_NEGATIVE)
    """Simulated seconds after which the band is released; 0: never."""
    fall_height: float = setting(FALL_HEIGHT, NON_NEGATIVE)
    """Root (pelvis) height below which the robot counts as fallen, m."""
    metrics: str = ""
    """Path of the metrics JSON written at exit; empty: none."""
    motion: str = ""
    """Reference motion (Unitree LAFAN1 CSV at 30 fps, or npz) to measure joint tracking against; empty: none."""
    motion_start: float = setting(0.0, NON_NEGATIVE)
    """Simulated time [s] the reference motion starts at (the policy's first step); tracking is measured from then."""
    motion_lead_in: float = setting(0.0, NON_NEGATIVE)
    """s over which the policy's reference begins from rest (its contract's `motion_lead_in_s`): joint
    tracking is measured against the motion blended in from the default pose as the policy node's
    reference is (`bcg.motion.lead_in`); mujoco_check passes the policy's. 0: the motion as it is."""
    record: str = ""
    """Path of a video / GIF of the run rendered offscreen (.gif, or .mp4 with imageio-ffmpeg); empty: none."""
    record_fps: float = setting(30.0, POSITIVE)
    """Frames per simulated second in the recording."""
    record_width: int = setting(320, POSITIVE)
    """Recording width, pixels."""
    record_height: int = setting(240, POSITIVE)
    """Recording height, pixels."""
    headless: bool = False
    """True: never open the interactive viewer, even when a display exists."""

    def __post_init__(self) -> None:
        validate_config(self, f"{NODE_NAME}.")

    def check_relations(self) -> None:
        ratio = self.physics_hz / self.state_hz
        check(ratio >= 1 and abs(ratio - round(ratio)) < 1e-9, "state_hz", self.state_hz,
              f"physics_hz ({self.physics_hz:g}) is not a whole multiple of it", "a rate that divides physics_hz")
        check(self.band_mode == "hold" or self.band_length >= 0, "band_length", self.band_length,
              "negative in 'hang' mode", "a rest length >= 0 in 'hang' mode")
        check(not self.emulate or self.state_hz == self.physics_hz, "state_hz", self.state_hz,
              f"not physics_hz ({self.physics_hz:g}) while emulating Unitree's simulator",
              "state_hz = physics_hz (one LowState per physics step)")

    def replace(self, **changes: Any) -> "BridgeConfig":
        """A copy with `changes` applied (validated like any other config)."""
        return dataclasses.replace(self, **convert_fields(BridgeConfig, changes, f"{NODE_NAME}."))

    @property
    def steps_per_state(self) -> int:
        """Physics steps between two LowState messages."""
        return int(round(self.physics_hz / self.state_hz))


def load_config(params_file: Optional[Union[str, Path]] = None,
                overrides: Optional[Mapping[str, Any]] = None) -> BridgeConfig:
    """Defaults, then the file's `ros__parameters`, then `overrides` (e.g. command-line flags)."""
    return BridgeConfig(**layered_parameters(BridgeConfig, NODE_NAME, params_file, flags=overrides))
