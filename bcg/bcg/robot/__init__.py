"""The G1 as every part of the suite sees it: model location, SDK motor slots, description.

The description (`RobotDescription`, `RobotDescriptionError`, `FOOT_JOINTS`) is read from the MuJoCo
model, so `description.py` imports MuJoCo; it is imported here on first use only (PEP 562), so that
what needs no model (the policy node's 500 Hz LowCmd writer process: the SDK slot table) never loads
MuJoCo. `pd_stability` is plain numpy.
"""
from .falls import FALL_HEIGHT
from .model_path import ENV_VAR as MODEL_ENV_VAR
from .model_path import ModelNotFoundError, resolve_model_path
from .sdk_joints import MODE_MACHINE, NUM_MOTOR_SLOTS, SDK_JOINT_NAMES

_FROM_DESCRIPTION = ("FOOT_JOINTS", "RobotDescription", "RobotDescriptionError")


def __getattr__(name: str):
    if name in _FROM_DESCRIPTION:
        from . import description
        return getattr(description, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["FALL_HEIGHT", "FOOT_JOINTS", "MODE_MACHINE", "MODEL_ENV_VAR", "ModelNotFoundError", "NUM_MOTOR_SLOTS",
           "RobotDescription", "RobotDescriptionError", "SDK_JOINT_NAMES", "resolve_model_path"]
