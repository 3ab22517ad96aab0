"""Training presets: typed dataclasses whose defaults are the paper's settings, overridden by YAML.

This module is the composition root of training: each algorithm takes its own config (`ShacConfig`,
`PpoConfig`, `AddConfig`) and an environment, the environment its `ImitationEnvConfig` (which holds
the simulator's `SimConfig`), and `TrainConfig` holds them all with the runner's settings. A preset
is a YAML file under config/train/ (`paper`, `cpu-small`, `cpu-smoke`, ...) whose keys mirror
`TrainConfig` (sections `shac`, `ppo`, `add`, `runner`, `env`). Presets change sizes, never code
paths. Every bad key or value raises `ConfigError` naming the dotted key. `ALGORITHMS` is the one
registry of algorithms (the runner builds them from it, the exporter rebuilds their policies).
Importing this module loads torch (and rsl_rl), not Warp or MuJoCo.
"""
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Tuple, Union

from torch import nn

from bcg.config_check import (
    NON_NEGATIVE,
    NOT_EMPTY,
    POSITIVE,
    ConfigError,
    Settings,
    apply_overrides,
    check,
    one_of,
    read_yaml_mapping,
    setting,
)
from bcg.config_files import config_dir

from .algo.add import AddConfig
from .algo.ppo import Ppo, PpoConfig
from .algo.ppo import deployable_policy as ppo_policy
from .algo.shac import Shac, ShacConfig
from .algo.shac import deployable_policy as shac_policy
from .diffsim.config import upgraded_bundle
from .env_api import DiffEnv
from .imitation.config import ImitationEnvConfig


@dataclass
class RunnerConfig(Settings):
    """The loop around an algorithm: seed, checkpoints, logs."""

    seed: int = setting(0, NON_NEGATIVE)
    """Seed of every random number the trainer draws (the env seeds itself from it too)."""
    torch_threads: int = setting(0, NON_NEGATIVE)
    """CPU threads of torch's intra-op pool; 0 keeps torch's default (one per core)."""
    checkpoint_every: int = setting(50, POSITIVE)
    """Iterations between checkpoints (and learning-curve PNGs); the last iteration always saves."""
    curves_every: int = setting(100, POSITIVE)
    """Iterations between learning-curve PNG updates (they are also drawn when training stops)."""
    keep_checkpoints: int = setting(3, POSITIVE)
    """Newest checkpoints kept on disk (each holds the ADD replay buffer, ~buffer_size * F * 4 bytes)."""
    log_dir: str = setting("runs", NOT_EMPTY)
    """Folder under which each run gets its own folder."""
    init_from: str = ""
    """A new run starts from this policy file or checkpoint (what `--init-from` takes, which
    overrides it; a relative path is the workspace's, e.g. policies/shac_walk_k300.onnx). Empty:
    freshly initialised networks."""
    screen_every: int = setting(0, NON_NEGATIVE)
    """Iterations between MuJoCo screenings of the checkpoints while training runs (a multiple of
    `checkpoint_every`; `background_screen`); at the end the pick is exported to RUN/policy/. 0: none."""
    screen_seeds: int = setting(2, POSITIVE)
    """MuJoCo runs per checkpoint and start in those screenings."""
    screen_patience: int = setting(0, NON_NEGATIVE)
    """Stop training (as Ctrl-C would, checkpoint saved) once this many checkpoints screened after the
    pick (a standing one that tracks best) have not beaten it. 0: train every planned iteration."""

    def check_relations(self) -> None:
        check(self.screen_every % self.checkpoint_every == 0, "screen_every", self.screen_every,
              f"not a multiple of checkpoint_every ({self.checkpoint_every})", "a multiple of checkpoint_every")


@dataclass(frozen=True)
class AlgorithmEntry:
    """How the runner builds an algorithm and the exporter its deployable policy, from a TrainConfig."""

    build: Callable[[DiffEnv, "TrainConfig"], Any]
    """(env, cfg) -> the algorithm (its networks initialised from torch's global seed)."""
    policy: Callable[[dict, "TrainConfig", int, int], nn.Module]
    """(checkpoint's algorithm state, cfg, obs_dim, act_dim) -> the deterministic policy on the CPU."""


ALGORITHMS: Dict[str, AlgorithmEntry] = {
    "shac": AlgorithmEntry(build=lambda env, cfg: Shac(env, cfg.shac, cfg.add, cfg.runner.seed),
                           policy=lambda state, cfg, o, a: shac_policy(state, cfg.shac, o, a)),
    "ppo": AlgorithmEntry(build=lambda env, cfg: Ppo(env, cfg.ppo, cfg.add, cfg.runner.seed),
                          policy=lambda state, cfg, o, a: ppo_policy(state, cfg.ppo, o, a)),
}
"""The algorithms, by the name `TrainConfig.algorithm` and `--algo` take."""


