"""Training presets: typed dataclasses whose defaults are the paper's settings, overridden by YAML.

A preset is a YAML file under config/train/ (`paper`, `cpu-small`, `cpu-smoke`, ...) whose keys
mirror `TrainConfig` (sections `shac`, `ppo`, `add`, `runner`). Presets change sizes, never code
paths. Every bad key or value raises `ConfigError` naming the dotted key.
"""
import dataclasses
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Tuple, Union

import yaml

from .imitation.config import EnvConfigError, ImitationEnvConfig


class ConfigError(ValueError):
    """A preset key is unknown or its value is invalid; the message starts with the dotted key."""


def _check(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"{key}: {message}")


def _positive(cfg, *names: str) -> None:
    for n in names:
        _check(getattr(cfg, n) > 0, n, f"must be > 0, got {getattr(cfg, n)!r}")


def _fraction(cfg, *names: str) -> None:
    for n in names:
        _check(0.0 <= getattr(cfg, n) <= 1.0, n, f"must be in [0, 1], got {getattr(cfg, n)!r}")


def _layers(cfg, *names: str) -> None:
    for n in names:
        _check(len(getattr(cfg, n)) > 0 and all(h > 0 for h in getattr(cfg, n)), n,
               f"must be a non-empty list of positive layer widths, got {list(getattr(cfg, n))!r}")


@dataclass
class ShacConfig:
    """SHAC (Xu et al. 2022) with the BCG paper's settings."""

    num_envs: int = 64
    """Parallel environments when bundling is on."""
    num_envs_without_bundle: int = 128
    """Parallel environments with `--no-bundle` (the paper doubles them)."""
    horizon: int = 32
    """Control steps per window (gradients are cut between windows)."""
    iterations: int = 3000
    """Windows (= actor updates) in a run."""
    gamma: float = 0.99
    """Discount per control step."""
    lam: float = 0.95
    """TD(lambda) mixing of the critic targets."""
    actor_lr: float = 5e-3
    """Actor Adam learning rate at iteration 0, decaying linearly to `final_lr`."""
    critic_lr: float = 2e-3
    """Critic Adam learning rate at iteration 0, decaying linearly to `final_lr`."""
    final_lr: float = 1e-5
    """Learning rate both reach at the last iteration."""
    betas: Tuple[float, float] = (0.7, 0.95)
    """Adam betas of actor and critic."""
    actor_grad_clip: float = 1.0
    """Global gradient-norm clip of the actor."""
    critic_grad_clip: float = 10.0
    """Global gradient-norm clip of the critic ensemble."""
    critic_iterations: int = 16
    """Passes over a window's samples per critic update."""
    critic_minibatches: int = 4
    """Minibatches per pass."""
    target_polyak: float = 0.995
    """Target critic <- polyak * target + (1 - polyak) * critic, once per iteration."""
    actor_hidden: Tuple[int, ...] = (512, 256, 128)
    """Actor MLP hidden widths (Linear, ELU, LayerNorm each)."""
    critic_hidden: Tuple[int, ...] = (256, 256)
    """Critic MLP hidden widths, per ensemble member."""
    critic_ensemble: int = 3
    """Critics in the ensemble; bootstraps take their minimum."""
    init_action_std: float = 1.0
    """Initial standard deviation of the Gaussian policy (raw action units)."""

    def validate(self) -> None:
        _positive(self, "num_envs", "num_envs_without_bundle", "horizon", "iterations", "actor_lr", "critic_lr",
                  "final_lr", "actor_grad_clip", "critic_grad_clip", "critic_iterations", "critic_minibatches",
                  "critic_ensemble", "init_action_std")
        _fraction(self, "gamma", "lam", "target_polyak")
        _layers(self, "actor_hidden", "critic_hidden")
        _check(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas), "betas",
               f"must be two numbers in [0, 1), got {list(self.betas)!r}")
        _check(self.num_envs * self.horizon >= self.critic_minibatches, "critic_minibatches",
               f"{self.critic_minibatches} minibatches exceed num_envs * horizon = {self.num_envs * self.horizon}")


