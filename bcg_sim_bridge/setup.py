from setuptools import find_packages, setup

NAME = "bcg_sim_bridge"

setup(
    name=NAME,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{NAME}"]),
        (f"share/{NAME}", ["package.xml"]),
    ],
    install_requires=["bcg", "numpy", "mujoco"],
    extras_require={"test": ["pytest"]},
    zip_safe=True,
    maintainer="BCG maintainers",
    maintainer_email="maintainers@bcg-robotics.org",
    description="MuJoCo G1 bridge on rt/lowstate and rt/lowcmd.",
    license="BSD-3-Clause",
    entry_points={"console_scripts": ["bcg-sim-bridge = bcg_sim_bridge.main:main",
                                      "sim_bridge = bcg_sim_bridge.main:main"]},
)
