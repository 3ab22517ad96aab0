"""The G1 imitation environment: reference motion tracking on the differentiable simulator."""
import copy
import dataclasses

from .config import EnvConfigError, ImitationEnvConfig
from .env import G1ImitationEnv
from .features import PoseState, add_features, feature_dim


def make_env(preset, motion: str, kappa, bundle: bool, device: str) -> G1ImitationEnv:
    """The environment a training preset asks for: `preset.env` (an ImitationEnvConfig) with `kappa`
    (None: the preset's) and bundling on or off, `preset.num_envs(bundle)` environments seeded from
    `preset.runner.seed`."""
    cfg = copy.deepcopy(preset.env)
    if kappa is not None:
        cfg.kappa = float(kappa)
    cfg.bundle = dataclasses.replace(cfg.bundle, enabled=bool(bundle))
    return G1ImitationEnv(cfg, motion, preset.num_envs(bundle), device, seed=preset.runner.seed)


__all__ = ["EnvConfigError", "G1ImitationEnv", "ImitationEnvConfig", "PoseState", "add_features", "feature_dim",
           "make_env"]
