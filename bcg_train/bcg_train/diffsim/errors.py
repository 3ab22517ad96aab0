"""The simulator's errors: one set of classes for both precisions (every module is loaded once,
diffsim.precision), so `except diffsim.NonFiniteStateError` catches the float32 simulator's too."""
from typing import List


class ModelError(ValueError):
    """The MuJoCo model has a structure this simulator does not support; the message says which."""


class NonFiniteStateError(FloatingPointError):
    """The simulation produced NaN or Inf; `env_ids` lists the environments affected."""

    def __init__(self, env_ids: List[int]):
        self.env_ids = list(env_ids)
        super().__init__(f"non-finite state in {len(self.env_ids)} environment(s): {self.env_ids[:20]}")


class TapeRequiredError(RuntimeError):
    """A simulator built with requires_grad=True was stepped with no simulator tape active
    (`bcg_train.diffsim.Tape`; a plain wp.Tape would not record the simulator's own adjoints)."""


class StaleTapeError(RuntimeError):
    """A backward pass ran through steps taped before their segment's last `cut()`: the buffers and
    launch sites they recorded serve later steps since, so the gradient would be another step's."""
