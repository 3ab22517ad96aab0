"""bench/gpu_check.sh's bookkeeping, in a copy of the script beside stand-in benches and tests, with a
fake PYTHON that plays each bench: statuses (ok, failed, timed out, not available, budget spent),
the --precision detection, the CPU sizes, the report file and the exit code. The script's real run
(`bash bench/gpu_check.sh --device cpu`) takes minutes and is not part of the suite."""
import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FAKE_PYTHON = r"""#!/bin/bash
case "$*" in
  "-c "*) echo "fake environment" ;;
  "-m pytest"*) echo "1 passed, 2 deselected in 0.01s ${*: -1}" ;;
  *bench_diffsim.py*--help*) echo "usage: bench_diffsim.py"
                             [ -n "$FAKE_PRECISION" ] && echo "  --precision {float64,float32}  --on-device" ;;
  *bench_diffsim.py*"--envs 4 "*float32*) echo "float32 blew up" >&2; exit 3 ;;
  *bench_diffsim.py*"--envs 16 "*float32*) sleep 60 ;;
  *bench_diffsim.py*) echo "forward_vs_mujoco=1.5 backward_over_forward=2.5 ($*)" ;;
  *bench_train.py*) echo "usage: bench_train.py [-h]" >&2
                    echo "bench_train.py: error: unrecognized arguments: --iterations 1" >&2; exit 2 ;;
  *) echo "fake python: unexpected $*" >&2; exit 99 ;;
esac
"""


def run_check(tmp_path, budget, *args, **env):
    """Copies gpu_check.sh into a stand-in repository under tmp_path and runs it on the CPU;
    returns (exit code, {step: status}, report text)."""
    repo = tmp_path / "repo"
    (repo / "bench").mkdir(parents=True)
    shutil.copy(ROOT / "bench" / "gpu_check.sh", repo / "bench")
    for bench in ("bench_diffsim.py", "bench_train.py"):
        (repo / "bench" / bench).write_text("# played by the fake python\n")
    (repo / "bcg_train" / "test").mkdir(parents=True)
    (repo / "bcg_train" / "test" / "test_gpu.py").write_text("# skipif(not torch.cuda.is_available())\n")
    (repo / "bcg_train" / "test" / "test_cpu.py").write_text("# runs anywhere\n")
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    out = tmp_path / "out"
    res = subprocess.run(["bash", str(repo / "bench" / "gpu_check.sh"), "--device", "cpu", "--out", str(out),
                          "--budget", str(budget), *args], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHON=str(python), BCG_G1_MODEL="unused", **env))
    report = (out / "gpu_check.txt").read_text()
    table = report.split("\n\n")[1].splitlines()[1:]
    statuses = {line.split()[0]: re.split(r"\s{2,}", line)[1] for line in table}
    return res.returncode, statuses, report


def test_every_outcome_is_recorded_and_a_failure_sets_the_exit_code(tmp_path):
    code, statuses, report = run_check(tmp_path, budget=18, FAKE_PRECISION="1")
    assert statuses == {
        "environment": "ok",
        "cuda_tests": "ok",
        "diffsim_4_float64": "ok",
        "diffsim_4_float32": "failed (exit 3)",
        "diffsim_16_float64": "ok",
        "diffsim_16_float32": f"timed out after {statuses['diffsim_16_float32'].split()[-2]} s",
        "diffsim_bundled_device": "skipped (budget spent)",
        "train": "skipped (budget spent)",
        "train_scaled": "skipped (budget spent)",
        "train_scaled_device": "skipped (budget spent)",
    }
    assert code == 1
    assert "float32 blew up" in report                                   # each step's output is in the report
    assert "1 passed, 2 deselected in 0.01s bcg_train/test/test_gpu.py" in report   # only files that test CUDA
    assert ("bench/bench_diffsim.py --device cpu --envs 16 --steps 5 --window 4 --repeats 1 --mujoco-envs 4 "
            "--precision float64") in report
    assert "commit unknown (not a git checkout)" in report


def test_missing_options_are_not_available_rather_than_failures(tmp_path):
    code, statuses, report = run_check(tmp_path, budget=300)
    assert statuses == {
        "environment": "ok",
        "cuda_tests": "ok",
        "diffsim_4": "ok",
        "diffsim_4_float32": "not available",
        "diffsim_16": "ok",
        "diffsim_16_float32": "not available",
        "diffsim_bundled_device": "not available",
        "train": "not available (arguments refused)",
        "train_scaled": "not available (arguments refused)",
        "train_scaled_device": "not available (arguments refused)",
    }
    assert code == 0
    assert "bench/bench_diffsim.py has no --precision option" in report
    assert "bench/bench_diffsim.py has no --on-device option" in report
    assert "--set env.sim.bundle.on_device=true --set env.sim.bundle.max_branch_rows=20" in report
    assert "unrecognized arguments: --iterations 1" in report
    assert "bench/bench_train.py --preset cpu-smoke --device cpu --iterations 1" in report
    assert ("--variants shac --set shac.num_envs=16 --set env.sim.precision=float32") in report


def test_only_runs_the_named_steps(tmp_path):
    code, statuses, report = run_check(tmp_path, 300, "--only", "cuda_tests,train")
    assert statuses == {"cuda_tests": "ok", "train": "not available (arguments refused)",
                        "train_scaled": "not available (arguments refused)",
                        "train_scaled_device": "not available (arguments refused)"}
    assert code == 0
    assert "bench_diffsim" not in report


def test_bad_arguments_are_refused_by_name(tmp_path):
    for args, message in ((["--device", "tpu"], "--device must be cpu or cuda[:N], got 'tpu'"),
                          (["--budget", "ten"], "--budget must be whole seconds, got 'ten'"),
                          (["--fast"], "unknown argument '--fast'"),
                          (["--only", "cuda_tests,gpu"],
                           "--only takes environment, cuda_tests, diffsim, train; got 'gpu'")):
        res = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh"), *args], capture_output=True, text=True)
        assert res.returncode == 2 and message in res.stderr
