"""Reference motions as files, shared by the policy node, the MuJoCo bridge and training.

Modules: `reference` (ReferenceMotion in memory, ReferenceFrames samples, quaternion helpers),
`source` (MotionSource: a file with a time window and reading options, and its string form
`PATH[@START:END][,fps=HZ][,joint_order=sdk|isaaclab][,despike=RAD_S]`), `files` (load_motion,
save_motion_csv: Unitree LAFAN1 CSV, BeyondMimic / mjlab npz, this suite's npz), `spikes` (velocity
spikes from retargeting: find, repair), `segments` (the named real-motion segments of
config/motions.yaml and the folder of their files: --motion-dir, $BCG_MOTION_DIR), `errors`.
Nothing here imports onnx (the policy contract, `bcg.contract`, is separate).
"""
from .errors import JointLimitWarning, MotionDirNotFoundError, MotionFileError
from .files import LAFAN1_FPS, JointLimits, load_motion, save_motion_csv
from .reference import ReferenceFrames, ReferenceMotion
from .source import MotionSource

__all__ = ["JointLimitWarning", "JointLimits", "LAFAN1_FPS", "MotionDirNotFoundError", "MotionFileError",
           "MotionSource", "ReferenceFrames", "ReferenceMotion", "load_motion", "save_motion_csv"]
