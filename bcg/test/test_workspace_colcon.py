"""The repository is a colcon workspace of ament_python packages that builds and tests without ROS 2."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"bcg", "bcg_policy_node", "bcg_sim_bridge", "bcg_train"}
COLCON = shutil.which("colcon", path=str(Path(sys.executable).parent)) or shutil.which("colcon")


def _colcon(args, cwd):
    env = dict(os.environ, COLCON_HOME=str(cwd / "colcon_home"))
    return subprocess.run([COLCON, "--log-base", str(cwd / "log"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    work = tmp_path_factory.mktemp("colcon")
    r = _colcon(["build", "--base-paths", str(ROOT), "--build-base", str(work / "build"),
                 "--install-base", str(work / "install")], work)
    assert r.returncode == 0, r.stdout + r.stderr
    return work


def test_every_package_is_ament_python():
    r = subprocess.run([COLCON, "list", "--base-paths", str(ROOT)], capture_output=True, text=True, check=True)
    found = {line.split()[0]: line.split()[-1] for line in r.stdout.splitlines() if line.strip()}
    assert set(found) == PACKAGES
    assert set(found.values()) == {"(ros.ament_python)"}


def test_build_installs_launch_and_config_into_share_bcg(built):
    share = built / "install" / "bcg" / "share" / "bcg"
    for sub in ("launch", "config"):
        top = sorted(str(p.relative_to(ROOT / sub)) for p in (ROOT / sub).rglob("*") if p.suffix in (".py", ".yaml"))
        assert top, f"{sub}/ is empty"
        assert sorted(str(p.relative_to(share / sub)) for p in (share / sub).rglob("*") if p.is_file()) == top
    index = built / "install" / "bcg" / "share" / "ament_index" / "resource_index" / "packages"
    assert (index / "bcg").is_file()
    for pkg, exe in (("bcg_sim_bridge", "sim_bridge"), ("bcg_policy_node", "policy_node")):
        assert (built / "install" / pkg / "lib" / pkg / exe).is_file(), f"ROS 2 executable {pkg}/{exe} missing"


def test_colcon_test_runs_pytest_and_reports(built):
    r = _colcon(["test", "--base-paths", str(ROOT), "--build-base", str(built / "build"),
                 "--install-base", str(built / "install"), "--packages-select", "bcg",
                 "--pytest-args", "-k", "robot_description"], built)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (built / "build" / "bcg" / "pytest.xml").is_file()
    res = _colcon(["test-result", "--test-result-base", str(built / "build")], built)
    assert res.returncode == 0, res.stdout + res.stderr
    assert " 0 errors, 0 failures" in res.stdout