@dataclass
class PpoConfig:
    """The PPO baseline (rsl-rl-lib), no gradients through the simulator."""

    num_envs: int = 4096
    """Parallel environments (the paper's PPO baseline)."""
    steps_per_env: int = 24
    """Control steps per environment per iteration."""
    iterations: int = 3000
    """PPO iterations in a run."""
    learning_rate: float = 1e-3
    """Initial Adam learning rate (adapted to `desired_kl`)."""
    desired_kl: float = 0.01
    """KL target of rsl_rl's adaptive learning-rate schedule."""
    gamma: float = 0.99
    """Discount per control step."""
    lam: float = 0.95
    """GAE lambda."""
    learning_epochs: int = 5
    """Passes over a rollout per update."""
    mini_batches: int = 4
    """Minibatches per pass."""
    clip_param: float = 0.2
    """PPO ratio clip."""
    entropy_coef: float = 0.01
    """Entropy bonus weight (rsl_rl's default)."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip."""
    actor_hidden: Tuple[int, ...] = (512, 256, 128)
    """Actor MLP hidden widths (ELU; rsl_rl's MLP has no LayerNorm)."""
    critic_hidden: Tuple[int, ...] = (512, 256, 128)
    """Critic MLP hidden widths."""
    init_action_std: float = 1.0
    """Initial standard deviation of the Gaussian policy."""

    def validate(self) -> None:
        _positive(self, "num_envs", "steps_per_env", "iterations", "learning_rate", "desired_kl", "learning_epochs",
                  "mini_batches", "clip_param", "max_grad_norm", "init_action_std")
        _fraction(self, "gamma", "lam")
        _check(self.entropy_coef >= 0, "entropy_coef", f"must be >= 0, got {self.entropy_coef!r}")
        _layers(self, "actor_hidden", "critic_hidden")


@dataclass
class AddConfig:
    """ADD, the adversarial differential discriminator (Zhang et al. 2025), as in MimicKit's G1 agent."""

    reward_scale: float = 2.0
    """Multiplier of r = -log(max(1 - sigmoid(D(delta)), 1e-4)) (MimicKit's G1 `disc_reward_scale`)."""
    hidden: Tuple[int, ...] = (1024, 512)
    """Discriminator hidden widths, ReLU (MimicKit's `fc_2layers_1024units` is 1024 then 512)."""
    learning_rate: float = 2.5e-4
    """SGD learning rate of the discriminator."""
    momentum: float = 0.9
    """SGD momentum (MimicKit's SGD)."""
    weight_decay: float = 1e-4
    """SGD weight decay (MimicKit's G1 discriminator optimiser)."""
    logit_reg: float = 0.01
    """Weight of the squared L2 norm of the logit layer's weights."""
    grad_penalty: float = 2.0
    """Weight of the gradient penalty (mean squared input-gradient norm, positives and negatives)."""
    epochs: int = 2
    """Passes over an iteration's deltas per discriminator update."""
    minibatches: int = 16
    """Minibatches per epoch; each adds as many replayed deltas as it has policy deltas (MimicKit's G1
    agent: 32 steps of deltas in batches of 2 x num_envs, i.e. 16)."""
    buffer_size: int = 200_000
    """Replay buffer capacity (deltas)."""
    replay_samples: int = 1000
    """Deltas pushed into a full replay buffer per iteration (all of them until it is full)."""
    min_diff: float = 1e-4
    """Floor of the running mean |delta| used to normalise each feature."""

    def validate(self) -> None:
        _positive(self, "reward_scale", "learning_rate", "epochs", "minibatches", "buffer_size", "replay_samples",
                  "min_diff")
        for n in ("momentum", "weight_decay", "logit_reg", "grad_penalty"):
            _check(getattr(self, n) >= 0, n, f"must be >= 0, got {getattr(self, n)!r}")
        _layers(self, "hidden")


@dataclass
class RunnerConfig:
    """The loop around an algorithm: seed, checkpoints, logs."""

    seed: int = 0
    """Seed of every random number the trainer draws (the env seeds itself from it too)."""
    torch_threads: int = 0
    """CPU threads of torch's intra-op pool; 0 keeps torch's default (one per core)."""
    checkpoint_every: int = 50
    """Iterations between checkpoints (and learning-curve PNGs); the last iteration always saves."""
    curves_every: int = 100
    """Iterations between learning-curve PNG updates (they are also drawn when training stops)."""
    keep_checkpoints: int = 3
    """Newest checkpoints kept on disk (each holds the ADD replay buffer, ~buffer_size * F * 4 bytes)."""
    log_dir: str = "runs"
    """Folder under which each run gets its own folder."""

    def validate(self) -> None:
        _positive(self, "checkpoint_every", "curves_every", "keep_checkpoints")
        _check(self.seed >= 0, "seed", f"must be >= 0, got {self.seed!r}")
        _check(self.torch_threads >= 0, "torch_threads", f"must be >= 0, got {self.torch_threads!r}")
        _check(bool(self.log_dir), "log_dir", "must not be empty")


