"""What the motion loader raises and warns."""


class MotionFileError(ValueError):
    """A motion file, its reading options or a motion name is wrong; the message names the file (row,
    column) or the option, and the problem."""


class MotionDirNotFoundError(MotionFileError):
    """A named segment was asked for and no folder of real motion files is known; the message names
    the flag and the environment variable that give one."""


class JointLimitWarning(UserWarning):
    """Joint angles outside the limits were clipped (`load_motion(..., clip_to_limits=True)`)."""
