"""Typed parameters of the policy node: dataclass defaults < `--params` YAML (`ros__parameters`) <
the ROS 2 command line's `--params-file` / `-p` < the node's own flags (`bcg.ros_params.layered_parameters`).

The same YAML (config/policy_node.yaml) is passed to the ROS 2 node by the launch files and read by
the direct-DDS entry point. Every field's type and rule is checked at construction
(`bcg.config_check.validate_config`): a bad value raises `ConfigError` naming `policy_node.KEY=VALUE`.
"""
from dataclasses import dataclass

from bcg.config_check import NON_NEGATIVE, POSITIVE, Rule, Settings, between, check, setting, validate_config
from bcg.transport import DOMAIN_SETTING, TRANSPORT_SETTING

NODE_NAME = "policy_node"
"""The node's name: its ROS 2 node name and its section in a parameter file."""
ROS_EXECUTABLE = "policy_node"
"""The executable `ros2 run` / `ros2 launch` start (setup.py); started as it, the node is a ROS 2 node."""
LOGGER_NAME = "bcg_policy_node"
"""The std logger every module of the node logs to (routed to rclpy's logger in a ROS 2 node)."""
ROBOT_DOMAIN = 0
"""The DDS domain when `domain` is -1 outside ROS 2 (or ROS_DOMAIN_ID is unset): the robot's."""

CPU = Rule(low=0, also=(-1,), expected="a CPU number, or -1 (any)")


