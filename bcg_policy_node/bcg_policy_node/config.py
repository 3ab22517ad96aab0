"""Typed parameters of the policy node: dataclass defaults < `--params` YAML (`ros__parameters`) <
the ROS 2 command line's `--params-file` / `-p` < the node's own flags (`bcg.ros_params.layered_parameters`).

The same YAML (config/policy_node.yaml) is passed to the ROS 2 node by the launch files and read by
the direct-DDS entry point. Every bad value raises `ConfigError` naming the key.
"""
import math
from dataclasses import dataclass, fields

from bcg.config_check import check

NODE_NAME = "policy_node"
"""The node's name: its ROS 2 node name and its section in a parameter file."""
ROS_EXECUTABLE = "policy_node"
"""The executable `ros2 run` / `ros2 launch` start (setup.py); started as it, the node is a ROS 2 node."""
LOGGER_NAME = "bcg_policy_node"
"""The std logger every module of the node logs to (routed to rclpy's logger in a ROS 2 node)."""
ROBOT_DOMAIN = 0
"""The DDS domain when `domain` is -1 outside ROS 2 (or ROS_DOMAIN_ID is unset): the robot's."""


@dataclass(frozen=True)
class PolicyNodeConfig:
    policy: str = ""
    """Path of the ONNX policy; empty: the built-in zero-action stand policy (holds the default pose)."""
    motion: str = ""
    """Reference motion (.csv LAFAN1 / .npz) for the policy's reference terms; empty: none."""
    model: str = ""
    """G1 MuJoCo XML (joint names, limits); empty: $BCG_G1_MODEL."""
    transport: str = "auto"
    """'auto': ROS 2 in a ROS 2 node (started by ros2 run / ros2 launch, or with --ros-args), else
    Cyclone DDS directly; 'ros2' or 'dds' to insist (`bcg.transport.endpoint`)."""
    domain: int = -1
    """DDS domain id (0 on the robot, 1 in simulation); -1: $ROS_DOMAIN_ID in a ROS 2 node, else 0."""
    interface: str = ""
    """Network interface ('lo': loopback with unicast peer 127.0.0.1); empty: Cyclone's choice."""
    autostart: bool = False
    """Leave zero torque and start the policy without the remote (simulation only)."""
    autostart_hold: float = 0.5
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
    ramp_duration: float = 2.0
    """s, ramp from the measured pose to the default pose (with the hold gains: the stand policy's)."""
    blend_duration: float = 0.25
    """s of BLEND after HOLD: the policy runs while the command's targets and gains go from the hold's
    (default pose, the stand policy's gains) to the policy's; 0: at once. Measured (the six shipped
    kappa-300 SHAC policies, 5 seeds, 15 s, this suite's physics and Unitree's command path): 0 and
    0.25 s: no fall in 120 runs; 0.5 s: walk fell in 6 of 7 (it steps at once, against the stiff hold)."""
    writer_hz: float = 500.0
    """Hz, LowCmd write rate (deadline schedule, in a process of its own)."""
    writer_spin: float = 0.0
    """s before each write deadline that the writer spins on the clock instead of sleeping (0: sleep
    only). Measured on 2 cores (bench/bench_policy_node.py): 0.2 ms of spin did not lower the p99
    lateness under SCHED_FIFO and took CPU from the policy step; it may help without SCHED_FIFO on a
    machine with idle cores."""
    realtime_priority: int = 10
    """SCHED_FIFO priority (1..98) of the LowState receiver / policy thread; the LowCmd writer gets one
    more. Best effort: without root or an rtprio limit it is refused and logged. 0: normal scheduling.
    Measured on 2 cores: writer lateness p99 0.02-0.2 ms with it, 0.3-2 ms without."""
    receiver_cpu: int = -1
    """CPU the LowState receiver / policy thread is pinned to (best effort); -1: any."""
    writer_cpu: int = -1
    """CPU the LowCmd writer process is pinned to (best effort); -1: any. Measured on 2 cores with
    receiver_cpu 0 / writer_cpu 1: LowState -> LowCmd p99 about 0.15 ms lower than unpinned."""
    check_state_crc: bool = True
    """Drop LowState whose CRC is wrong (turn off, or --no-state-crc, for senders that leave crc = 0,
    such as Unitree's MuJoCo simulator: config/policy_node_unitree_mujoco.yaml)."""
    stale_limit: float = 0.06
    """s: LowState older than this triggers damping. 60 ms (three policy periods) on the robot, whose
    LowState never pauses; a simulator on a desktop can (its viewer, a loaded machine), and its
    profile relaxes it (config/policy_node_unitree_mujoco.yaml)."""
    max_joint_velocity: float = 35.0
    """rad/s, |dq| limit."""
    max_temperature: float = 90.0
    """deg C, motor temperature limit (>= triggers damping)."""
    motor_fault_mask: int = 0xFFFFFFFF
    """Bits of MotorState.motorstate that count as a motor fault (`safety.MOTOR_FAULT_BITS` names the
    documented 16; all 32 by default, the undocumented ones included). The damping log names the bits."""
    damping_kd: float = -1.0
    """N m s/rad in damping (kp = 0); negative: the robot description's damping_kd. Capped per joint to
    stay stable under the PD path below (`gains.damping_gains`; the start-up log names the joints)."""
    pd_step: float = 0.001
    """s: step of the explicit PD law the node's commands meet, held over the step: this suite's bridge
    evaluates it in every 1 ms physics step (the robot's motor drivers faster still); Unitree's MuJoCo
    simulator once per SIMULATE_DT. The damping gain is capped for it, the policy's gains checked."""
    pd_delay_steps: int = 0
    """How many steps old the sensors that PD law reads are (Unitree's MuJoCo simulator: 1; the bridge: 0)."""
    shutdown_damping: float = 1.0
    """s of damping published after stop / SIGINT / SIGTERM before exiting."""
    events: str = ""
    """Path of a JSON-lines log of phase transitions and safety events; empty: log only."""

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            check(not isinstance(v, float) or math.isfinite(v), f"{NODE_NAME} parameter `{f.name}` = {v!r}",
                  "must be finite")
        checks = (("transport", self.transport in ("auto", "ros2", "dds"), "must be 'auto', 'ros2' or 'dds'"),
                  ("domain", -1 <= self.domain <= 232, "DDS domain ids are 0..232 (-1: unset)"),
                  ("writer_hz", self.writer_hz > 0, "must be > 0"),
                  ("writer_spin", 0 <= self.writer_spin < 1.0 / max(self.writer_hz, 1e-9), "must be >= 0 and "
                   "shorter than the writer period"),
                  ("realtime_priority", 0 <= self.realtime_priority <= 98, "must be 0 (off) or 1..98"),
                  ("receiver_cpu", self.receiver_cpu >= -1, "must be -1 (any) or a CPU number"),
                  ("writer_cpu", self.writer_cpu >= -1, "must be -1 (any) or a CPU number"),
                  ("stale_limit", self.stale_limit > 0, "must be > 0"),
                  ("max_joint_velocity", self.max_joint_velocity > 0, "must be > 0"),
                  ("ramp_duration", self.ramp_duration >= 0, "must be >= 0"),
                  ("blend_duration", self.blend_duration >= 0, "must be >= 0"),
                  ("autostart_hold", self.autostart_hold >= 0, "must be >= 0"),
                  ("shutdown_damping", self.shutdown_damping >= 0, "must be >= 0"),
                  ("pd_step", self.pd_step > 0, "must be > 0"),
                  ("pd_delay_steps", 0 <= self.pd_delay_steps <= 10, "must be 0..10"),
                  ("motor_fault_mask", 0 <= self.motor_fault_mask <= 0xFFFFFFFF, "must fit in uint32"))
        for key, ok, message in checks:
            check(ok, f"{NODE_NAME} parameter `{key}` = {getattr(self, key)!r}", message)
