"""The package's layering, checked on its source: (a) only drvgemm/runtime/
imports cuda.bindings; (b) no function-local imports of drvgemm's own modules
(the dependency graph is the one a reader sees at the top of each file);
(c) the module import graph is a DAG; (d) analysis/ never reaches the GPU."""
import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "drvgemm"
# Third-party imports that may stay inside functions: optional packages.
OPTIONAL = {"torch", "cupy", "cupy_backends", "matplotlib", "nvidia"}
# Required, but imported where first needed: ml_dtypes' import costs ~0.5 s,
# more than the rest of ``import drvgemm`` (runtime/dtypes.py).
SLOW_TO_IMPORT = {"ml_dtypes"}


def _modules():
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_pkg)
    return out


MODULES = _modules()


def _resolve(module, is_pkg, node):
    """Absolute module names an import statement names (for `from X import
    y`, X.y when that is a module, else X)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module.split(".") if is_pkg else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module
    names = []
    for a in node.names:
        sub = f"{prefix}.{a.name}"
        names.append(sub if sub in MODULES else prefix)
    return names


def _import_nodes(tree):
    """(import node, inside a function?) for every import statement."""
    out = []

    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.append((child, in_function))
            walk(child, in_function or isinstance(child, (ast.FunctionDef,
                                                          ast.AsyncFunctionDef, ast.Lambda)))

    walk(tree, False)
    return out


def _imports(module):
    path, is_pkg = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    top, local = [], []
    for node, in_function in _import_nodes(tree):
        names = _resolve(module, is_pkg, node)
        (local if in_function else top).append((node.lineno, names))
    return top, local


def _internal_graph():
    graph = {}
    for m in MODULES:
        top, local = _imports(m)
        graph[m] = sorted({n for _, names in top + local for n in names
                           if n in MODULES and n != m})
    return graph


def test_only_runtime_imports_cuda_bindings():
    bad = []
    for m in MODULES:
        top, local = _imports(m)
        for line, names in top + local:
            if any(n == "cuda" or n.startswith("cuda.") for n in names) \
                    and not m.startswith("drvgemm.runtime."):
                bad.append(f"{m}:{line}")
    assert not bad, f"cuda.bindings imported outside drvgemm/runtime/: {bad}"


def test_no_function_local_imports_of_drvgemm():
    bad = []
    for m in MODULES:
        _, local = _imports(m)
        for line, names in local:
            for n in names:
                root = n.split(".")[0]
                if root == "drvgemm" or root not in OPTIONAL | SLOW_TO_IMPORT:
                    bad.append(f"{m}:{line} imports {n}")
    assert not bad, "imports inside functions (move them to the top of the file):\n" + \
        "\n".join(bad)


def _cycles(graph):
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in graph[m]:
            if state.get(n) == "open":
                cycles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in graph:
        if m not in state:
            visit(m)
    return cycles


def test_module_graph_is_a_dag():
    cycles = _cycles(_internal_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_analysis_is_pure_python():
    graph = _internal_graph()
    for m, deps in graph.items():
        if m.startswith("drvgemm.analysis"):
            assert all(d.startswith("drvgemm.analysis") for d in deps), (m, deps)


@pytest.mark.parametrize("layer,forbidden", [
    ("drvgemm.runtime", ("drvgemm.ladders", "drvgemm.tools", "drvgemm.cli", "drvgemm.analysis")),
    ("drvgemm.ladders", ("drvgemm.tools", "drvgemm.cli")),
    ("drvgemm.tools", ("drvgemm.cli",)),
])
def test_layers_import_downwards_only(layer, forbidden):
    graph = _internal_graph()
    bad = [(m, d) for m, deps in graph.items() if m.startswith(layer + ".")
           for d in deps if d.startswith(forbidden)]
    assert not bad, bad


def test_the_checks_see_violations():
    """The checker itself: an import inside a function is flagged as local,
    one at module level (also inside try) is not, relative names resolve."""
    tree = ast.parse("try:\n    import a\nexcept ImportError:\n    pass\n"
                     "def f():\n    from .ladders.gemm import dispatch\n")
    (top, top_local), (inner, inner_local) = _import_nodes(tree)
    assert not top_local and inner_local
    assert _resolve("drvgemm.cli.bench", False, ast.parse("from ..runtime import driver").body[0]) \
        == ["drvgemm.runtime.driver"]
    assert _resolve("drvgemm", True, inner) == ["drvgemm.ladders.gemm.dispatch"]
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"]}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": ["b", "c"], "b": ["c"], "c": []}) == []
