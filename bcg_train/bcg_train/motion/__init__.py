"""Reference motions for training: clips at the control rate with velocities and body frames.

    from bcg_train.motion.kinematics import RobotKinematics
    from bcg_train.motion.library import load_clip

    kinematics = RobotKinematics(RobotDescription.load())
    clip = load_clip("run", kinematics)          # or a LAFAN1 .csv / BeyondMimic .npz path
    tensors = clip.to_torch("cuda:0")

Modules: `clip` (MotionClip), `resample` (ResampleConfig, build_clip), `kinematics` (forward and leg
inverse kinematics), `library` (load_clip, write_builtin_motions), `synthetic` (the built-in run,
jump, fight and dance), `checks` (check_clip, check_builtin), `preview` (pictures);
`python -m bcg_train.motion` writes, checks and pictures the built-in motions.

Loading and checking files is `bcg.contract.motion` (shared with the policy node and the bridge);
this package adds what training alone needs. It imports nothing here, so that the command line can
choose MuJoCo's offscreen GL backend before mujoco is first imported.
"""
