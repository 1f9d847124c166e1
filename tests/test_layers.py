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
#: what each layer may import (besides itself); ``_validate``, ``_renames``,
#: ``_progress``, ``errors`` and ``results`` are the leaves every layer may use
LEAVES = {"_validate", "_renames", "_progress", "errors", "results"}
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
