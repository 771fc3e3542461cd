"""The package's layers import only downward, and no module imports polyopt inside a function.

The order is written once, here, lowest first. A module may import from its own layer or any
lower one; the imports between modules (those inside functions included) must form no cycle.
Only optional third-party packages may be imported inside a function, and polyopt's own
modules only in the package's PEP 562 ``__getattr__`` (public names loaded at first use).
"""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import polyopt
from polyopt.costmodel.gpu_machine import GpuModel
from polyopt.costmodel.machine import Machine
from polyopt.pipeline.gpu_policy import GpuPolicy
from polyopt.pipeline.policy import CpuPolicy

ROOT = Path(polyopt.__file__).parent

# Lowest first. ``core``: errors, types, environment, the host's description, the trust rule
# for cache files (``polyopt.trust``: the machine model reads its profile under it), the frozen
# IR (which the language front end builds) and the bundled kernels' sources.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("polyopt.errors", "polyopt.dtypes", "polyopt.config", "polyopt.host",
              "polyopt.trust", "polyopt.version", "polyopt.ir", "polyopt.kernels")),
    ("lang", ("polyopt.lang",)),
    ("poly", ("polyopt.poly",)),
    ("autodiff", ("polyopt.autodiff",)),  # derived gradients: TC source from the checked IR
    # The Schedule artifact and its verbs; the machine and the cost model (which read
    # schedules); the automatic pipelines (which read both); the researcher's views.
    ("schedules", ("polyopt.schedules",)),
    ("costmodel", ("polyopt.costmodel",)),
    ("pipeline", ("polyopt.pipeline",)),
    ("views", ("polyopt.views",)),
    ("codegen", ("polyopt.codegen",)),
    ("runtime", ("polyopt.runtime",)),
    ("driver", ("polyopt.driver",)),
    # The tuning database's read path (key, db, lookup, replay): compile asks it directly.
    ("tuning", ("polyopt.tuning",)),
    # compile (api, its Kernel facade over variants); einsum (subscripts) on it
    ("api", ("polyopt.api", "polyopt.variants", "polyopt.subscripts")),
    ("torch", ("polyopt.torch",)),  # PyTorch operators: the one module that imports torch
    # The tuner's search, which measures candidates through compile.
    ("search", tuple(f"polyopt.tuning.{m}" for m in (
        "space", "features", "model", "history", "guided", "search", "measure", "worker",
        "tuner"))),
    ("bench", ("polyopt.bench",)),
    ("cli", ("polyopt.cli",)),
    ("package", ("polyopt",)),  # polyopt/__init__.py: the public names
)


def layer_of(module: str) -> int:
    best = None
    for rank, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (
                    best is None or len(p) > len(best[1])):
                best = (rank, p)
    assert best is not None, f"module {module} is in no layer: add it to LAYERS"
    return best[0]


def modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    kernels = Path(polyopt.kernels.__file__)
    out["polyopt.kernels"] = kernels
    return out


def imports(name: str, path: Path, known: set[str]) -> Iterator[tuple[str, int, bool]]:
    """(imported polyopt module, line, inside a function) for each import in ``path``."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    inner = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
             and not _lazy(name, tree, f) for n in ast.walk(f)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for t in targets:
            if t == "polyopt" or t.startswith("polyopt."):
                while t not in known:
                    t = t.rpartition(".")[0]
                yield t, node.lineno, id(node) in inner


def _lazy(name: str, tree: ast.Module, function: ast.AST) -> bool:
    """Is ``function`` the package's PEP 562 ``__getattr__``? It imports the public names
    only some users need (the tuner's search) at their first use, so that ``import polyopt``
    stays fast; no other function may import polyopt."""
    return name == "polyopt" and function in tree.body and getattr(
        function, "name", None) == "__getattr__"


def graph() -> tuple[dict[str, set[str]], list[str], list[str]]:
    mods = modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    upward, inner = [], []
    for name, path in mods.items():
        for target, line, in_function in imports(name, path, set(mods)):
            if target == name:
                continue
            # kernels/ installs from its own folder (in a git worktree, the main checkout's)
            shown = path.relative_to(ROOT.parent) if path.is_relative_to(ROOT.parent) else path
            where = f"{shown}:{line}: {name} imports {target}"
            if in_function:
                inner.append(where)
            if layer_of(target) > layer_of(name):
                upward.append(where)
            edges[name].add(target)
    return edges, upward, inner


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_imports_run_downward() -> None:
    _, upward, _ = graph()
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_no_polyopt_import_inside_a_function() -> None:
    _, _, inner = graph()
    assert not inner, "imports inside functions:\n" + "\n".join(inner)


def test_no_import_cycles() -> None:
    edges, _, _ = graph()
    found = cycles(edges)
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


# What only some users need, which `import polyopt` must not load (it loads them at first
# use): ml_dtypes (bfloat16 arrays; its import alone took 0.6 s), the tuner's search and
# measurement, einsum, autodiff, the benchmarks and torch.
NOT_AT_IMPORT = ("ml_dtypes", "torch", "polyopt.bench", "polyopt.torch", "polyopt.autodiff",
                 "polyopt.subscripts", *LAYERS[[n for n, _ in LAYERS].index("search")][1])


def test_import_polyopt_leaves_optional_parts_unloaded() -> None:
    code = "import sys, polyopt; print(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    loaded = [m for m in out if any(m == p or m.startswith(p + ".") for p in NOT_AT_IMPORT)]
    assert not loaded, f"import polyopt loaded {loaded}"
    assert "polyopt.tuning.replay" in out  # compile reads the tuning database itself


# The cost model reads the machine model alone: a pipeline's threshold (a field or method
# of ``CpuPolicy``/``GpuPolicy`` that the machine models lack) is an argument of the cost
# model's functions, never read there. Imports from the pipeline already fail the layer
# order above; this also catches a policy passed in and read by name.
def _policy_names() -> set[str]:
    def names(cls: type) -> set[str]:
        return {n for n in vars(cls) if not n.startswith("_")} | {
            f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]

    # ``machine``, ``model``: the policy's own models, which the cost model takes itself
    return (names(CpuPolicy) | names(GpuPolicy)) - names(Machine) - names(GpuModel) - {
        "machine", "model"}


def test_the_cost_model_reads_no_pipeline_threshold() -> None:
    thresholds, found = _policy_names(), []
    for name, path in modules().items():
        if layer_of(name) != layer_of("polyopt.costmodel"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in thresholds:
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: .{node.attr}")
            if isinstance(node, ast.Name) and node.id in {"CpuPolicy", "GpuPolicy"}:
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {node.id}")
    assert not found, "the cost model reads a pipeline threshold:\n" + "\n".join(found)
