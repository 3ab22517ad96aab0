"""Layers import downward only: bcg <- bcg_sim_bridge / bcg_policy_node / bcg_train, the trainer never
imports a node package, and inside the policy node core <- realtime <- entry; no module imports one
that imports it back (directly or round a longer cycle, lazy imports included). And the policy node's
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


def imported_modules(path: Path, nodes=None):
    """(line, absolute module name) of every import in the file at `path` (relative ones resolved), or
    of the import statements `nodes` of that file. `from M import a` names M."""
    package = ".".join(path.relative_to(REPO).parts[1:-1])      # bcg_policy_node/bcg_policy_node/core/x.py
    for node in ast.walk(ast.parse(path.read_text(), str(path))) if nodes is None else nodes:
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


def run_imports(statements):
    """The import statements among `statements` (and within them) that can run: at import time or
    later, inside a function (a lazy import depends on its module all the same), but not under
    `if TYPE_CHECKING:`."""
    for node in statements:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif not (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            yield from run_imports(ast.iter_child_nodes(node))


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).parts[1:]                      # bcg_train/bcg_train/motion/clip.py
    return ".".join(parts[:-1] if parts[-1] == "__init__.py" else parts[:-1] + (path.stem,))


def import_graph():
    """Module -> the workspace modules it imports (`run_imports`): each module an import names (`from
    P import m` names the submodule P.m where there is one) and the packages above it that are not
    its importer's own (their __init__ runs first)."""
    paths = {module_name(p): p for package in PACKAGES for p in python_files(package)
             if p.relative_to(REPO).parts[1] == package}
    graph = {}
    for name, path in paths.items():
        nodes = list(run_imports(ast.parse(path.read_text(), str(path)).body))
        named = [module for _, module in imported_modules(path, nodes)]
        named += [f"{module}.{a.name}" for node, (_, module) in zip(nodes, imported_modules(path, nodes))
                  if isinstance(node, ast.ImportFrom) for a in node.names]
        own = {".".join(name.split(".")[:k]) for k in range(1, name.count(".") + 1)}
        graph[name] = {".".join(m.split(".")[:k]) for m in named for k in range(1, m.count(".") + 2)} \
            & paths.keys() - own - {name}
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index, low, stack, found = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_one_that_imports_it_back():
    """E.g. the node's entry `main` imports `run_node` (once the arguments are good), so `run_node`
    takes nothing from `main`."""
    graph = import_graph()
    assert "bcg_policy_node.entry.run_node" in graph["bcg_policy_node.entry.main"]        # a lazy import counts
    assert "bcg_sim_bridge.ros_node" in graph["bcg_sim_bridge.main"]
    assert cycles(graph) == []


def test_a_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


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
