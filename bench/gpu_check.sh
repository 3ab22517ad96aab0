#!/usr/bin/env bash
# The GPU check: one prepared run that measures the simulator and training on a GPU and runs the
# CUDA tests, writing every number to one file.
#
#   bash bench/gpu_check.sh [--device cuda:0|cpu] [--out DIR] [--budget SECONDS] [--only STEP,...]
#
# Steps, in order, each under its own time limit and all inside --budget (default 480 s, so that
# staging plus this check fit one 10-minute device call):
#   environment  nvidia-smi, Python, torch, Warp and MuJoCo versions, the devices Warp and torch see
#   cuda_tests   pytest -k cuda over the test files that skip without CUDA (`torch.cuda.is_available`):
#                a CUDA test names "cuda" in its name or parameter id (test_runs_unchanged_on_cuda)
#   diffsim_*    bench/bench_diffsim.py at 64 and 4096 environments, once per precision where the
#                bench has --precision (float64, float32), else once, float32 recorded "not available";
#                with --kernels (each kernel's device time, forward and backward) and --graphs (training's
#                window as captured CUDA graphs against one launch at a time), at 64 also --bundle
#   train        bench/bench_train.py --preset paper --iterations 3 --motion synthetic_dance (the built-in
#                motion: the GPU machine has no motion capture, and the motion does not change the cost)
#   train_scaled SHAC + BCG alone at 4096 environments in float32 (as many iterations): what a GPU gives
#                when it is filled (the paper's 64 environments leave it mostly idle)
#   diffsim_bundled_device  bench_diffsim's bundled dropped window at 4096 environments in float32 with the
#                bundles on the device (bundle.on_device, 1280 branch rows: 128 bundles of B = 10 at once,
#                every position of a window holding buffers for 4096 + 1280 rows run and 1280 re-run),
#                launched one kernel at a time and as captured graphs (--graphs)
#   train_scaled_device     train_scaled with the bundles on the device (1280 rows): the whole SHAC + BCG
#                step captured
# With --device cpu the same steps run on the CPU at small sizes (diffsim at 4 and 16 environments,
# short windows; bench_train at cpu-smoke for 1 iteration, scaled to 16 environments), so the script
# itself is checked here.
# A bench or a flag that does not exist (yet) is recorded "not available", never fatal.
# --only runs the named steps alone (environment, cuda_tests, diffsim: every diffsim_ step, train: train and
# train_scaled*),
# e.g. --only cuda_tests.
#
# Environment: sources .gpu-site/env.sh when tools/gpu/stage.py installed the staged wheels (the
# GPU machine), else .venv when present; BCG_G1_MODEL defaults to ../shared's G1; PYTHON (default
# python3) runs everything.
# Output: DIR/gpu_check.txt (default DIR: $OUT where set, as on the device machine, else
# out/gpu_check): a summary table, then each step's command, status, seconds and output.
# Exit code 0 when no step failed or ran out of time.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

DEVICE=cuda:0
OUT_DIR="${OUT:-out/gpu_check}"
BUDGET=480
ONLY=""
while (($#)); do
  case "$1" in
    --device) DEVICE="${2:?--device needs a value (cuda:0, cpu)}"; shift 2 ;;
    --out) OUT_DIR="${2:?--out needs a folder}"; shift 2 ;;
    --budget) BUDGET="${2:?--budget needs seconds}"; shift 2 ;;
    --only) ONLY="${2:?--only needs step names (environment, cuda_tests, diffsim, train)}"; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for only in ${ONLY//,/ }; do
  case "$only" in
    environment|cuda_tests|diffsim|train) ;;
    *) echo "gpu_check.sh: --only takes environment, cuda_tests, diffsim, train; got '$only'" >&2; exit 2 ;;
  esac
done
[[ "$BUDGET" =~ ^[0-9]+$ ]] || { echo "gpu_check.sh: --budget must be whole seconds, got '$BUDGET'" >&2; exit 2; }
case "$DEVICE" in
  cpu) ON_CPU=1 ;;
  cuda*) ON_CPU=0 ;;
  *) echo "gpu_check.sh: --device must be cpu or cuda[:N], got '$DEVICE'" >&2; exit 2 ;;
esac

if [ -f .gpu-site/env.sh ]; then
  . .gpu-site/env.sh
elif [ -f .venv/bin/activate ]; then
  . .venv/bin/activate
fi
if [ -z "${BCG_G1_MODEL:-}" ] && [ -f "$ROOT/../shared/robots/unitree_g1/scene_29dof.xml" ]; then
  export BCG_G1_MODEL="$ROOT/../shared/robots/unitree_g1/scene_29dof.xml"
