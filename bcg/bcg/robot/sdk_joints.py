"""The Unitree SDK's motor slots for the G1 (the order of `motor_cmd` / `motor_state`)."""

NUM_MOTOR_SLOTS = 35
"""Length of LowCmd.motor_cmd and LowState.motor_state; slots 29-34 are unused on the G1."""

SDK_JOINT_NAMES = (
    "left_hip_pitch_joint", "left_hip_roll_joint", "left_hip_yaw_joint",
    "left_knee_joint", "left_ankle_pitch_joint", "left_ankle_roll_joint",
    "right_hip_pitch_joint", "right_hip_roll_joint", "right_hip_yaw_joint",
    "right_knee_joint", "right_ankle_pitch_joint", "right_ankle_roll_joint",
    "waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint",
    "left_shoulder_pitch_joint", "left_shoulder_roll_joint", "left_shoulder_yaw_joint",
    "left_elbow_joint", "left_wrist_roll_joint", "left_wrist_pitch_joint", "left_wrist_yaw_joint",
    "right_shoulder_pitch_joint", "right_shoulder_roll_joint", "right_shoulder_yaw_joint",
    "right_elbow_joint", "right_wrist_roll_joint", "right_wrist_pitch_joint", "right_wrist_yaw_joint",
)
"""Joint name driven by SDK motor slot i (29-DoF G1). Slot of a joint: `SDK_JOINT_NAMES.index(name)`."""

MODE_MACHINE = {29: 5, 23: 4}
"""`mode_machine` the robot reports, by number of valid joints (5: 29-DoF rev 1.0, 4: 23-DoF)."""
