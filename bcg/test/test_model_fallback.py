"""Without a model path, the G1 comes from mujoco-menagerie (its package fetches and caches
`unitree_g1`); a local stand-in for the download (MENAGERIE_ROOT, a folder in menagerie's layout
holding the shared model) checks the route and the description's acceptance of that layout."""
import logging
import sys

import pytest

from bcg.robot import ModelNotFoundError, RobotDescription, resolve_model_path
from bcg.robot.model_path import ENV_VAR


@pytest.fixture
def no_model_given(monkeypatch):
    shared = resolve_model_path()            # the suite's model (BCG_G1_MODEL)
    monkeypatch.delenv(ENV_VAR)
    return shared


def test_without_a_model_path_menagerie_provides_the_g1_and_says_so(no_model_given, tmp_path, monkeypatch, caplog):
    (tmp_path / "unitree_g1").symlink_to(no_model_given.parent, target_is_directory=True)
    monkeypatch.setenv("MENAGERIE_ROOT", str(tmp_path))
    with caplog.at_level(logging.WARNING):
        path = resolve_model_path()
    assert path.parent == tmp_path / "unitree_g1" and path.is_file()
    assert "using mujoco-menagerie's unitree_g1" in caplog.text
    robot = RobotDescription.load()
    assert robot.num_joints == 29 and len(robot.foot_geoms["left"]) == 4


def test_a_failed_fetch_is_a_clear_error(no_model_given, tmp_path, monkeypatch):
    monkeypatch.setenv("MENAGERIE_ROOT", str(tmp_path))          # holds no unitree_g1: as if the fetch failed
    with pytest.raises(ModelNotFoundError, match=r"No G1 model given.*mujoco-menagerie could not provide unitree_g1"):
        resolve_model_path()


def test_without_the_package_the_error_says_how_to_get_a_model(no_model_given, monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco_menagerie", None)   # import fails
    with pytest.raises(ModelNotFoundError, match=r"set BCG_G1_MODEL.*pip install mujoco-menagerie"):
        resolve_model_path()
