"""Fixtures every test folder shares."""
import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent / "bench"


@pytest.fixture(scope="session")
def bench_script():
    """A function NAME -> the module of bench/NAME.py, loaded once per name (bench scripts are not a
    package: their tests import them by path)."""
    loaded = {}

    def load(name: str):
        if name not in loaded:
            spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
            loaded[name] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(loaded[name])
        return loaded[name]
    return load
