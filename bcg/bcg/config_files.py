"""Finds the suite's YAML files in config/, from a source checkout or an installed workspace."""
import os
import sys
from pathlib import Path

ENV_VAR = "BCG_CONFIG_DIR"


def config_dir() -> Path:
    """The folder holding the suite's config/*.yaml.

    Order: $BCG_CONFIG_DIR; the workspace's top-level config/ (source checkout or editable install);
    share/bcg/config of the installed `bcg` package (colcon install, found via ament_index when it
    exists, else relative to the Python prefix).
    """
    candidates = []
    if os.environ.get(ENV_VAR):
        candidates.append(Path(os.environ[ENV_VAR]))
    candidates.append(Path(__file__).resolve().parents[2] / "config")
    try:
        from ament_index_python.packages import get_package_share_directory
        candidates.append(Path(get_package_share_directory("bcg")) / "config")
    except Exception:  # ament_index is absent off ROS 2, or bcg is not installed there
        pass
    candidates.append(Path(sys.prefix) / "share" / "bcg" / "config")
    for c in candidates:
        if (c / "g1.yaml").is_file():
            return c
    raise FileNotFoundError("config/g1.yaml not found in any of: " + ", ".join(map(str, candidates)))


def config_file(name: str) -> Path:
    """Path of config/<name> (e.g. 'g1.yaml'); raises FileNotFoundError naming the file."""
    path = config_dir() / name
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    return path
