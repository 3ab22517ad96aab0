#!/usr/bin/env bash
# The suite's main job on its built-in default, each step printing its progress:
#   1. train the cpu-smoke preset (SHAC through the differentiable simulator, bundled contact
#      gradients on) on a reference motion (default: the built-in synthetic_run, no data needed),
#   2. export the policy to ONNX with its contract,
#   3. give that motion to the nodes (a built-in one written as a LAFAN1 CSV),
#   4. run the MuJoCo sim-to-sim check (sim bridge + policy node + evaluator over loopback Cyclone
#      DDS) and print its verdict (out/verdict.json, out/verdict.txt).
# BCG_MOTION picks the motion: synthetic_run (default), synthetic_jump, synthetic_fight,
# synthetic_dance, or a named segment of real motion capture (run, jump, fight, dance, walk;
# config/motions.yaml) read from BCG_MOTION_DIR (default ../shared/motions/lafan1_g1 beside this
# checkout). Extra `name:=value` arguments go
# to the check (e.g. duration:=20 record:=out/run.gif). Exit code 0 when every step ran and a verdict
# was written; the verdict itself says PASS or FAIL (cpu-smoke trains for minutes: expect FAIL; train
# longer with `bcg-train --preset cpu-small` or `--preset paper` for a policy that stays up).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash tools/bootstrap.sh
. .venv/bin/activate
# the G1 model: $BCG_G1_MODEL, else the shared one beside this checkout, else mujoco-menagerie's (fetched)
shared_model="$ROOT/../shared/robots/unitree_g1/scene_29dof.xml"
if [ -z "${BCG_G1_MODEL:-}" ] && [ -f "$shared_model" ]; then export BCG_G1_MODEL="$shared_model"; fi
export BCG_MOTION_DIR="${BCG_MOTION_DIR:-$ROOT/../shared/motions/lafan1_g1}"
MOTION="${BCG_MOTION:-synthetic_run}"
OUT=out/main
step() { printf '\n[main] %s\n' "$*" >&2; }

rm -rf "$OUT" out/verdict.json out/verdict.txt
mkdir -p "$OUT"
step "1/4 train: bcg-train --preset cpu-smoke --motion $MOTION (SHAC + bundled contact gradients)"
bcg-train --preset cpu-smoke --motion "$MOTION" --run-dir "$OUT/train"
step "2/4 export: $OUT/policy.onnx"
bcg-export "$OUT/train" -o "$OUT/policy.onnx"
MOTION_FILE="$(python -m bcg_train.motion node-motion "$MOTION" --out "$OUT/motions")"
step "3/4 reference motion for the nodes: $MOTION_FILE"
step "4/4 mujoco_check: bridge + policy node + evaluator over loopback DDS"
set +e
bcg launch mujoco_check.launch.py policy:="$OUT/policy.onnx" motion:="$MOTION_FILE" \
  verdict:=out/verdict.json "$@"
status=$?
set -e
if [ ! -f out/verdict.json ]; then
  step "mujoco_check wrote no verdict (exit code $status)"
  exit 1
fi
step "verdict: out/verdict.json, out/verdict.txt ($( [ "$status" = 0 ] && echo PASS || echo FAIL ))"