@dataclass(frozen=True)
class PolicyNodeConfig(Settings):
    policy: str = ""
    """Path of the ONNX policy; empty: the built-in zero-action stand policy (holds the default pose)."""
    motion: str = ""
    """Reference motion (.csv LAFAN1 / .npz) for the policy's reference terms; empty: none."""
    model: str = ""
    """G1 MuJoCo XML (joint names, limits); empty: $BCG_G1_MODEL."""
    transport: str = setting("auto", TRANSPORT_SETTING)
    """'auto': ROS 2 in a ROS 2 node (started by ros2 run / ros2 launch, or with --ros-args), else
    Cyclone DDS directly; 'ros2' or 'dds' to insist (`bcg.transport.endpoint`)."""
    domain: int = setting(-1, DOMAIN_SETTING)
    """DDS domain id (0 on the robot, 1 in simulation); -1: $ROS_DOMAIN_ID in a ROS 2 node, else 0."""
    interface: str = ""
    """Network interface ('lo': loopback with unicast peer 127.0.0.1); empty: Cyclone's choice."""
    autostart: bool = False
    """Leave zero torque and start the policy without the remote (simulation only)."""
    autostart_hold: float = setting(0.5, NON_NEGATIVE)
    """s of HOLD before autostart starts the policy (its BLEND)."""
    lockstep: bool = False
    """Simulation only, with this suite's bridge in lockstep (`bcg-sim-bridge --lockstep`): the node's
    clock is the LowState's tick (simulated ms), and it answers every LowState with one LowCmd that
    echoes the tick (reserve[0]); nothing is timed on the wall clock, so a loaded machine slows the
    run but cannot change it. mujoco_check runs this way."""
    lowstate_clock: bool = False
    """Simulation only, against a simulator that sends no tick (Unitree's) and may run slower than
    real time: the node's phase clock (ramp, hold, blend, the policy's schedule) advances by `pd_step`
    for every fresh LowState (one that differs from the one before it), i.e. follows simulated time;
    LowState staleness stays on the wall clock (`core.state_clock`). False (the robot): wall clock.
    Lockstep, which has its clock (the tick), leaves it unused."""
    align_heading: bool = True
    """Turn the reference motion about the vertical when the policy starts, so that it begins facing
    where the robot faces (the IMU's yaw is arbitrary; training starts every episode on the
    reference's heading). False: the motion's own heading, which the robot must then face."""
    ramp_duration: float = setting(2.0, NON_NEGATIVE)
    """s, ramp from the measured pose to the default pose (with the hold gains: the stand policy's)."""
    blend_duration: float = setting(0.25, NON_NEGATIVE)
    """s of BLEND after HOLD: the policy runs while the command's targets and gains go from the hold's
    (default pose, the stand policy's gains) to the policy's; 0: at once. Measured (the six shipped
    kappa-300 SHAC policies, 5 seeds, 15 s, this suite's physics and Unitree's command path): 0 and
    0.25 s: no fall in 120 runs; 0.5 s: walk fell in 6 of 7 (it steps at once, against the stiff hold)."""
    writer_hz: float = setting(500.0, POSITIVE)
    """Hz, LowCmd write rate (deadline schedule, in a process of its own)."""
    writer_spin: float = setting(0.0, NON_NEGATIVE)
    """s before each write deadline that the writer spins on the clock instead of sleeping (0: sleep
    only). Measured on 2 cores (bench/bench_policy_node.py): 0.2 ms of spin did not lower the p99
    lateness under SCHED_FIFO and took CPU from the policy step; it may help without SCHED_FIFO on a
    machine with idle cores."""
    realtime_priority: int = setting(10, Rule(low=0, high=98, expected="0 (off) or a SCHED_FIFO priority 1..98"))
    """SCHED_FIFO priority (1..98) of the LowState receiver / policy thread; the LowCmd writer gets one
    more. Best effort: without root or an rtprio limit it is refused and logged. 0: normal scheduling.
    Measured on 2 cores: writer lateness p99 0.02-0.2 ms with it, 0.3-2 ms without."""
    receiver_cpu: int = setting(-1, CPU)
    """CPU the LowState receiver / policy thread is pinned to (best effort); -1: any."""
    writer_cpu: int = setting(-1, CPU)
    """CPU the LowCmd writer process is pinned to (best effort); -1: any. Measured on 2 cores with
    receiver_cpu 0 / writer_cpu 1: LowState -> LowCmd p99 about 0.15 ms lower than unpinned."""
    check_state_crc: bool = True
    """Drop LowState whose CRC is wrong (turn off, or --no-state-crc, for senders that leave crc = 0,
    such as Unitree's MuJoCo simulator: config/policy_node_unitree_mujoco.yaml)."""
    stale_limit: float = setting(0.06, POSITIVE)
    """s: LowState older than this triggers damping. 60 ms (three policy periods) on the robot, whose
    LowState never pauses; a simulator on a desktop can (its viewer, a loaded machine), and its
    profile relaxes it (config/policy_node_unitree_mujoco.yaml)."""
    max_joint_velocity: float = setting(35.0, POSITIVE)
    """rad/s, |dq| limit."""
    max_temperature: float = 90.0
    """deg C, motor temperature limit (>= triggers damping)."""
    motor_fault_mask: int = setting(0xFFFFFFFF, Rule(low=0, high=0xFFFFFFFF, expected="a uint32 bit mask"))
    """Bits of MotorState.motorstate that count as a motor fault (`safety.MOTOR_FAULT_BITS` names the
    documented 16; all 32 by default, the undocumented ones included). The damping log names the bits."""
    damping_kd: float = -1.0
    """N m s/rad in damping (kp = 0); negative: the robot description's damping_kd. Capped per joint to
    stay stable under the PD path below (`gains.damping_gains`; the start-up log names the joints)."""
    pd_step: float = setting(0.001, POSITIVE)
    """s: step of the explicit PD law the node's commands meet, held over the step: this suite's bridge
    evaluates it in every 1 ms physics step (the robot's motor drivers faster still); Unitree's MuJoCo
    simulator once per SIMULATE_DT. The damping gain is capped for it, the policy's gains checked."""
    pd_delay_steps: int = setting(0, between(0, 10))
    """How many steps old the sensors that PD law reads are (Unitree's MuJoCo simulator: 1; the bridge: 0)."""
    shutdown_damping: float = setting(1.0, NON_NEGATIVE)
    """s of damping published after stop / SIGINT / SIGTERM before exiting."""
    events: str = ""
    """Path of a JSON-lines log of phase transitions and safety events; empty: log only."""

    def __post_init__(self) -> None:
        validate_config(self, f"{NODE_NAME}.")

    def check_relations(self) -> None:
        period = 1.0 / self.writer_hz
        check(self.writer_spin < period, "writer_spin", self.writer_spin, "not shorter than the writer period",
              f"a spin shorter than the writer period ({period:g} s)")
