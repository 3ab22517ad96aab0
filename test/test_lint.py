"""The whole repository passes `ruff check` with ruff.toml's rules (pinned in constraints.txt and
installed by tools/bootstrap.sh, so a missing ruff is a failure, not a skip)."""
import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ruff_command():
    """`python -m ruff` where the ruff package is importable, else the ruff next to the interpreter."""
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    beside = Path(sys.executable).parent / "ruff"
    assert beside.is_file(), (f"ruff is not installed for {sys.executable} (no ruff module, no {beside}); "
                              f"run tools/bootstrap.sh or pip install -c constraints.txt ruff")
    return [str(beside)]


def test_ruff_check_finds_nothing():
    res = subprocess.run(ruff_command() + ["check", "--no-cache", "--output-format", "concise", "."],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"ruff check . (exit {res.returncode}):\n{res.stdout}{res.stderr}"
