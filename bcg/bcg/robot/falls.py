"""When the G1 has fallen: the one definition the trainer's terminations, the evaluations and the
bridge's verdicts share."""

FALL_HEIGHT = 0.3
"""m: the robot has fallen when its pelvis is below this height (docs/method.md: the paper's sim-to-sim
criterion; also the training environment's failure height)."""
