"""Where the G1 MuJoCo model is found: an explicit path, else $BCG_G1_MODEL, else mujoco-menagerie's
`unitree_g1` (the `mujoco-menagerie` package, which downloads it at first use and caches it), else
a clear error."""
import logging
import os
from pathlib import Path
from typing import Optional, Union

ENV_VAR = "BCG_G1_MODEL"
_MENAGERIE_SCENES = ("scene.xml", "scene_29dof.xml", "g1_29dof.xml", "g1.xml")
MENAGERIE_ROBOT = "unitree_g1"
"""mujoco-menagerie's name of the G1."""
log = logging.getLogger(__name__)


class ModelNotFoundError(FileNotFoundError):
    """No usable G1 model file; the message says how to get one."""


def _scene_in(folder: Path, origin: str) -> Path:
    scene = next((folder / n for n in _MENAGERIE_SCENES if (folder / n).is_file()), None)
    if scene is None:
        raise ModelNotFoundError(f"{origin} is the folder {folder}, which holds none of {', '.join(_MENAGERIE_SCENES)}")
    return scene


def _from_menagerie() -> Path:
    """The scene of mujoco-menagerie's unitree_g1 (downloaded and cached by the package at first use;
    $MENAGERIE_ROOT points it at a local checkout instead). ModelNotFoundError when the package is
    missing or the download fails, saying why and what to do."""
    try:
        import mujoco_menagerie
    except ImportError:
        raise ModelNotFoundError(_NO_MODEL + " (the mujoco-menagerie package, which would fetch one, is not "
                                 "installed: `pip install mujoco-menagerie`)") from None
    try:
        folder = Path(mujoco_menagerie.get(MENAGERIE_ROBOT).path(progress=None))
    except Exception as e:   # the package raises its own errors for network and cache problems
        raise ModelNotFoundError(f"{_NO_MODEL} (mujoco-menagerie could not provide {MENAGERIE_ROBOT}: "
                                 f"{type(e).__name__}: {e})") from None
    scene = _scene_in(folder, f"mujoco-menagerie's {MENAGERIE_ROBOT}")
    log.warning("No G1 model given (--model, $%s): using mujoco-menagerie's %s at %s", ENV_VAR, MENAGERIE_ROBOT,
                scene)
    return scene


_NO_MODEL = (f"No G1 model given. Pass a MuJoCo XML with --model (ROS parameter `model`) or set {ENV_VAR}, e.g. "
             f"{ENV_VAR}=/path/to/unitree_g1/scene_29dof.xml (Unitree's unitree_mujoco repository, "
             "unitree_robots/g1), or a mujoco-menagerie unitree_g1 folder")


def resolve_model_path(explicit: Optional[Union[str, Path]] = None) -> Path:
    """Return the G1 MuJoCo XML to load.

    Order: `explicit` (a flag or ROS parameter), then the environment variable BCG_G1_MODEL. Either
    may name an XML file or a folder in mujoco-menagerie's layout (`.../unitree_g1/` holding
    `scene.xml`), which is resolved to the scene inside it. With neither, mujoco-menagerie's
    unitree_g1 (fetched by the `mujoco-menagerie` package at first use; said in the log).
    """
    for origin, value in (("the given model path", explicit), (f"${ENV_VAR}", os.environ.get(ENV_VAR))):
        if value in (None, ""):
            continue
        path = Path(value).expanduser()
        if path.is_dir():
            return _scene_in(path, origin)
        if not path.is_file():
            raise ModelNotFoundError(f"{origin} names {path}, which does not exist")
        return path
    return _from_menagerie()
