"""Where the G1 MuJoCo model is found: an explicit path, else $BCG_G1_MODEL, else a clear error."""
import os
from pathlib import Path
from typing import Optional, Union

ENV_VAR = "BCG_G1_MODEL"
_MENAGERIE_SCENES = ("scene.xml", "scene_29dof.xml", "g1_29dof.xml", "g1.xml")


class ModelNotFoundError(FileNotFoundError):
    """No usable G1 model file; the message says how to get one."""


def resolve_model_path(explicit: Optional[Union[str, Path]] = None) -> Path:
    """Return the G1 MuJoCo XML to load.

    Order: `explicit` (a flag or ROS parameter), then the environment variable BCG_G1_MODEL. Either
    may name an XML file or a folder in mujoco-menagerie's layout (`.../unitree_g1/` holding
    `scene.xml`), which is resolved to the scene inside it.
    """
    for origin, value in (("the given model path", explicit), (f"${ENV_VAR}", os.environ.get(ENV_VAR))):
        if value in (None, ""):
            continue
        path = Path(value).expanduser()
        if path.is_dir():
            scene = next((path / n for n in _MENAGERIE_SCENES if (path / n).is_file()), None)
            if scene is None:
                raise ModelNotFoundError(
                    f"{origin} is the folder {path}, which holds none of {', '.join(_MENAGERIE_SCENES)}")
            return scene
        if not path.is_file():
            raise ModelNotFoundError(f"{origin} names {path}, which does not exist")
        return path
    raise ModelNotFoundError(
        f"No G1 model given. Pass a MuJoCo XML with --model (ROS parameter `model`) or set {ENV_VAR}, e.g. "
        f"{ENV_VAR}=/path/to/unitree_g1/scene_29dof.xml (Unitree's unitree_mujoco repository, "
        "unitree_robots/g1). On a machine with internet, `pip install mujoco-menagerie` fetches "
        f"menagerie's unitree_g1 folder; point {ENV_VAR} at that folder.")