fi
PYTHON="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1

mkdir -p "$OUT_DIR"
REPORT="$OUT_DIR/gpu_check.txt"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
: > "$WORK/body"
: > "$WORK/summary"
FAILED=0
STEP_OUTPUT_LINES=150

# record NAME STATUS SECONDS COMMAND OUTPUT_FILE: one summary row and one section of the report.
record() {
  local name="$1" status="$2" secs="$3" cmd="$4" output="$5" last=""
  [ -s "$output" ] && last="$(grep -v '^\s*$' "$output" | tail -n 1 | cut -c1-160)"
  printf '%-24s %-36s %6s  %s\n' "$name" "$status" "$secs" "$last" >> "$WORK/summary"
  {
    printf '\n## %s\ncommand: %s\nstatus: %s\nseconds: %s\n' "$name" "$cmd" "$status" "$secs"
    if [ -s "$output" ]; then
      local n; n=$(wc -l < "$output")
      ((n > STEP_OUTPUT_LINES)) && printf '(last %d of %d lines)\n' "$STEP_OUTPUT_LINES" "$n"
      tail -n "$STEP_OUTPUT_LINES" "$output"
    fi
  } >> "$WORK/body"
  printf '[gpu_check] %-24s %s (%ss)\n' "$name" "$status" "$secs" >&2
}

# selected GROUP: whether --only (when given) names this group of steps.
selected() {
  [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]
}

# not_available NAME REASON: a step whose bench or flag does not exist.
not_available() {
  echo "$2" > "$WORK/na"
  record "$1" "not available" 0 "-" "$WORK/na"
}

# step NAME LIMIT_SECONDS COMMAND...: runs COMMAND under min(LIMIT, what is left of the budget).
step() {
  local name="$1" cap="$2"; shift 2
  local left=$((BUDGET - SECONDS - 5)) limit="$cap" out="$WORK/$name.out" rc t0
  ((left < limit)) && limit=$left
  if ((limit < 10)); then
    echo "the ${BUDGET} s budget was spent before this step" > "$out"
    record "$name" "skipped (budget spent)" 0 "$*" "$out"
    FAILED=1
    return
  fi
  t0=$SECONDS
  # bash -c runs the functions below (exported) as well as plain commands; timeout ends its whole group
  timeout --kill-after=10 "$limit" bash -c '"$@"' "$name" "$@" > "$out" 2>&1
  rc=$?
  local secs=$((SECONDS - t0)) status
  if ((rc == 0)); then
    status="ok"
  elif ((rc == 124 || rc == 137)); then
    status="timed out after ${limit} s"; FAILED=1
  elif ((rc == 2)) && grep -qE "unrecognized arguments|invalid choice|no such option" "$out"; then
    status="not available (arguments refused)"
  else
    status="failed (exit $rc)"; FAILED=1
  fi
  record "$name" "$status" "$secs" "$*" "$out"
}

ENV_PY='
import platform, sys
print("python", sys.version.split()[0], platform.machine())
import numpy; print("numpy", numpy.__version__)
import torch
print("torch", torch.__version__, "cuda build", torch.version.cuda, "cuda available", torch.cuda.is_available())
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print(f"torch cuda:{i}", p.name, f"{p.total_memory / 2**30:.1f} GiB", f"{p.multi_processor_count} SMs")
import mujoco; print("mujoco", mujoco.__version__)
import warp as wp
wp.config.quiet = True
wp.init()
print("warp", wp.__version__, "devices", [str(d) for d in wp.get_devices()], "cuda devices", wp.get_cuda_device_count())
import os; print("BCG_G1_MODEL", os.environ.get("BCG_G1_MODEL"))
'
env_step() {
  { command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
      || echo "nvidia-smi: not found"; "$PYTHON" -c "$ENV_PY"; }
}

