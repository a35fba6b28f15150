"""A source's whole knowledge lives in ``connectors/<name>/`` (and its Dagster wiring in ``defs/<name>/``): no other
module of the package imports a connector or spells a source's name in code.

"Spells" means a string constant (not a docstring) that is a registered source's name, or an id beginning with
``<name>:`` (a document id, an ACL group), or an import of ``rag_pipeline.connectors.<name>``. Prose that mentions
Slack in a help text is not code; the registry's one line per built-in source is the way in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rag_pipeline.sources.registry import BUILT_IN, registered_sources
from rag_pipeline_tests.kit.paths import PACKAGE_DIR

PACKAGE = PACKAGE_DIR
# Slack as a *notification channel* (posting run failures), not as a source of documents: it reuses the Slack
# connector's client builder and error wording.
NOT_A_SOURCE = {"notify/slack_notice.py", "defs/notifications.py"}
# Folders under connectors/ that are no source: kernels several connectors share (the Atlassian REST client, settings
# and reader Jira and Confluence both import, so neither imports the other). Like any shared module a kernel names no
# source (the first test), and it registers none.
SHARED_KERNELS = {"atlassian"}
# "tools" is also an English word: the ``tools`` subcommand and the JSON field listing the tools found.
WORDS = {("commands/tools.py", "'tools'"), ("retrieval/tool_search.py", "'tools'")}


def _owned_by(relative: str, name: str) -> bool:
    return relative.startswith((f"connectors/{name}/", f"defs/{name}/"))


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def spelled_sources(path: Path, names: set[str]) -> list[str]:
    """Where a module spells a source: ``line: what``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            value = node.value
            if value in names or any(value.startswith(f"{n}:") for n in names):
                out.append(f"{node.lineno}: {value!r}")
        modules: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        for module in modules:
            parts = module.split(".")
            if parts[:2] == ["rag_pipeline", "connectors"] and len(parts) > 2 and parts[2] in names:
                out.append(f"{node.lineno}: import {module}")
                break
    return out


def test_no_module_outside_a_connector_spells_its_source() -> None:
    names = set(registered_sources())
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in NOT_A_SOURCE:
            continue
        foreign = {n for n in names if not _owned_by(relative, n)}
        spelled = spelled_sources(path, foreign)
        offenders += [f"{relative}:{w}" for w in spelled if (relative, w.partition(": ")[2]) not in WORDS]
    assert offenders == [], "shared code spells a source (move it into connectors/<name>/ or a Source hook):\n" + (
        "\n".join(offenders)
    )


def test_the_check_catches_a_spelled_name_an_id_and_an_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""slack in a docstring is prose."""\n'
        "from rag_pipeline.connectors.jira.dump import JiraRead\n"
        "if source == 'slack':\n    group = 'jira:site:project:OPS'\n"
        "help = 'Slack channel name (not code)'\n",
        encoding="utf-8",
    )
    assert spelled_sources(module, {"slack", "jira"}) == [
        "2: import rag_pipeline.connectors.jira.dump",
        "3: 'slack'",
        "4: 'jira:site:project:OPS'",
    ]


def test_every_connector_folder_is_a_source_or_a_shared_kernel() -> None:
    folders = {p.name for p in (PACKAGE / "connectors").iterdir() if (p / "__init__.py").is_file()}
    assert folders - set(registered_sources()) == SHARED_KERNELS
    assert not [k for k in SHARED_KERNELS if (PACKAGE / "connectors" / k / "source.py").exists()]


@pytest.mark.parametrize("reference", BUILT_IN)
def test_a_built_in_source_is_one_registry_line_into_its_connector(reference: str) -> None:
    module, _, _ = reference.partition(":")
    name = module.split(".")[2]
    assert module == f"rag_pipeline.connectors.{name}.source"
    assert (PACKAGE / "connectors" / name / "source.py").is_file()
    spec_module = registered_sources()[name].dagster_spec.partition(":")[0]
    assert spec_module == f"rag_pipeline.defs.{name}.spec"
    defs = PACKAGE / "defs" / name
    # At most two thin files beside the package marker: the spec and the resources.
    assert {p.name for p in defs.glob("*.py")} - {"__init__.py"} <= {"spec.py", "resources.py"}
