"""Checkpoint files: written atomically (temp file in the same folder, fsync, os.replace), so a crash
or Ctrl-C while writing leaves the previous file intact; read onto the CPU. torch is imported where a
file is written or read: naming and finding checkpoints (the command lines) does not load it."""
import re
from pathlib import Path
from typing import Collection, List, Union

from bcg.atomic_file import write_atomic

PathLike = Union[str, Path]
CHECKPOINT_DIR = "checkpoints"
"""A run folder's subfolder of checkpoints."""
CHECKPOINT_GLOB = "iter_*.pt"
_CHECKPOINT_NAME = re.compile(r"iter_(\d+)\.pt")
CHECKPOINT_FORMAT = 3
"""Layout of the checkpoint dict. 3: `world_size` and the states of ranks 1, 2, ... under
`other_ranks`; fused optimisers, SHAC's `grad_stats` (2: the simulator's settings under `env.sim` of
the config, the simulator's own state under the env's `simulator` key; 1: env.kappa, env.bundle, ...
and `bundler`)."""


class CheckpointError(ValueError):
    """No usable checkpoint at the given path; the message names it."""


def checkpoint_name(iteration: int) -> str:
    return f"iter_{iteration:06d}.pt"


def checkpoint_iteration(path: PathLike) -> int:
    """The iteration in a checkpoint's file name (`iter_000250.pt` -> 250)."""
    return int(_CHECKPOINT_NAME.fullmatch(Path(path).name).group(1))


def checkpoints_in(folder: PathLike) -> List[Path]:
    """The checkpoint files (iter_<digits>.pt) in `folder`, oldest first (none when it does not exist)."""
    folder = Path(folder)
    return sorted(p for p in folder.glob(CHECKPOINT_GLOB) if _CHECKPOINT_NAME.fullmatch(p.name)) \
        if folder.is_dir() else []


def save_atomic(state: dict, path: PathLike) -> Path:
    """torch.save `state`, stamped with CHECKPOINT_FORMAT, to `path` atomically (see `write_atomic`)."""
    import torch
    return write_atomic(path, lambda f: torch.save({**state, "format": CHECKPOINT_FORMAT}, f))


def find_checkpoint(path: PathLike) -> Path:
    """`path` itself if it is a file, else the newest `iter_*.pt` in the folder `path` or its
    `checkpoints/` subfolder (a run folder)."""
    path = Path(path)
    if path.is_file():
        return path
    for folder in (path, path / "checkpoints"):
        found = sorted(folder.glob(CHECKPOINT_GLOB)) if folder.is_dir() else []
        if found:
            return found[-1]
    raise CheckpointError(f"checkpoint {path}: no such file, and no {CHECKPOINT_GLOB} in it or in its checkpoints/")


def load_checkpoint(path: PathLike) -> dict:
    """The checkpoint at `path` (see `find_checkpoint`), tensors on the CPU."""
    import torch
    path = find_checkpoint(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated or foreign files fail in many ways; all mean "unusable"
        raise CheckpointError(f"checkpoint {path}: cannot be read ({type(e).__name__}: {e})") from None
    if not isinstance(state, dict) or "iteration" not in state:
        raise CheckpointError(f"checkpoint {path}: not a bcg_train checkpoint")
    if state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint {path}: format {state.get('format')}, this bcg_train reads format "
                              f"{CHECKPOINT_FORMAT} (see bcg_train.checkpoint.CHECKPOINT_FORMAT); resume or export it "
                              f"with the bcg_train version that wrote it")
    return state


def prune_checkpoints(folder: PathLike, keep: int, protected: Collection[int] = ()) -> None:
    """Delete all but the newest `keep` iter_*.pt files in `folder`, and those of the `protected`
    iterations."""
    for old in checkpoints_in(folder)[:-keep]:
        if checkpoint_iteration(old) not in protected:
            old.unlink()
