"""The suite's cache folder: files it writes for itself and can write again (the built-in stand policy,
the verdicts of `checked_policies`)."""
import os
from pathlib import Path

CACHE_ENV_VAR = "BCG_CACHE_DIR"
"""Folder for generated files; default ~/.cache/bcg."""


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV_VAR) or Path.home() / ".cache" / "bcg")
