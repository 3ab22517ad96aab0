#!/usr/bin/env bash
# Every test of the suite: sets the machine up (tools/bootstrap.sh), checks the colcon workspace
# (every package is ros.ament_python, `colcon build` and `colcon test` pass), then runs pytest over
# all test folders once, printing its summary line. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash tools/bootstrap.sh
. .venv/bin/activate
export BCG_G1_MODEL="${BCG_G1_MODEL:-$ROOT/../shared/robots/unitree_g1/scene_29dof.xml}"
export BCG_MOTION_DIR="${BCG_MOTION_DIR:-$ROOT/../shared/motions/lafan1_g1}"
export PYTHONUNBUFFERED=1
python -m pytest "$@"
