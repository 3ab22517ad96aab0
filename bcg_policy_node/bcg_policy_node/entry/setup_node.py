"""Everything the node checks before it sends anything: config, robot, policy, motion -> Controller.

Shared by the direct-DDS and the ROS 2 paths (`run_node.run`). Every refusal
is a `StartupError` whose message names the problem; the entry points exit non-zero on it.
"""
import logging

from bcg.config_check import ConfigError
from bcg.contract import CheckedPolicies, PolicyFileError, load_policy, stand_policy_path
from bcg.motion import MotionFileError, load_motion
from bcg.robot import ModelNotFoundError, RobotDescription, RobotDescriptionError
from bcg.robot.pd_stability import PdPath

from ..config import LOGGER_NAME, PolicyNodeConfig
from ..core.controller import Controller
from ..core.gains import damping_gains, hold_gain_warning, policy_gain_warning
from ..core.joint_map import JointMapError
from ..core.safety import SafetyLimits
from ..core.state_machine import StateMachine

WRITER_NODE_NAME = "policy_node_lowcmd_writer"
"""ROS 2 node name of the LowCmd writer process (it needs a node of its own)."""


log = logging.getLogger(LOGGER_NAME)


class StartupError(RuntimeError):
    """The node refuses to run; nothing was published."""


def build_controller(config: PolicyNodeConfig, on_transition=None) -> Controller:
    """Load and cross-check robot, policy and motion; raise StartupError naming what is wrong. The
    damping gain is capped, and the hold's and the policy's gains checked, for the declared PD path (logged).
    The robot description is built from the model compiled without the meshes it does not depend on, and
    a policy file whose bytes passed the full check before is not checked by onnx again (the verdicts
    in the cache folder): the same description and the same refusals, in less than half the start-up."""
    try:
        robot = RobotDescription.load(config.model or None, meshes=False)       # the same description, sooner
        policy = load_policy(config.policy or stand_policy_path(robot), checked=CheckedPolicies())
        motion = load_motion(config.motion) if config.motion else None
        limits = SafetyLimits(max_joint_velocity=config.max_joint_velocity, max_temperature=config.max_temperature,
                              motor_fault_mask=config.motor_fault_mask, stale_limit_s=config.stale_limit)
        machine = StateMachine(ramp_duration_s=config.ramp_duration, autostart=config.autostart,
                               autostart_hold_s=config.autostart_hold, blend_duration_s=config.blend_duration)
        path = PdPath(config.pd_step, config.pd_delay_steps)
        kd, capped = damping_gains(robot, config.damping_kd if config.damping_kd >= 0 else robot.damping_kd, path)
        controller = Controller(policy, robot, limits, machine, kd, motion, on_transition, config.align_heading)
        for note, level in ((capped, logging.INFO), (hold_gain_warning(robot, path), logging.WARNING),
                            (policy_gain_warning(policy.contract, robot, path), logging.WARNING)):
            if note is not None:
                log.log(level, "%s", note)
        return controller
    except (ConfigError, PolicyFileError, MotionFileError, JointMapError, ModelNotFoundError,
            RobotDescriptionError, ValueError) as e:
        raise StartupError(str(e)) from None
