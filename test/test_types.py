"""The bottom package, bcg, passes mypy with mypy.ini's settings (mypy is pinned in constraints.txt
and installed by tools/bootstrap.sh; without it the test is skipped, saying so)."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(600)
def test_mypy_finds_nothing_in_bcg():
    if importlib.util.find_spec("mypy") is None:
        pytest.skip(f"mypy is not installed for {sys.executable}: run tools/bootstrap.sh or "
                    "pip install -c constraints.txt mypy types-PyYAML")
    res = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "mypy.ini")], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"mypy (exit {res.returncode}):\n{res.stdout}{res.stderr}"
