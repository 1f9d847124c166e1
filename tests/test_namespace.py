"""The ``.conformal`` namespace shows the truth, and the package has no import cycle."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pytest

import conformal_frames as cf
from conformal_frames import namespace
from conformal_frames._stub import STUB

PACKAGE = Path(cf.__file__).parent
DF = pd.DataFrame({"y": [1.0, 2.0], "lo": [0.0, 2.5], "hi": [2.0, 3.0], "g": ["a", "b"]})


def test_signature_starts_with_the_metric_arguments_and_has_by():
    sig = inspect.signature(DF.conformal.coverage)
    names = list(sig.parameters)
    assert names[:3] == ["y", "lo", "hi"]
    assert "by" in names and "invalid" in names
    assert sig.parameters["by"].kind is inspect.Parameter.KEYWORD_ONLY
    assert sig.return_annotation is Any
    assert inspect.signature(pl.DataFrame(DF).conformal.coverage) == sig
    assert list(inspect.signature(cf.ConformalNamespace.coverage).parameters)[:4] == ["self", "y", "lo", "hi"]


@pytest.mark.parametrize("name", sorted(namespace.METRIC_FACTORIES))
def test_every_method_has_its_factory_parameters_by_invalid_and_full_docstring(name):
    factory = namespace.METRIC_FACTORIES[name]
    method = getattr(DF.conformal, name)
    params = inspect.signature(method).parameters
    assert list(params) == [*inspect.signature(factory).parameters, "by", "invalid", "progress"]
    own = inspect.signature(factory, eval_str=True).parameters
    for p in own.values():
        assert (params[p.name].kind, params[p.name].default, params[p.name].annotation) == (
            p.kind,
            p.default,
            p.annotation,
        )
    assert inspect.signature(method).return_annotation is Any
    assert factory.__doc__ is not None and method.__doc__.startswith(factory.__doc__.rstrip())
    assert "by=" in method.__doc__ and "invalid=" in method.__doc__


@pytest.mark.parametrize("name", sorted(namespace.FRAME_FUNCTIONS))
def test_frame_methods_drop_only_the_frame(name):
    fn = namespace.FRAME_FUNCTIONS[name]
    method = getattr(DF.conformal, name)
    assert list(inspect.signature(method).parameters) == list(inspect.signature(fn).parameters)[1:]
    assert method.__doc__ == fn.__doc__


def test_methods_evaluate_the_frame():
    assert DF.conformal.coverage("y", "lo", "hi") == 0.5
    grouped = DF.conformal.coverage("y", "lo", "hi", by="g")
    assert list(grouped["coverage"]) == [1.0, 0.0]


# ---------------------------------------------------------------------------
# the stub checked against the runtime
# ---------------------------------------------------------------------------
def _norm(annotation: Any) -> str | None:
    if annotation is inspect.Parameter.empty or annotation is None:
        return None
    return ast.unparse(ast.parse(str(annotation), mode="eval"))


def _stub_methods() -> dict[str, ast.FunctionDef]:
    tree = ast.parse(STUB.read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ConformalNamespace"]
    return {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}


def _stub_params(fn: ast.FunctionDef) -> list[tuple[str, str, bool, str | None]]:
    a = fn.args
    out = []
    positional = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for arg, default in zip(positional, defaults):
        out.append((arg.arg, "POSITIONAL_OR_KEYWORD", default is not None, _norm(_src(arg.annotation))))
    if a.vararg:
        out.append((a.vararg.arg, "VAR_POSITIONAL", False, _norm(_src(a.vararg.annotation))))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        out.append((arg.arg, "KEYWORD_ONLY", default is not None, _norm(_src(arg.annotation))))
    if a.kwarg:
        out.append((a.kwarg.arg, "VAR_KEYWORD", False, _norm(_src(a.kwarg.annotation))))
    return out[1:]  # without self


def _src(node: ast.expr | None) -> str | None:
    return None if node is None else ast.unparse(node)


def _runtime_params(method: Any) -> list[tuple[str, str, bool, str | None]]:
    from conformal_frames._stub import _widened, role_parameters

    source = method.__dict__.get("source", method)
    written = inspect.signature(source).parameters  # annotations as written
    # a role (of a metric method, report, a function of a frame) also takes an expression: its str reads Column
    roles = role_parameters(method.__name__, source)
    out = []
    for p in list(inspect.signature(method).parameters.values())[1:]:
        annotation = written[p.name].annotation if p.name in written else p.annotation
        if not isinstance(annotation, str):
            annotation = {
                "by": "str | Sequence[str] | None",
                "invalid": "InvalidPolicy | None",
                "progress": "bool | None",
            }[p.name]
        annotation = _widened(p.replace(annotation=annotation), roles).annotation
        out.append((p.name, p.kind.name, p.default is not inspect.Parameter.empty, _norm(annotation)))
    return out


def test_stub_lists_every_method_with_the_runtime_parameters():
    """Regenerate with ``python -m conformal_frames._stub`` when this fails."""
    stub = _stub_methods()
    runtime = {
        name: m for name, m in vars(cf.ConformalNamespace).items() if inspect.isfunction(m) and not name.startswith("_")
    }
    assert sorted(stub) == sorted([*runtime, "__init__"]), (
        "namespace.pyi is stale: run python -m conformal_frames._stub"
    )
    for name, method in runtime.items():
        assert _stub_params(stub[name]) == _runtime_params(method), (
            f"namespace.pyi: {name} differs from the runtime method; run python -m conformal_frames._stub"
        )


def test_stub_generator_reproduces_the_stub():
    generated = ast.parse(__import__("conformal_frames._stub", fromlist=["generate"]).generate())
    assert ast.dump(generated) == ast.dump(ast.parse(STUB.read_text()))


# ---------------------------------------------------------------------------
# import graph
# ---------------------------------------------------------------------------
def _paths() -> dict[str, Path]:
    """Every module of the package (subpackages included) and its file."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:  # the package's own __init__ is not a module of the graph
            out[".".join(("conformal_frames", *parts))] = path
    return out


def _modules() -> list[str]:
    return sorted(_paths())


def _imports(module: str, *, top_level_only: bool) -> set[str]:
    tree = ast.parse(_paths()[module].read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("conformal_frames"):
            for alias in node.names:  # from package import submodule, or from module import name
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in _paths() else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("conformal_frames.")}
    return {m for m in found if m in _modules()} - {module}


def _cycle(top_level_only: bool) -> list[str] | None:
    graph = {m: _imports(m, top_level_only=top_level_only) for m in _modules()}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> list[str] | None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return [*path[path.index(n) :], n] if n in path else [*path, n]
            if n not in state and (found := visit(n, [*path, n])):
                return found
        state[m] = 2
        return None

    for m in graph:
        if m not in state and (found := visit(m, [m])):
            return found
    return None


def test_no_import_cycle_between_modules():
    assert _cycle(top_level_only=True) is None


def test_no_import_cycle_even_through_function_level_imports():
    assert _cycle(top_level_only=False) is None


def test_every_module_imports_first():
    """Each module imported first, with no module of the package loaded yet.

    Importing a module imports the package first: a module that
    ``import conformal_frames`` loads is imported exactly as that import does,
    so only the others need an import of their own.
    """
    script = (
        "import importlib, sys\n"
        "import conformal_frames\n"
        "package = {m for m in sys.modules if m.startswith('conformal_frames')}\n"
        f"for module in [m for m in {_modules()!r} if m not in package]:\n"
        "    for loaded in [m for m in sys.modules if m.startswith('conformal_frames')]:\n"
        "        del sys.modules[loaded]\n"
        "    importlib.import_module(module)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
