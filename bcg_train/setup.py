from setuptools import find_packages, setup

NAME = "bcg_train"

setup(
    name=NAME,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{NAME}"]),
        (f"share/{NAME}", ["package.xml"]),
    ],
    install_requires=["bcg", "numpy", "warp-lang", "torch", "mujoco", "onnx", "onnxruntime", "pyyaml", "matplotlib",
                      "rsl-rl-lib", "tensorboard"],
    extras_require={"test": ["pytest"]},
    zip_safe=True,
    maintainer="BCG maintainers",
    maintainer_email="maintainers@bcg-robotics.org",
    description="Differentiable G1 simulator (Warp), bundled contact gradients, SHAC training.",
    license="BSD-3-Clause",
    entry_points={"console_scripts": [
        "bcg-train = bcg_train.cli:main",
        "bcg-export = bcg_train.export:main",
        "bcg-curves = bcg_train.curves:main",
        "bcg-eval = bcg_train.evaluation.cli:main",
        "bcg-table = bcg_train.evaluation.table:main",
        "bcg-ship = bcg_train.evaluation.ship:main",
        "bcg-screen = bcg_train.evaluation.screen:main",
    ]},
)
