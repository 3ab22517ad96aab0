from setuptools import find_packages, setup

NAME = "bcg_policy_node"

setup(
    name=NAME,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{NAME}"]),
        (f"share/{NAME}", ["package.xml"]),
    ],
    install_requires=["bcg", "numpy", "onnx", "onnxruntime"],
    extras_require={"test": ["pytest"]},
    zip_safe=True,
    maintainer="BCG maintainers",
    maintainer_email="maintainers@bcg-robotics.org",
    description="Realtime ONNX policy node for the Unitree G1.",
    license="BSD-3-Clause",
    entry_points={"console_scripts": ["bcg-policy-node = bcg_policy_node.entry.main:main",
                                      "policy_node = bcg_policy_node.entry.main:main"]},
)
