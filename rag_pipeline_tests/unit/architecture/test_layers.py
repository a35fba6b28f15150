"""Imports go down: the domain (connectors, the source kernel, text, vectors, index, retrieval, evaluation,
reconciliation, directory, answers, scheduling, notify, serving logic, the composition root, the Dagster-free
pipeline names) imports none of the layers above it (the HTTP face, the Dagster wiring, the runners, the commands).
Among those, the runners (``runs/``) import nothing of the Dagster wiring (``defs/``) but through
``runs/code_location.py``, and no module imports itself back through others. Every import counts: at the top of a
module, inside a function or under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from rag_pipeline_tests.kit.paths import PACKAGE_DIR

PACKAGE = PACKAGE_DIR
UPPER = {"commands", "runs", "defs", "http", "mcp", "cli", "definitions"}
DOMAIN = {"connectors", "sources", "text", "vectors", "index", "retrieval", "evaluation", "reconciliation",
          "directory", "answers", "scheduling", "notify", "serving", "composition", "stages", "settings",
          "env_values", "setting_catalog", "machine", "pipeline"}  # fmt: skip


# The one runners' module that loads the code location's definitions, to execute its assets in this process.
RUNS_CODE_LOCATION = "runs/code_location.py"


def imported(source: str) -> Iterator[tuple[int, str]]:
    """(line, module) of every import in ``source``, wherever it stands (a function's body included); ``from a
    import b`` names ``a`` and ``a.b`` (``b`` may be a module)."""
    try:
        tree = ast.parse(source)
    except SystemError:
        # CPython 3.11.7's "AST constructor recursion depth mismatch" (gh-106905, fixed in 3.11.8) after a deep
        # stack earlier in the process: the same source parses on a second try.
        tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def package_imports() -> Iterator[tuple[Path, int, str]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, module in imported(path.read_text(encoding="utf-8")):
            yield path.relative_to(PACKAGE), line, module


def upward_imports() -> list[str]:
    found = []
    for path, line, module in package_imports():
        if path.parts[0].removesuffix(".py") not in DOMAIN:
            continue
        parts = module.split(".")
        if parts[0] == "rag_pipeline" and len(parts) > 1 and parts[1] in UPPER:
            found.append(f"{path}:{line} imports {module}")
    return sorted(set(found))


def test_imports_inside_functions_count() -> None:
    source = "def f():\n    from rag_pipeline.defs.builders import build_definitions\n"
    assert ("rag_pipeline.defs.builders") in {module for _line, module in imported(source)}


def test_the_domain_imports_no_layer_above_it() -> None:
    assert upward_imports() == []


def test_the_runners_import_the_dagster_wiring_only_through_their_code_location_module() -> None:
    found = {
        f"{path}:{line} imports {module}"
        for path, line, module in package_imports()
        if path.parts[0] == "runs" and path.as_posix() != RUNS_CODE_LOCATION and module.startswith("rag_pipeline.defs")
    }
    assert sorted(found) == []


def test_the_pipeline_names_import_no_dagster() -> None:
    found = {
        f"{path}:{line} imports {module}"
        for path, line, module in package_imports()
        if path.parts[0] == "pipeline" and module.split(".")[0] == "dagster"
    }
    assert sorted(found) == []


def test_no_module_imports_itself_back() -> None:
    modules = {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
               for p in PACKAGE.rglob("*.py")}  # fmt: skip
    graph = {
        name: {m for _line, m in imported(path.read_text(encoding="utf-8")) if m in modules and m != name}
        for name, path in modules.items()
    }
    cycles = []
    for start in sorted(graph):
        # A path from one of ``start``'s imports back to ``start`` is a cycle through it.
        seen: set[str] = set()
        stack = [(m, [start, m]) for m in sorted(graph[start])]
        while stack:
            module, trail = stack.pop()
            if module == start:
                cycles.append(" -> ".join(trail))
                break
            if module in seen:
                continue
            seen.add(module)
            stack.extend((m, [*trail, m]) for m in sorted(graph[module]))
    assert cycles == []


def test_every_top_level_module_is_placed_in_a_layer() -> None:
    tops = {p.name.removesuffix(".py") for p in PACKAGE.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert tops - {"__init__", "data"} <= UPPER | DOMAIN, tops - UPPER - DOMAIN
