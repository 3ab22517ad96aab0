"""The `bcg` package: code shared by every node, plus launch/ and config/ under share/bcg/.

launch/ and config/ live once, at the workspace root; this package installs them from there so
`ros2 launch bcg <file>` resolves on a ROS 2 machine.
"""
import os
from pathlib import Path

from setuptools import find_packages, setup

NAME = "bcg"
ROOT = Path(__file__).resolve().parent.parent


def _share(folder: str, pattern: str):
    here = Path(__file__).resolve().parent
    files = sorted(os.path.relpath(p, here) for p in (ROOT / folder).glob(pattern))
    return (f"share/{NAME}/{folder}", files)


setup(
    name=NAME,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{NAME}"]),
        (f"share/{NAME}", ["package.xml"]),
        _share("launch", "*.launch.py"),
        _share("config", "*.yaml"),
        _share("config/train", "*.yaml"),
    ],
    install_requires=["numpy", "pyyaml", "scipy", "cyclonedds", "mujoco"],
    extras_require={"test": ["pytest"]},
    zip_safe=True,
    maintainer="BCG maintainers",
    maintainer_email="maintainers@bcg-robotics.org",
    description="Shared core of the BCG suite (wire protocol, transports, robot description).",
    license="BSD-3-Clause",
    entry_points={"console_scripts": ["bcg = bcg.cli:main"]},
)
