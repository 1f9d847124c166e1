"""The package's layers, enforced over every import (function-level imports included).

- ``metrics/*`` imports only the engine, the inputs, the numerics, validation
  and results, and never another metrics module;
- the engine imports nothing above it; the inputs and numerics import only
  the engine and each other;
- no private name (``_x``) and no private module crosses a package boundary;
- no import cycle between modules.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "src" / "conformal_frames"
PACKAGES = ("engine", "inputs", "numerics", "metrics", "reporting")
#: what each layer may import (besides itself); ``_validate``, ``_roles``, ``_renames``,
#: ``_progress``, ``errors`` and ``results`` are the leaves every layer may use
LEAVES = {"_validate", "_roles", "_renames", "_progress", "errors", "results"}
ALLOWED = {
    "engine": LEAVES,
    "numerics": LEAVES | {"engine"},
    "inputs": LEAVES | {"engine", "numerics"},
    "metrics": LEAVES | {"engine", "numerics", "inputs"},
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


@functools.cache
def _imports(module: str) -> list[tuple[str, str | None, int]]:
    """``(module imported, name imported or None, line)`` for every import of ``conformal_frames``."""
    tree = ast.parse(MODULES[module].read_text())
    out: list[tuple[str, str | None, int]] = []
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if not base.startswith("conformal_frames"):
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                out.append((full, None, node.lineno) if full in MODULES else (base, alias.name, node.lineno))
        elif isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names if a.name.startswith("conformal_frames")]
    return out


def _layer(module: str) -> str:
    """``engine``, ``inputs``, ... for a module of a subpackage; the module's own name at the top level."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "conformal_frames"


def _edges() -> dict[str, set[str]]:
    return {m: {target for target, _, _ in _imports(m) if target != m} for m in MODULES}


def test_the_layout_has_its_layers() -> None:
    assert {_layer(m) for m in MODULES} >= set(PACKAGES)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) in ALLOWED))
def test_a_layer_imports_only_the_layers_below_it(module: str) -> None:
    layer = _layer(module)
    wrong = [
        f"line {line}: {target}"
        for target, _, line in _imports(module)
        if _layer(target) != layer and _layer(target) not in ALLOWED[layer]
    ]
    assert not wrong, f"{module} ({layer}) imports outside {sorted(ALLOWED[layer])}: {wrong}"


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if _layer(m) == "metrics" and m != "conformal_frames.metrics")
)
def test_no_metrics_module_imports_another(module: str) -> None:
    others = [
        f"line {line}: {target}"
        for target, _, line in _imports(module)
        if _layer(target) == "metrics" and target != module
    ]
    assert not others, f"{module} imports another family: {others}"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_crosses_a_package_boundary(module: str) -> None:
    crossing = []
    for target, name, line in _imports(module):
        if _layer(target) == _layer(module):
            continue
        # a private module of another package (a top-level private module is a leaf of its own)
        private_module = any(_private(part) for part in target.split(".")[2:])
        if private_module or (name is not None and _private(name)):
            crossing.append(f"line {line}: {target}" + (f".{name}" if name else ""))
    crossing += _private_attributes(module)
    assert not crossing, f"{module} uses private names of another package: {crossing}"


def _private_attributes(module: str) -> list[str]:
    """``alias._x`` (or ``alias.sub._x``) where ``alias`` is a module of another package."""
    bound = {}
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("conformal_frames"):
            for a in node.names:
                if f"{node.module}.{a.name}" in MODULES:
                    bound[a.asname or a.name] = f"{node.module}.{a.name}"
    found = []
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if not isinstance(node, ast.Attribute):
            continue
        chain, root = [node.attr], node.value
        while isinstance(root, ast.Attribute):
            chain.insert(0, root.attr)
            root = root.value
        other = isinstance(root, ast.Name) and root.id in bound and _layer(bound[root.id]) != _layer(module)
        if other and any(_private(c) for c in chain):
            found.append(f"line {node.lineno}: {root.id}.{'.'.join(chain)}")
    return sorted(set(found))