@dataclass
class TrainConfig(Settings):
    """A whole training run."""

    algorithm: str = setting("shac", one_of(*ALGORITHMS))
    """'shac' (through the differentiable simulator) or 'ppo' (the baseline): a key of ALGORITHMS."""
    shac: ShacConfig = field(default_factory=ShacConfig)
    ppo: PpoConfig = field(default_factory=PpoConfig)
    add: AddConfig = field(default_factory=AddConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    env: ImitationEnvConfig = field(default_factory=ImitationEnvConfig)
    """The G1 imitation environment (simulator with contact and bundling, reward terms, terminations)."""

    @property
    def bundle(self) -> bool:
        """Whether the training simulator bundles contact gradients (`env.sim.bundle.enabled`)."""
        return self.env.sim.bundle.enabled

    def num_envs(self) -> int:
        """Environments for this run's algorithm (SHAC doubles them without bundling, as the paper)."""
        if self.algorithm == "ppo":
            return self.ppo.num_envs
        return self.shac.num_envs if self.bundle else self.shac.num_envs_without_bundle

    def iterations(self) -> int:
        """Iterations this run's algorithm is planned for."""
        return getattr(self, self.algorithm).iterations

    def with_iterations(self, iterations: int) -> "TrainConfig":
        """A copy whose algorithm runs `iterations` iterations in all."""
        section = getattr(self, self.algorithm)
        return dataclasses.replace(self, **{self.algorithm: dataclasses.replace(section, iterations=iterations)})

    def to_dict(self) -> dict:
        """Plain nested dicts and lists (YAML/JSON-able; `config_from_dict` reads it back)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))


def preset_dir() -> Path:
    """config/train/ of the workspace (or of the installed bcg share folder)."""
    return config_dir() / "train"


EXTENDS_KEY = "extends"
"""A preset file's key naming the preset it is written on top of (its other keys override that one's)."""


def load_preset(name: Union[str, Path]) -> TrainConfig:
    """The preset `name` (a file stem in config/train/, or a path to a YAML file), validated. A
    preset with `extends: OTHER` is OTHER (a stem in config/train/) with its own keys applied on top."""
    cfg, path = _preset(name, ())
    try:
        cfg.validate()
    except ConfigError as e:
        raise ConfigError(f"{e} (in {path})") from None
    return cfg


def _preset(name: Union[str, Path], chain: Tuple[Path, ...]) -> Tuple[TrainConfig, Path]:
    """(the preset `name`, not yet validated, its file); `chain` the files that extend it."""
    path = Path(name)
    if path.suffix not in (".yaml", ".yml"):
        path = preset_dir() / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in preset_dir().glob("*.yaml")) if preset_dir().is_dir() else []
        raise ConfigError(f"preset: {name!r} not found ({path}); known presets: {', '.join(known) or 'none'}")
    if path.resolve() in chain:
        raise ConfigError(f"{EXTENDS_KEY}: presets extend each other in a loop: "
                          f"{' -> '.join(p.stem for p in chain + (path.resolve(),))}")
    data = read_yaml_mapping(path)
    base = data.pop(EXTENDS_KEY, None)
    start = _preset(str(base), chain + (path.resolve(),))[0] if base is not None else TrainConfig()
    try:
        return apply_overrides(start, data), path
    except ConfigError as e:
        raise ConfigError(f"{e} (in {path})") from None


def config_from_dict(data: Mapping[str, Any]) -> TrainConfig:
    """Rebuild a validated TrainConfig from `TrainConfig.to_dict()` (e.g. stored in a checkpoint; keys
    stored before they moved read at their place now: `diffsim.config.upgraded_bundle`)."""
    env = data.get("env")
    sim = env.get("sim") if isinstance(env, Mapping) else None
    if isinstance(sim, Mapping) and isinstance(sim.get("bundle"), Mapping):
        data = {**data, "env": {**env, "sim": {**sim, "bundle": upgraded_bundle(sim["bundle"])}}}
    cfg = apply_overrides(TrainConfig(), data)
    cfg.validate()
    return cfg


def recorded_schedule(run_info: Mapping[str, Any], cfg: TrainConfig) -> List[List[int]]:
    """A run's schedule as `bcg-train` records it in the run info: [first iteration, iterations
    planned] per start and extension. A run that records none (its checkpoints predate schedules)
    is taken as never extended: [[0, cfg.iterations()]]."""
    return [[int(first), int(planned)] for first, planned in run_info.get("schedule", [[0, cfg.iterations()]])]
