"""Every module of the faces (``http/``, ``mcp/``) and of the application layer (``serving/``) is exercised by a
test that names it (issue 69 item 7): a new route, tool or use case without a test fails here, naming the module.
A test names a module by importing it or by its dotted or file path (``rag_pipeline.http.routes.events``,
``http/routes/events.py``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "rag_pipeline"
TESTS = PACKAGE.parent / "rag_pipeline_tests"
WATCHED = ("http", "mcp", "serving")


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if p.name != "__init__.py" and "__pycache__" not in p.parts)


def _imported(source: str) -> set[str]:
    """Every module a test's imports could name: ``import a.b``, ``from a import b`` (``a.b`` and ``a``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _tests() -> tuple[str, set[str]]:
    texts = [p.read_text(encoding="utf-8") for p in TESTS.rglob("test_*.py")]
    return "\n".join(texts), set().union(*(_imported(t) for t in texts))


def _named(module: Path, text: str, imported: set[str]) -> bool:
    relative = module.relative_to(PACKAGE)
    dotted = ".".join(("rag_pipeline", *relative.with_suffix("").parts))
    mentioned = re.search(rf"(?<![\w.]){re.escape(dotted)}(?![\w])", text)
    return dotted in imported or bool(mentioned) or relative.as_posix() in text


def test_every_module_of_the_faces_and_the_application_layer_is_named_by_a_test() -> None:
    text, imported = _tests()
    modules = [m for folder in WATCHED for m in _modules(PACKAGE / folder)]
    assert len(modules) > 40  # the folders are where they were (49 modules when this was written)
    unnamed = [str(m.relative_to(PACKAGE)) for m in modules if not _named(m, text, imported)]
    assert unnamed == [], f"modules no test names: {unnamed}"


def test_the_check_tells_a_named_module_from_an_unnamed_one() -> None:
    module = PACKAGE / "http" / "routes" / "events.py"

    def named(source: str) -> bool:
        return _named(module, source, _imported(source))

    assert named("from rag_pipeline.http.routes import events")
    assert named("from rag_pipeline.http.routes import (\n    access,\n    events,\n)")
    assert named("import rag_pipeline.http.routes.events as events_route")
    assert named('"""``rag_pipeline.http.routes.events``: the route"""')
    assert named("# see http/routes/events.py")
    assert not named("from rag_pipeline.http.routes import eventsource")
    assert not named('"""rag_pipeline.http.routes.events_extra"""')
    assert not named('URL = "POST /events/slack"')
