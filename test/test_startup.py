"""Start-up: what the command lines' `--help` loads, and bench/startup.py's output without timing it
(the bench measures the times; a test never depends on the machine's speed)."""
import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "warp", "mujoco", "onnx", "onnxruntime", "scipy", "rsl_rl", "matplotlib")
"""What a command line's help must not load: each takes from a fraction of a second to seconds."""


@pytest.fixture(scope="module")
def startup(bench_script):
    return bench_script("startup")


def loaded_after(code: str):
    """The HEAVY modules loaded after running `code` in a fresh interpreter, sorted."""
    probe = textwrap.dedent(code) + f"\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def test_the_command_lines_help_loads_no_simulator_nor_learning_framework():
    assert loaded_after("""
        import contextlib, io
        from bcg_train import cli
        from bcg_train.evaluation import cli as eval_cli, screen, ship
        for main in (cli.main, eval_cli.main, screen.main, ship.main):
            with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
                main(["--help"])
    """) == []


def test_the_training_algorithms_load_no_onnx():
    loaded = loaded_after("import bcg_train.algo.shac, bcg_train.env_api")
    assert "onnx" not in loaded and "onnxruntime" not in loaded


def test_algo_names_every_algorithm_and_refuses_others():
    from bcg_train import cli
    from bcg_train.train_config import ALGORITHMS
    help_text = " ".join(cli.parser().format_help().split())
    assert all(name in help_text for name in ALGORITHMS)
    assert cli.parser().parse_args(["--algo", "ppo"]).algo == "ppo"
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["--algo", "sac"])


def test_the_bench_runs_the_console_commands_of_the_packages(startup):
    scripts = (REPO / "bcg_train" / "setup.py").read_text()
    for cmd in startup.HELP.values():
        assert f'"{Path(cmd[0]).name} = ' in scripts and cmd[1:] == ["--help"]


def test_the_last_line_gives_each_time_and_its_ratio_to_the_reference(startup):
    times = {"numpy_s": 0.1, "train_help_s": 0.25, "eval_help_s": 0.3, "node_first_command_s": 1.5}
    line = startup.result_line(times)
    assert line == ("train_help_s=0.250 eval_help_s=0.300 node_first_command_s=1.500 "
                    "train_help_x_numpy=2.5 eval_help_x_numpy=3.0 node_first_command_x_numpy=15.0")
    assert all(re.fullmatch(r"[a-z_]+=\d+\.\d+", item) for item in line.split())


def test_the_report_names_each_goal_and_whether_it_is_met(startup):
    lines = startup.report_lines({"numpy_s": (0.1, 0.1), "train_help_s": (0.5, 0.4),
                                  "node_first_command_s": (3.0, 2.0)})
    assert "goal" not in lines[0] and "x  1.0" in lines[0]
    assert lines[1].endswith("goal <= 1 s: meets") and lines[2].endswith("goal <= 2 s: MISSES")


def test_medians_takes_wall_and_cpu_apart(startup):
    runs = iter([(3.0, 1.0), (1.0, 3.0), (2.0, 2.5)])
    assert startup.medians(lambda: next(runs), 3) == (2.0, 2.5)
