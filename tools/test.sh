#!/usr/bin/env bash
# Every test of the suite: sets the machine up (tools/bootstrap.sh), checks the colcon workspace
# (every package is ros.ament_python, `colcon build` and `colcon test` pass), then runs pytest over
# all test folders once, printing its summary line. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash tools/bootstrap.sh
. .venv/bin/activate
# the G1 model: $BCG_G1_MODEL, else the shared one beside this checkout, else mujoco-menagerie's (fetched)
shared_model="$ROOT/../shared/robots/unitree_g1/scene_29dof.xml"
if [ -z "${BCG_G1_MODEL:-}" ] && [ -f "$shared_model" ]; then export BCG_G1_MODEL="$shared_model"; fi
export BCG_MOTION_DIR="${BCG_MOTION_DIR:-$ROOT/../shared/motions/lafan1_g1}"
export PYTHONUNBUFFERED=1
python -m pytest "$@"
