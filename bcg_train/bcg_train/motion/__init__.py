"""Reference motions for training: clips at the control rate with velocities and body frames.

    from bcg_train.motion.kinematics import RobotKinematics
    from bcg_train.motion.library import load_clip

    kinematics = RobotKinematics(RobotDescription.load())
    clip = load_clip("run", kinematics)   # a named real segment, synthetic_run, or FILE.csv@START:END ...
    tensors = clip.to_torch("cuda:0")

Modules: `clip` (MotionClip), `resample` (ResampleConfig, build_clip), `kinematics` (forward and leg
inverse kinematics), `library` (what a `--motion` name means: load_clip, motion_source,
write_builtin_motions), `synthetic` (the built-in synthetic_run, _jump, _fight and _dance), `checks`
(check_clip and check_builtin for the built-in motions, check_file_motion for motion files),
`preview` (pictures); `python -m bcg_train.motion` writes, checks and pictures motions.

Reading and checking files, the named segments and their folder are `bcg.motion` (shared with the
policy node and the bridge); this package adds what training alone needs. It imports nothing here,
so that the command line can choose MuJoCo's offscreen GL backend before mujoco is first imported.
"""