ALGORITHMS = ("shac", "ppo")


@dataclass
class TrainConfig:
    """A whole training run."""

    algorithm: str = "shac"
    """'shac' (through the differentiable simulator) or 'ppo' (the baseline)."""
    shac: ShacConfig = field(default_factory=ShacConfig)
    ppo: PpoConfig = field(default_factory=PpoConfig)
    add: AddConfig = field(default_factory=AddConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    env: ImitationEnvConfig = field(default_factory=ImitationEnvConfig)
    """The G1 imitation environment (simulator, contact, bundling, reward terms, terminations)."""

    def validate(self) -> None:
        _check(self.algorithm in ALGORITHMS, "algorithm", f"must be one of {ALGORITHMS}, got {self.algorithm!r}")
        for name in ("shac", "ppo", "add", "runner"):
            try:
                getattr(self, name).validate()
            except ConfigError as e:
                raise ConfigError(f"{name}.{e}") from None
        try:
            self.env.validate()
        except EnvConfigError as e:
            raise ConfigError(str(e)) from None

    def num_envs(self, bundle: bool) -> int:
        """Environments for this run's algorithm (SHAC doubles them without bundling, as the paper)."""
        if self.algorithm == "ppo":
            return self.ppo.num_envs
        return self.shac.num_envs if bundle else self.shac.num_envs_without_bundle

    def to_dict(self) -> dict:
        """Plain nested dicts and lists (YAML/JSON-able; `config_from_dict` reads it back)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))


def _convert(value: Any, hint: Any, key: str) -> Any:
    """`value` (from YAML) as type `hint`; ConfigError naming `key` when it does not fit."""
    if hint is bool:
        _check(isinstance(value, bool), key, f"expected true/false, got {value!r}")
        return value
    if hint is int:
        _check(isinstance(value, int) and not isinstance(value, bool), key, f"expected an integer, got {value!r}")
        return value
    if hint is float:
        _check(isinstance(value, (int, float)) and not isinstance(value, bool), key, f"expected a number, got {value!r}")
        return float(value)
    if hint is str:
        _check(isinstance(value, str), key, f"expected a string, got {value!r}")
        return value
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        _check(isinstance(value, (list, tuple)), key, f"expected a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], f"{key}[{i}]") for i, v in enumerate(value))
        _check(len(value) == len(args), key, f"expected {len(args)} values, got {len(value)}")
        return tuple(_convert(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    raise TypeError(f"{key}: unsupported field type {hint!r}")


def apply_overrides(cfg: Any, overrides: Mapping[str, Any], prefix: str = "") -> Any:
    """A copy of dataclass `cfg` with `overrides` (nested mappings, as in YAML) applied."""
    if not isinstance(overrides, Mapping):
        raise ConfigError(f"{prefix.rstrip('.') or '<top level>'}: expected a mapping of keys, got {overrides!r}")
    hints = typing.get_type_hints(type(cfg))
    names = [f.name for f in dataclasses.fields(cfg)]
    changes = {}
    for key, value in overrides.items():
        dotted = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(f"{dotted}: unknown key (known: {', '.join(names)})")
        current = getattr(cfg, key)
        if dataclasses.is_dataclass(current):
            changes[key] = apply_overrides(current, value, f"{dotted}.")
        else:
            changes[key] = _convert(value, hints[key], dotted)
    return dataclasses.replace(cfg, **changes)


def preset_dir() -> Path:
    """config/train/ of the workspace (or of the installed bcg share folder)."""
    from bcg.config_files import config_dir
    return config_dir() / "train"


def load_preset(name: Union[str, Path]) -> TrainConfig:
    """The preset `name` (a file stem in config/train/, or a path to a YAML file), validated."""
    path = Path(name)
    if path.suffix not in (".yaml", ".yml"):
        path = preset_dir() / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in preset_dir().glob("*.yaml")) if preset_dir().is_dir() else []
        raise ConfigError(f"preset: {name!r} not found ({path}); known presets: {', '.join(known) or 'none'}")
    try:
        return config_from_dict(yaml.safe_load(path.read_text()) or {})
    except ConfigError as e:
        raise ConfigError(f"{e} (in {path})") from None


def config_from_dict(data: Mapping[str, Any]) -> TrainConfig:
    """Rebuild a validated TrainConfig from `TrainConfig.to_dict()` (e.g. stored in a checkpoint)."""
    cfg = apply_overrides(TrainConfig(), data)
    cfg.validate()
    return cfg