# The CUDA tests: `-k cuda` over the test files that skip without a CUDA device.
cuda_tests() {
  local files
  mapfile -t files < <(grep -l "cuda.is_available" test/test_*.py */test/test_*.py 2>/dev/null)
  if ((${#files[@]} == 0)); then
    echo "no test file checks torch.cuda.is_available()"
    return 0
  fi
  # --import-mode=prepend: on the GPU machine the workspace's packages come from PYTHONPATH, not from
  # an install, and pytest.ini's importlib mode would then import the ROS package folder bcg_train/
  # (which holds the Python package bcg_train/bcg_train/) as the module bcg_train for the conftest
  # bcg_train/test/conftest.py ("No module named 'bcg_train.env_api'").
  "$PYTHON" -m pytest -q -rs --import-mode=prepend -k cuda "${files[@]}"
}
export -f env_step cuda_tests
export PYTHON ENV_PY

if ((ON_CPU)); then
  SIZES=(4 16); DIFFSIM_ARGS=(--steps 5 --window 4 --repeats 1 --mujoco-envs 4); DIFFSIM_CAP=150
  TRAIN_ARGS=(--preset cpu-smoke --device cpu --iterations 1 --motion synthetic_dance); TRAIN_CAP=240
  SCALED_ENVS=16; DEVICE_ROWS=20
else
  SIZES=(64 4096); DIFFSIM_ARGS=(); DIFFSIM_CAP=120
  TRAIN_ARGS=(--preset paper --device "$DEVICE" --iterations 3 --motion synthetic_dance); TRAIN_CAP=180
  SCALED_ENVS=4096; DEVICE_ROWS=1280
fi

selected environment && step environment 60 env_step
selected cuda_tests && step cuda_tests 150 cuda_tests

PRECISIONS=("")
if ! selected diffsim; then
  SIZES=()
elif "$PYTHON" bench/bench_diffsim.py --help 2>/dev/null | grep -q -- "--precision"; then
  PRECISIONS=(float64 float32)
fi
for envs in "${SIZES[@]}"; do
  # kernel by kernel and captured graphs against launches at both sizes; the bundled window too at
  # the small one (the paper's size)
  PROFILE=(--kernels --graphs)
  [ "$envs" = "${SIZES[0]}" ] && PROFILE+=(--bundle)
  for precision in "${PRECISIONS[@]}"; do
    if [ -n "$precision" ]; then
      step "diffsim_${envs}_${precision}" "$DIFFSIM_CAP" "$PYTHON" bench/bench_diffsim.py --device "$DEVICE" \
        --envs "$envs" "${DIFFSIM_ARGS[@]}" --precision "$precision" "${PROFILE[@]}"
    else
      step "diffsim_${envs}" "$DIFFSIM_CAP" "$PYTHON" bench/bench_diffsim.py --device "$DEVICE" --envs "$envs" \
        "${DIFFSIM_ARGS[@]}"
      not_available "diffsim_${envs}_float32" "bench/bench_diffsim.py has no --precision option"
    fi
  done
done
if selected diffsim && "$PYTHON" bench/bench_diffsim.py --help 2>/dev/null | grep -q -- "--on-device"; then
  step diffsim_bundled_device "$DIFFSIM_CAP" "$PYTHON" bench/bench_diffsim.py --device "$DEVICE" \
    --envs "$SCALED_ENVS" "${DIFFSIM_ARGS[@]}" --precision float32 --bundle --max-branch-rows "$DEVICE_ROWS" \
    --on-device --graphs
elif selected diffsim; then
  not_available diffsim_bundled_device "bench/bench_diffsim.py has no --on-device option"
fi

if selected train && [ -f bench/bench_train.py ]; then
  step train "$TRAIN_CAP" "$PYTHON" bench/bench_train.py "${TRAIN_ARGS[@]}"
  step train_scaled "$TRAIN_CAP" "$PYTHON" bench/bench_train.py "${TRAIN_ARGS[@]}" --variants shac \
    --set "shac.num_envs=$SCALED_ENVS" --set env.sim.precision=float32
  step train_scaled_device "$TRAIN_CAP" "$PYTHON" bench/bench_train.py "${TRAIN_ARGS[@]}" --variants shac \
    --set "shac.num_envs=$SCALED_ENVS" --set env.sim.precision=float32 --set env.sim.bundle.on_device=true \
    --set "env.sim.bundle.max_branch_rows=$DEVICE_ROWS"
elif selected train; then
  not_available train "bench/bench_train.py does not exist"
fi

if COMMIT="$(git rev-parse --short HEAD 2>/dev/null)"; then
  git diff --quiet HEAD 2>/dev/null || COMMIT+=" (with local changes)"
else
  COMMIT="unknown (not a git checkout)"
fi
{
  echo "gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ) device $DEVICE budget ${BUDGET} s, took ${SECONDS} s"
  echo "commit $COMMIT"
  echo
  printf '%-24s %-36s %6s  %s\n' step status secs "last line of its output"
  cat "$WORK/summary"
  cat "$WORK/body"
} > "$REPORT"
echo "[gpu_check] report: $REPORT" >&2
cat "$WORK/summary" >&2
exit "$FAILED"
