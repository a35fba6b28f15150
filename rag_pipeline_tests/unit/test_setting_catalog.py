"""The settings catalogue (``rag_pipeline/setting_catalog.py``) against the code that reads the environment.

Which variables the code reads is found two ways, and both must agree with the catalogue:

- statically, from the AST of every module of the package: the first argument of the ``EnvValues`` readers
  (``env.get/int/float/flag/cron/choice/delimiter/names/path/optional_path/paths``), of Dagster's ``EnvVar``, of
  ``settings.secret``, of ``os.environ.get``/``os.environ[...]``/``os.getenv`` and the ``{"env": ...}`` config
  sources Dagster resolves itself; an f-string name (``f"{prefix}_URL"``) becomes a pattern;
- at run time, by handing ``Settings.from_env`` a mapping that records every key asked for, once with nothing set
  and once with every live source and the notifications turned on (names made from the registered sources, such as
  ``CONFLUENCE_SYNC_CRON``, appear only this way). Every f-string pattern must match a recorded name, so a new
  dynamic reader outside ``Settings.from_env`` cannot go unseen.

The catalogue's literal defaults are checked too: setting a variable to its catalogue default changes nothing.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from rag_pipeline.setting_catalog import GROUPS, PROCESSES, SETTINGS, by_name
from rag_pipeline.settings import Settings
from rag_pipeline_tests.kit.paths import PACKAGE_DIR

ENV_READERS = {"get", "int", "float", "flag", "cron", "choice", "delimiter", "names", "path", "optional_path", "paths"}
# Variables read by a library the project calls rather than by the project's code: the library's source must read them.
LIBRARY_READS = {"OPENAI_API_KEY": "openai._client", "OPENAI_BASE_URL": "openai._client"}
# Where a reader's argument is neither a literal nor an f-string, by (module, function): the recorded run covers it.
DYNAMIC_READS = {
    ("settings.py", "_from_env"),  # RAG_NOTIFY_SLACK_TOKEN, else SLACK_BOT_TOKEN, tried in a loop
    ("settings.py", "secret"),  # the helper itself: its callers pass literals, found above
    ("defs/parts.py", "slack_notification_resource"),  # EnvVar(the notifications' token_env): one of the two above
    ("defs/executors.py", "celery_executor_config"),  # {"env": ...} of CELERY_BROKER_ENV or CELERY_BACKEND_ENV
}
LIVE_ENVIRONMENT = {
    "SLACK_BOT_TOKEN": "xoxb-placeholder",
    "JIRA_URL": "https://jira.example.com",
    "CONFLUENCE_URL": "https://wiki.example.com",
    "RAG_NOTIFY_SLACK_CHANNEL": "ops",
}


class _Recording(Mapping[str, str]):
    """An environment that remembers every name asked for."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.asked: set[str] = set()

    def __getitem__(self, name: str) -> str:
        self.asked.add(name)
        return self.values[name]

    def get(self, name: str, default: object = None) -> object:  # type: ignore[override]
        self.asked.add(name)
        return self.values.get(name, default)

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str):
            self.asked.add(name)
        return name in self.values

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)


