"""The package's shape as a user and a maintainer rely on it: the public surface is exactly what
the README documents, every name the README and the docs site use exists, modules and functions
stay small, each sub-package says what it owns, and no module imports another in a cycle."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import grimp
from documentation import all_text

import daybook

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "daybook"
README = (ROOT / "README.md").read_text()

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60


def _documented_names() -> set[str]:
    """The names listed under the README's "Public names" heading (in backticks)."""
    section = README.split("### Public names", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    return set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", section))


def test_public_surface_is_exactly_the_documented_set() -> None:
    assert set(daybook.__all__) == _documented_names()
    assert len(daybook.__all__) == len(set(daybook.__all__))


def test_internal_names_do_not_leak_from_the_package() -> None:
    public = {n for n in vars(daybook) if not n.startswith("_")}
    submodules = {m.name for m in pkgutil.iter_modules(daybook.__path__)}
    assert public - set(daybook.__all__) - submodules == set()


def test_every_name_the_readme_uses_exists() -> None:
    """The README and every page under docs/ (tests/documentation.py reads them)."""
    docs = all_text()
    for name in set(re.findall(r"\bdaybook\.([A-Z][A-Za-z0-9_]*)", docs)):
        assert name in daybook.__all__, f"the docs use daybook.{name}, which is not exported"
    for method in set(re.findall(r"\bbook\.([a-z_]+)\(", docs)):
        assert callable(getattr(daybook.Daybook, method, None)), f"the docs use book.{method}()"
    ctx_attrs = set(re.findall(r"\bctx\.([a-z_]+)", docs))
    assert ctx_attrs, "the docs document ctx"
    for attr in ctx_attrs - {"budget"}:  # budget is set per context instance
        assert callable(getattr(daybook.Context, attr, None)), f"the docs use ctx.{attr}"
    for module in set(re.findall(r"\bdaybook\.adapters\.([a-z_]+)", docs)):
        importlib.import_module(f"daybook.adapters.{module}")


def _python_files() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_no_module_is_over_600_lines() -> None:
    long = {
        str(p.relative_to(SRC)): n
        for p in _python_files()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_60_lines() -> None:
    long: dict[str, int] = {}
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = (node.end_lineno or node.lineno) - start + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(SRC)}:{node.lineno} {node.name}"] = lines
    assert long == {}


def test_every_sub_package_says_what_it_owns_and_may_import() -> None:
    for init in sorted(SRC.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc) > 40, f"{init.parent.name}/__init__.py needs a docstring saying what it owns"
        if init.parent.name not in ("adapters", "demo", "store"):
            assert "import" in doc, f"{init.parent.name}/__init__.py should say what it may import"


def test_no_import_cycle_between_modules() -> None:
    graph = grimp.build_graph("daybook", exclude_type_checking_imports=False)
    modules = sorted(graph.modules)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported == "daybook":
                continue  # the facade package re-exports; nothing inside imports it
            if state.get(imported) == 1:
                cycles.append(
                    [*path[path.index(imported) :], imported] if imported in path else [module, imported]
                )
            elif imported not in state:
                visit(imported, [*path, imported])
        state[module] = 2

    for module in modules:
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_only_the_clients_of_the_public_api_import_the_package_root() -> None:
    # The CLI, the integrations and the adapters are clients of the public API (`from daybook
    # import Daybook`; the last two may import nothing else of daybook's, see pyproject.toml);
    # nothing else may import the root, which imports everything.
    graph = grimp.build_graph("daybook")
    importers = graph.find_modules_that_directly_import("daybook")
    clients = ("daybook.cli.", "daybook.integrations.", "daybook.adapters.")
    assert {m for m in importers if not m.startswith(clients)} == set()
