"""The package's shape as a user and a maintainer rely on it: the public surface is exactly what
the README documents, every name the README and the docs site use exists, modules and functions
stay small, each sub-package says what it owns, and no module imports another in a cycle."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
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


def test_import_daybook_loads_each_public_name_from_the_module_type_checkers_see() -> None:
    """`daybook/__init__.py` imports its names on first use (a table for the interpreter, and
    TYPE_CHECKING imports for mypy and readers): the two say the same, and every name resolves
    to the object its module defines, whether read as `daybook.X` or `from daybook import X`."""
    tree = ast.parse((SRC / "__init__.py").read_text())
    seen: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            seen.update({alias.name: node.module for alias in node.names})
    assert seen == daybook._WHERE
    assert set(daybook.__all__) == {*seen, "__version__"}
    for name, module in seen.items():
        value = getattr(importlib.import_module(f"daybook.{module}"), name)
        assert getattr(daybook, name) is value
        exec(f"from daybook import {name} as found", namespace := {})
        assert namespace["found"] is value


def test_a_daybook_process_imports_only_what_it_uses() -> None:
    """Every CLI call, worker and agent starts an interpreter: `import daybook` loads no module
    before one of its names is used, and the CLI loads neither asyncio (only async workflows and
    the MCP proxy need it) nor urllib.request (only a webhook does)."""
    code = (
        "import sys, daybook; first = sorted(m for m in sys.modules if m.startswith('daybook'));"
        "import daybook.cli; print(first, 'asyncio' in sys.modules, 'urllib.request' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["['daybook']", "False", "False"]


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
        found = getattr(daybook.Context, attr, None)  # a method, or a property (ctx.run_id)
        assert callable(found) or isinstance(found, property), f"the docs use ctx.{attr}"
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


def test_context_is_one_class_over_facet_objects() -> None:
    # `ctx.*` delegates to facet objects built with their dependencies; no mixins, no MRO to
    # read to know which facet answers a call.
    assert daybook.Context.__mro__ == (daybook.Context, object)
    assert daybook.Context.__bases__ == (object,)


def _cursor_fields() -> set[str]:
    """The attributes the execution cursor sets on itself (`journal/execution.py`), by their
    own names and, for a private one, the public name it may be read by."""
    tree = ast.parse((SRC / "journal" / "execution.py").read_text())
    cursor = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Execution")
    own = {
        t.attr
        for node in ast.walk(cursor)
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign)
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    }
    return own | {name.lstrip("_") for name in own}


# How the code outside the journal names a cursor: `exe`, `fresh`, `view`, ..., `x._exe`, `x.exe`.
_CURSOR_NAMES = {"exe", "bexe", "fresh", "view", "aborting", "cursor", "parent"}
_MUTATORS = {"pop", "popitem", "update", "add", "discard", "remove", "clear", "setdefault", "append"}


def _is_cursor(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id in _CURSOR_NAMES) or (
        isinstance(node, ast.Attribute) and node.attr in ("_exe", "exe")
    )


def test_only_the_journal_moves_the_cursor() -> None:
    # The cursor's fields are the journal's; everyone else moves it through its verbs
    # (`skip_through`, `start_at`, `revisit`, `at_live`, `branch`, ...) or reads it.
    fields = _cursor_fields()
    assert {"steps", "next_step", "next_seq", "consumed"} <= fields
    found: list[str] = []
    for path in _python_files():
        if path.parent == SRC / "journal":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = [e for t in node.targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MUTATORS
            ):
                targets = [node.func.value]
            for t in targets:
                inner = t.value if isinstance(t, ast.Subscript) else t
                if isinstance(inner, ast.Attribute) and inner.attr in fields and _is_cursor(inner.value):
                    found.append(f"{path.relative_to(SRC)}:{node.lineno} {ast.unparse(inner)}")
    assert found == []


def _facet_modules() -> set[Path]:
    """The modules of `Context` and of every facet class (subclasses of the journal's `Facet`)."""
    from daybook.journal.facet import Facet

    found, todo = set(), [Facet]
    while todo:
        cls = todo.pop()
        found.add(Path(importlib.import_module(cls.__module__).__file__ or ""))
        todo.extend(cls.__subclasses__())
    return {p.resolve() for p in found} | {(SRC / "context.py").resolve()}


def test_no_facet_reaches_another_by_getattr() -> None:
    # A facet calls another through the object it was given, a link the layer check can see.
    modules = _facet_modules()
    assert len(modules) > 10
    found = []
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and ast.unparse(node.func) in ("getattr", "hasattr")
                and node.args
                and ast.unparse(node.args[0]) == "self"
            ):
                found.append(f"{path.relative_to(SRC.resolve())}:{node.lineno}")
    assert found == []


def test_ctx_says_what_each_facet_says() -> None:
    # `help(ctx.x)` and the API reference read Context's docstrings; the facet that does the
    # work keeps its own. Where a facet's method says something, Context's says it too.
    import inspect

    from daybook.journal.facet import Facet

    stale, classes, todo = [], set(), [Facet]
    while todo:
        cls = todo.pop()
        classes.add(cls)
        todo.extend(cls.__subclasses__())
    for cls in classes:
        for name, fn in vars(cls).items():
            if name.startswith("_") or not hasattr(daybook.Context, name) or not callable(fn):
                continue
            said = inspect.getdoc(fn) or ""
            if (
                said
                and "Context." not in said
                and said not in (inspect.getdoc(getattr(daybook.Context, name)) or "")
            ):
                stale.append(f"{cls.__name__}.{name}")
    assert stale == []
