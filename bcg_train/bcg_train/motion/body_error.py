"""How far a pose's bodies are from the reference's: the training environment's failure test and
the evaluation's tracking error share this one definition (numpy arrays or torch tensors alike)."""
from typing import Any


def mean_body_error(body_pos: Any, ref_body_pos: Any, without_drift: bool) -> Any:
    """(...,) m: the mean over bodies of the position error between two poses' bodies (..., B, 3)
    (world frame, root first). `without_drift`: each pose shifted so that its root is over the
    origin (posture, height and heading count; the root's horizontal offset does not)."""
    d = body_pos - ref_body_pos
    horizontal, vertical = d[..., :2], d[..., 2]
    if without_drift:
        horizontal = horizontal - horizontal[..., :1, :]
    return (((horizontal ** 2).sum(-1) + vertical ** 2) ** 0.5).mean(-1)