def _name_or_pattern(node: ast.expr, constants: dict[str, str]) -> str | re.Pattern[str] | None:
    """The variable a reader's argument names: a literal, a module constant, an f-string as a pattern; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    if isinstance(node, ast.JoinedStr):
        parts = [re.escape(v.value) if isinstance(v, ast.Constant) else "[A-Z0-9_]+" for v in node.values]
        return re.compile("".join(parts))
    return None


def _is_os_environ(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and ast.unparse(node.value) == "os"


def _reader_arguments(tree: ast.Module) -> Iterator[tuple[ast.expr, str]]:
    """(the argument naming a variable, the enclosing function) of every read of the environment in ``tree``."""
    functions = {
        id(child): node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for child in ast.walk(node)
    }
    for node in ast.walk(tree):
        where = functions.get(id(node), "<module>")
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Attribute):
                receiver = ast.unparse(func.value)
                settings_reader = receiver == "env" and func.attr in ENV_READERS
                environ_get = func.attr == "get" and _is_os_environ(func.value)
                library_reader = func.attr in ("EnvVar", "getenv") and receiver in ("dg", "dagster", "os")
                if settings_reader or environ_get or library_reader:
                    yield node.args[0], where
            elif isinstance(func, ast.Name) and func.id in ("EnvVar", "secret"):
                yield node.args[0], where
        elif isinstance(node, ast.Subscript) and _is_os_environ(node.value) and isinstance(node.ctx, ast.Load):
            yield node.slice, where
        elif isinstance(node, ast.Dict):
            # Dagster's config sources: {"env": "NAME"} is read by Dagster itself when the config is resolved.
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "env" and value is not None:
                    yield value, where


def _static_reads() -> tuple[set[str], set[re.Pattern[str]], set[tuple[str, str]]]:
    """The names read with a literal, the f-string patterns, and where a name is computed otherwise."""
    names: set[str] = set()
    patterns: set[re.Pattern[str]] = set()
    dynamic: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {
            target.id: node.value.value  # type: ignore[attr-defined]
            for node in tree.body
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for argument, function in _reader_arguments(tree):
            found = _name_or_pattern(argument, constants)
            if isinstance(found, str):
                names.add(found)
            elif found is not None:
                patterns.add(found)
            else:
                dynamic.add((path.relative_to(PACKAGE_DIR).as_posix(), function))
    return names, patterns, dynamic


def _recorded_reads(data_dir: Path) -> set[str]:
    asked: set[str] = set()
    for values in ({}, LIVE_ENVIRONMENT):
        env = _Recording({"RAG_DATA_DIR": str(data_dir), **values})
        Settings.from_env(env)
        asked |= env.asked
    return asked


@pytest.fixture(scope="module")
def reads(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every variable the code reads: the literal names, the recorded ones, and those read by a library."""
    names, patterns, dynamic = _static_reads()
    recorded = _recorded_reads(tmp_path_factory.mktemp("data"))
    assert dynamic <= DYNAMIC_READS, f"a variable's name computed where no recorded run covers it: {dynamic}"
    unmatched = sorted(p.pattern for p in patterns if not any(p.fullmatch(name) for name in recorded))
    assert unmatched == [], (
        f"variable names built by an f-string that no recorded Settings.from_env run asked for: {unmatched}"
    )
    return names | recorded


def test_the_readers_are_found() -> None:
    """The scan bites: it finds a read of each kind, and a name only the recorded run can know."""
    names, patterns, _ = _static_reads()
    assert {"RAG_DATA_DIR", "SLACK_BOT_TOKEN", "QDRANT_API_KEY", "RAG_ENV_FILE", "RAG_CELERY_BROKER_URL"} <= names
    assert any(p.fullmatch("CONFLUENCE_SYNC_CRON") for p in patterns)
    assert "CONFLUENCE_SYNC_CRON" not in names


def test_every_variable_the_code_reads_is_in_the_catalogue(reads: set[str]) -> None:
    missing = sorted(reads - set(by_name()))
    assert missing == [], f"read by the code but not in rag_pipeline/setting_catalog.py: {missing}"


def test_every_catalogue_entry_is_read_by_the_code(reads: set[str]) -> None:
    stale = sorted(set(by_name()) - reads - set(LIBRARY_READS))
    assert stale == [], f"in rag_pipeline/setting_catalog.py but read by no code any more: {stale}"
    for name, module in LIBRARY_READS.items():
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin, module
        source = Path(spec.origin).read_text(encoding="utf-8")
        assert f'os.environ.get("{name}")' in source, f"{name}: {module} no longer reads it"


def test_the_entries_are_well_formed() -> None:
    assert len(by_name()) == len(SETTINGS), "a variable is catalogued twice"
    for s in SETTINGS:
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", s.name), s.name
        assert set(s.read_by) <= set(PROCESSES), s.name
        assert s.group in GROUPS, s.name
        assert s.description.strip() and "\n" not in s.description and "|" not in s.description, s.name
        assert not (s.secret and s.default), f"{s.name}: a secret has no default"
        assert not (s.secret and s.fixed), s.name
        assert s.empty_is_unset or s.default or s.fixed, f"{s.name}: read as a value when empty, so it needs one"


# Settings that record whether they were set (not only their value), or whose default is where the test runs.
_RECORDS_BEING_SET = {"RAG_DATA_DIR", "RAG_PARTITION_START"}


@pytest.mark.parametrize(
    "setting",
    [s for s in SETTINGS if s.default and s.name not in _RECORDS_BEING_SET and s.name not in LIBRARY_READS],
    ids=lambda s: s.name,
)
def test_a_catalogue_default_is_the_codes_default(setting: object, tmp_path: Path) -> None:
    """Setting a variable to the catalogue's default reads as leaving it unset."""
    name, default = setting.name, setting.default  # type: ignore[attr-defined]
    base = {"RAG_DATA_DIR": str(tmp_path), **LIVE_ENVIRONMENT}
    assert Settings.from_env({**base, name: default}) == Settings.from_env(base), (
        f"{name}={default!r} is not its default"
    )
