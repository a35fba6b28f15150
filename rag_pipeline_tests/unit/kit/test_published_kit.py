"""The kit's published API for ``bench/`` (:data:`rag_pipeline_tests.kit.PUBLISHED`): a bench script imports only
published kit modules, every published module exists and is named in the kit's docstring, and nothing in the kit
imports a test module or a conftest."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import rag_pipeline_tests.kit as kit
from rag_pipeline_tests.kit.paths import BENCH_DIR, REPO_ROOT

KIT_DIR = Path(kit.__file__).resolve().parent
TESTS = "rag_pipeline_tests"


def _module_file(dotted: str) -> Path | None:
    """The file of a module under the repository root, or None where ``dotted`` names no module there."""
    base = REPO_ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """Every module of ``rag_pipeline_tests`` the file imports (``from package import module`` as the module), with
    its line, wherever the import stands (functions included)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == TESTS:
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != TESTS:
                continue
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                yield node.lineno, submodule if _module_file(submodule) else node.module


def _published(dotted: str) -> bool:
    prefix = f"{TESTS}.kit."
    return dotted.startswith(prefix) and dotted.removeprefix(prefix) in kit.PUBLISHED


def test_imported_modules_reads_module_and_from_imports(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(
        "import rag_pipeline_tests.kit.paths\n"
        "from rag_pipeline_tests.kit import sync_week as week, PUBLISHED\n"
        "def f():\n"
        "    from rag_pipeline_tests.unit.retrieval.test_retrieval import document\n"
        "from rag_pipeline.settings import Settings\n"
    )
    assert sorted(m for _, m in imported_modules(script)) == [
        "rag_pipeline_tests.kit",
        "rag_pipeline_tests.kit.paths",
        "rag_pipeline_tests.kit.sync_week",
        "rag_pipeline_tests.unit.retrieval.test_retrieval",
    ]
    published = {m: _published(m) for _, m in imported_modules(script)}
    assert published["rag_pipeline_tests.kit.sync_week"] and not published["rag_pipeline_tests.kit.paths"]
    assert not published["rag_pipeline_tests.kit"] and not published["rag_pipeline_tests.unit.retrieval.test_retrieval"]


def test_bench_imports_only_the_published_kit_modules() -> None:
    scripts = sorted(BENCH_DIR.rglob("*.py"))
    assert scripts, BENCH_DIR
    used: set[str] = set()
    unpublished: list[str] = []
    for script in scripts:
        for line, module in imported_modules(script):
            if _published(module):
                used.add(module)
            else:
                unpublished.append(f"{script.relative_to(REPO_ROOT)}:{line} imports {module}")
    assert unpublished == [], "publish the module in rag_pipeline_tests/kit/__init__.py or import it no more"
    assert used, "bench/ imports no kit module: the published list should shrink with it"


@pytest.mark.parametrize("name", sorted(kit.PUBLISHED))
def test_every_published_module_exists_and_is_documented(name: str) -> None:
    assert _module_file(f"{TESTS}.kit.{name}") is not None, name
    listed = (kit.__doc__ or "").partition("The published modules:")[2]
    assert f"- ``{name}``" in listed or f", ``{name}``" in listed, f"the kit's published list does not name {name}"


def test_the_kit_imports_no_test_module_and_no_conftest() -> None:
    offending = [
        f"{path.relative_to(REPO_ROOT)}:{line} imports {module}"
        for path in sorted(KIT_DIR.rglob("*.py"))
        for line, module in imported_modules(path)
        if not module.startswith(f"{TESTS}.kit") or module.rsplit(".", 1)[-1] == "conftest"
    ]
    assert offending == []
