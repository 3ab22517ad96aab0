#!/usr/bin/env bash
# The suite's main job, each step printing its progress as "k/N" (N: one step per shipped policy, then 3):
#   1. check a shipped trained policy in MuJoCo over loopback Cyclone DDS (sim bridge + policy node
#      + evaluator, the robot's wire protocol): BCG_SHIPPED (default policies/shac_synthetic_dance_k300.onnx,
#      trained on a built-in motion, so no data is needed) on its contract's motion, verdict
#      out/shipped/verdict.json and a GIF out/shipped/run.gif (PASS expected for a policy that stays up);
#      then, when the LAFAN1 data is found, the same check of each of BCG_SHIPPED_REAL (default the
#      walk, run, fight, jump and dance policies, which pass; empty: none), verdicts out/shipped/<name>/verdict.json,
#   2. train the cpu-smoke preset (SHAC through the differentiable simulator, bundled contact
#      gradients on) on a reference motion (BCG_MOTION, default the built-in synthetic_run),
#   3. export that policy to ONNX with its contract,
#   4. run the same MuJoCo check on it and print its verdict (out/verdict.json, out/verdict.txt).
# BCG_MOTION picks the smoke run's motion: synthetic_run (default), synthetic_jump, synthetic_fight,
# synthetic_dance, or a named segment of real motion capture (run, jump, fight, dance, walk;
# config/motions.yaml) read from BCG_MOTION_DIR (default ../shared/motions/lafan1_g1 beside this
# checkout). Extra `name:=value` arguments go to both checks (e.g. duration:=20). Exit code 0 when
# every step ran and both verdicts were written; each verdict says PASS or FAIL (cpu-smoke trains for
# a minute: expect FAIL; `bcg-train --preset transfer-cpu` is how the shipped policies were trained).
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
SHIPPED="${BCG_SHIPPED:-policies/shac_synthetic_dance_k300.onnx}"
OUT=out/main
read -r -a SHIPPED_REAL <<< "${BCG_SHIPPED_REAL-policies/shac_walk_k300.onnx policies/shac_run_k300.onnx \
policies/shac_fight_k300.onnx policies/shac_jump_k300.onnx policies/shac_dance_k300.onnx}"
STEPS=$((1 + ${#SHIPPED_REAL[@]} + 3))
done_steps=0
step() { printf '\n[main] %s\n' "$*" >&2; }
next_step() { done_steps=$((done_steps + 1)); step "$done_steps/$STEPS $*"; }

# mujoco_check POLICY MOTION_NAME FOLDER VERDICT [name:=value ...]: the check over DDS; 0 PASS, 1 FAIL
mujoco_check() {
  local policy="$1" motion="$2" folder="$3" verdict="$4"
  shift 4
  local motion_file status
  motion_file="$(python -m bcg_train.motion node-motion "$motion" --out "$folder/motions")"
  set +e
  bcg launch mujoco_check.launch.py policy:="$policy" motion:="$motion_file" verdict:="$verdict" "$@"
  status=$?
  set -e
  if [ ! -f "$verdict" ]; then
    step "mujoco_check wrote no verdict (exit code $status)"
    exit 1
  fi
  step "verdict: $verdict ($( [ "$status" = 0 ] && echo PASS || echo FAIL ))"
}

rm -rf "$OUT" out/shipped out/verdict.json out/verdict.txt
mkdir -p "$OUT" out/shipped
if [ ! -f "$SHIPPED" ]; then
  step "no shipped policy at $SHIPPED (BCG_SHIPPED names one)"
  exit 1
fi
SHIPPED_MOTION="$(python -c 'import sys; from bcg.contract import load_policy; print(load_policy(sys.argv[1]).contract.motion)' "$SHIPPED")"
next_step "shipped policy $SHIPPED ($SHIPPED_MOTION) in MuJoCo over DDS (GIF: out/shipped/run.gif)"
mujoco_check "$SHIPPED" "$SHIPPED_MOTION" out/shipped out/shipped/verdict.json record:=out/shipped/run.gif "$@"
# the shipped LAFAN1 policies that stay up, when their motion data is found (the repository carries none)
for real in "${SHIPPED_REAL[@]}"; do
  name="$(basename "$real" .onnx)"
  real_motion="$(python -c 'import sys; from bcg.contract import load_policy; print(load_policy(sys.argv[1]).contract.motion)' "$real")"
  if ! python -m bcg_train.motion node-motion "$real_motion" --out "out/shipped/$name/motions" >/dev/null 2>&1; then
    next_step "$real: no data for its motion $real_motion under \$BCG_MOTION_DIR ($BCG_MOTION_DIR), not checked"
    continue
  fi
  next_step "shipped policy $real ($real_motion, LAFAN1) in MuJoCo over DDS"
  mujoco_check "$real" "$real_motion" "out/shipped/$name" "out/shipped/$name/verdict.json" "$@"
done
next_step "train: bcg-train --preset cpu-smoke --motion $MOTION (SHAC + bundled contact gradients)"
bcg-train --preset cpu-smoke --motion "$MOTION" --run-dir "$OUT/train"
next_step "export: $OUT/policy.onnx"
bcg-export "$OUT/train" -o "$OUT/policy.onnx"
next_step "the smoke policy in MuJoCo over DDS"
mujoco_check "$OUT/policy.onnx" "$MOTION" "$OUT" out/verdict.json "$@"