def test_no_import_cycle() -> None:
    edges = _edges()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for d in sorted(edges.get(m, ())):
            if d not in MODULES or d == "conformal_frames":
                continue  # the package's __init__ is the top: everything may be reached from it
            if state.get(d) == 1:
                return [*path[path.index(d) :], d]
            if d not in state and (cycle := visit(d)):
                return cycle
        state[m] = 2
        path.pop()
        return None

    for m in sorted(MODULES):
        if m not in state and (cycle := visit(m)):
            pytest.fail("import cycle: " + " -> ".join(cycle))


# ---------------------------------------------------------------------------
# the top band: namespace / cli -> reporting -> plots -> metrics; summaries below reporting
# ---------------------------------------------------------------------------
#: rank of each top-band module (or package): a module imports no module of a higher rank
TOP_BAND = {
    "conformal_frames.summaries": 1,
    "conformal_frames._widths": 1,
    "conformal_frames.plots": 2,
    "conformal_frames.slices": 2,
    "reporting": 3,
    "conformal_frames.namespace": 4,
    "conformal_frames.cli": 4,
    "conformal_frames.demo": 4,
}


def _rank(module: str) -> int | None:
    return TOP_BAND.get(module, TOP_BAND.get(_layer(module)))


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _rank(m) is not None))
def test_the_top_band_imports_downwards(module: str) -> None:
    rank = _rank(module)
    assert rank is not None
    upward = [
        f"line {line}: {target}"
        for target, _, line in _imports(module)
        if (other := _rank(target)) is not None and other > rank
    ]
    assert not upward, f"{module} imports a module above it in the top band: {upward}"


# ---------------------------------------------------------------------------
# a Query is read through its recorder verbs outside the engine
# ---------------------------------------------------------------------------
#: what a metric, an input reader or a consumer may read of a Query besides its methods
QUERY_INPUTS = {"schema", "keys", "group", "n", "invalid", "count"}


def _query_fields() -> set[str]:
    import dataclasses

    from conformal_frames.engine import Query

    return {f.name for f in dataclasses.fields(Query) if not f.name.startswith("_")} - QUERY_INPUTS


def _is_query(annotation: ast.expr | None) -> bool:
    text = ast.unparse(annotation) if annotation is not None else ""
    return text.strip("'\"").split(".")[-1] == "Query"


def _query_names(tree: ast.AST) -> set[str]:
    """Names (and ``self.<attribute>``) annotated or assigned as a Query."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and _is_query(node.annotation):
            names.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and _is_query(node.annotation) and isinstance(node.target, ast.Name):
            names |= {node.target.id, f"self.{node.target.id}"}
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            called = ast.unparse(node.value.func).split(".")[-1]
            if called in ("Query", "fork"):
                names |= {ast.unparse(t) for t in node.targets}
    return names


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) != "engine"))
def test_outside_the_engine_a_query_is_read_through_its_verbs(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text())
    names, fields = _query_names(tree), _query_fields()
    reads = [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in fields and ast.unparse(node.value) in names
    ]
    assert not reads, f"{module} reads the Query's record (use its Spec, or a verb of the engine): {reads}"


# ---------------------------------------------------------------------------
# a function that needs scrolling is two functions
# ---------------------------------------------------------------------------
MAX_LINES = 80


def _code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The lines of a function without its docstring (a numpydoc docstring is documentation, not code)."""
    assert node.end_lineno is not None
    first = node.body[0]
    docstring = (
        isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    )
    skipped = (first.end_lineno or first.lineno) - first.lineno + 1 if docstring else 0
    return node.end_lineno - node.lineno + 1 - skipped


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_function_is_longer_than_80_lines(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text())
    long = [
        f"{node.name} ({_code_lines(node)} lines, line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _code_lines(node) > MAX_LINES
    ]
    assert not long, f"{module}: functions over {MAX_LINES} lines (docstring aside): {long}"
