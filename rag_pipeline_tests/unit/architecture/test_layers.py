"""Imports go down: the domain (connectors, the source kernel, text, vectors, index, retrieval, evaluation,
reconciliation, directory, answers, scheduling, notify, serving logic, the composition root) imports none of the
layers above it (the HTTP face, the Dagster wiring, the runners, the commands)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "rag_pipeline"
UPPER = {"commands", "runs", "defs", "http", "cli", "definitions"}
DOMAIN = {"connectors", "sources", "text", "vectors", "index", "retrieval", "evaluation", "reconciliation",
          "directory", "answers", "scheduling", "notify", "serving", "composition", "stages", "settings",
          "env_values", "machine"}  # fmt: skip


def upward_imports() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        top = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if top not in DOMAIN:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            for module in modules:
                parts = module.split(".")
                if parts[0] == "rag_pipeline" and len(parts) > 1 and parts[1] in UPPER:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} imports {module}")
    return found


def test_the_domain_imports_no_layer_above_it() -> None:
    assert upward_imports() == []


def test_every_top_level_module_is_placed_in_a_layer() -> None:
    tops = {p.name.removesuffix(".py") for p in PACKAGE.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert tops - {"__init__", "data"} <= UPPER | DOMAIN, tops - UPPER - DOMAIN
