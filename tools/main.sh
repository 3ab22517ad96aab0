#!/usr/bin/env bash
# The suite's main job on its built-in default: sets the machine up (tools/bootstrap.sh), then runs
# the MuJoCo sim-to-sim check of the built-in stand policy and prints its verdict. Extra
# `name:=value` arguments go to the check (e.g. policy:=my_policy.onnx duration:=20).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash tools/bootstrap.sh
. .venv/bin/activate
export BCG_G1_MODEL="${BCG_G1_MODEL:-$ROOT/../shared/robots/unitree_g1/scene_29dof.xml}"
mkdir -p out
exec bcg launch mujoco_check.launch.py verdict:=out/verdict.json "$@"
