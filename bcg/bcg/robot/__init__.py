"""The G1 as every part of the suite sees it: model location, SDK motor slots, description."""
from .description import FOOT_JOINTS, RobotDescription, RobotDescriptionError
from .model_path import ENV_VAR as MODEL_ENV_VAR, ModelNotFoundError, resolve_model_path
from .sdk_joints import MODE_MACHINE, NUM_MOTOR_SLOTS, SDK_JOINT_NAMES

__all__ = ["FOOT_JOINTS", "MODE_MACHINE", "MODEL_ENV_VAR", "ModelNotFoundError", "NUM_MOTOR_SLOTS",
           "RobotDescription", "RobotDescriptionError", "SDK_JOINT_NAMES", "resolve_model_path"]
