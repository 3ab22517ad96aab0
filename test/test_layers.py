"""Layers import downward only: bcg <- bcg_sim_bridge / bcg_policy_node / bcg_train, the trainer never
imports a node package, and inside the policy node core <- realtime <- entry. And the policy node's
500 Hz LowCmd writer process loads neither MuJoCo nor onnxruntime."""
import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("bcg", "bcg_sim_bridge", "bcg_policy_node", "bcg_train")
MAY_IMPORT = {"bcg": {"bcg"}, "bcg_sim_bridge": {"bcg", "bcg_sim_bridge"},
              "bcg_policy_node": {"bcg", "bcg_policy_node"}, "bcg_train": {"bcg", "bcg_train"}}
"""Which workspace packages each package's code (its tests included) may import."""


def imported_modules(path: Path):
    """(line, absolute module name) of every import in the file at `path` (relative ones resolved)."""
    package = ".".join(path.relative_to(REPO).parts[1:-1])      # bcg_policy_node/bcg_policy_node/core/x.py
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                yield node.lineno, ".".join(base + ([node.module] if node.module else []))
            else:
                yield node.lineno, node.module


def python_files(package: str):
    return sorted(p for p in (REPO / package).rglob("*.py") if "build" not in p.parts)


@pytest.mark.parametrize("package", PACKAGES)
def test_packages_import_downward_only(package):
    wrong = [f"{path.relative_to(REPO)}:{line} imports {module}"
             for path in python_files(package) for line, module in imported_modules(path)
             if module.split(".")[0] in PACKAGES and module.split(".")[0] not in MAY_IMPORT[package]]
    assert wrong == []


def test_the_policy_node_s_layers_import_downward_only():
    order = {"core": 0, "realtime": 1, "entry": 2}
    root = REPO / "bcg_policy_node" / "bcg_policy_node"
    wrong = []
    for layer, rank in order.items():
        for path in sorted((root / layer).glob("*.py")):
            for line, module in imported_modules(path):
                parts = module.split(".")
                if parts[0] == "bcg_policy_node" and len(parts) > 1 and order.get(parts[1], -1) > rank:
                    wrong.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert wrong == []
    assert {p.name for p in root.glob("*.py")} == {"__init__.py", "config.py"}     # nothing flat but these


def test_the_lowcmd_writer_process_loads_neither_mujoco_nor_onnxruntime():
    """What the writer process imports (multiprocessing's spawn): the entry script's module, then the
    module of its target and of its arguments."""
    code = textwrap.dedent("""
        import sys
        import bcg_policy_node.entry.main
        import bcg_policy_node.realtime.command_writer
        import bcg_policy_node.realtime.shared_plan
        import bcg.transport.dds
        print(sorted(m for m in ("mujoco", "onnxruntime", "onnx", "torch", "warp") if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
