"""The JQL subset the Jira REST emulator (:mod:`rag_pipeline_tests.kit.emulators.jira_api`) understands, parsed
properly.

``project``, ``updated``/``created``, ``id``, ``key`` clauses joined by ``AND``, and ``ORDER BY``. Dates are read in the
**site user's timezone** with **minute** precision, like Jira (:func:`parse_jql_date`), and compared with the issues'
exact ``updated``/``created`` instants. Unknown or invisible projects and unknown keys raise :class:`JqlError` (a 400
from the emulator), like Jira. :func:`compile_jql` turns a query into a predicate over the stored issues of a
:class:`~rag_pipeline_tests.kit.emulators.jira_site.JiraSite`; :func:`sort_issues` applies its ORDER BY. Stdlib only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from rag_pipeline_tests.kit.emulators.jira_site import KEY_RE, JiraSite, jira_instant

__all__ = [
    "JqlError",
    "compile_jql",
    "parse_jql_date",
    "sort_issues",
]


class JqlError(Exception):
    """A JQL query the emulator rejects (HTTP 400 with this message in ``errorMessages``)."""


@dataclass(frozen=True)
class _Token:
    kind: str  # "str" (quoted), "word", "op", "punct"
    value: str

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.value.lower() in words


_TOKEN_RE = re.compile(
    r"""\s*(?:(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(?P<op>>=|<=|!=|!~|=|>|<|~)|(?P<punct>[(),])"""
    r"""|(?P<word>[^\s"'(),=<>!~]+))"""
)
_DATE_FIELDS = {"updated": "updated", "updateddate": "updated", "created": "created", "createddate": "created"}
_KEY_FIELDS = ("key", "issuekey", "issue", "id")
_ORDER_FIELDS = {
    "updated": "updated",
    "updateddate": "updated",
    "created": "created",
    "createddate": "created",
    "key": "key",
    "issuekey": "key",
    "id": "id",
}
_DATE_FORMATS = ("%Y-%m-%d %H:%M", "%Y/%m/%d %H:%M", "%Y-%m-%d", "%Y/%m/%d")
_PERIOD_RE = re.compile(r"^([-+]?)\s*((?:\d+\s*[wdhm]\s*)+)$")


def _tokenize(jql: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(jql):
        if not jql[pos:].strip():
            break
        match = _TOKEN_RE.match(jql, pos)
        if match is None or match.end() == pos:
            char = jql[pos:].lstrip()[:1]
            raise JqlError(f"Error in the JQL Query: The character '{char}' is a reserved JQL character.")
        kind = match.lastgroup or "word"
        value = match.group(kind)
        if kind == "str":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        tokens.append(_Token(kind, value))
        pos = match.end()
    return tokens


@dataclass
class _Clause:
    field: str  # "project", "updated", "created", "id", "key"
    op: str  # "=", "!=", ">", ">=", "<", "<=", "in", "not in"
    values: list[str]


@dataclass
class _Jql:
    clauses: list[_Clause]
    order: list[tuple[str, bool]]  # (field, descending)


class _Parser:
    def __init__(self, jql: str) -> None:
        self.jql = jql
        self.tokens = _tokenize(jql)
        self.pos = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, what: str) -> _Token:
        token = self.peek()
        if token is None:
            raise self.error(f"Expecting {what} but reached the end of the query.")
        self.pos += 1
        return token

    def error(self, message: str) -> JqlError:
        return JqlError(f"Error in the JQL Query: {message} The invalid JQL is: {self.jql}")

    def parse(self) -> _Jql:
        clauses: list[_Clause] = []
        order: list[tuple[str, bool]] = []
        token = self.peek()
        if token is not None and not token.is_word("order"):
            clauses.append(self.clause())
            while (token := self.peek()) is not None and token.is_word("and"):
                self.pos += 1
                clauses.append(self.clause())
        token = self.peek()
        if token is not None and token.is_word("order"):
            self.pos += 1
            if not self.take("'by'").is_word("by"):
                raise self.error("Expecting 'by' after 'order'.")
            order.append(self.sort_key())
            while (token := self.peek()) is not None and token.kind == "punct" and token.value == ",":
                self.pos += 1
                order.append(self.sort_key())
        token = self.peek()
        if token is not None:
            if token.is_word("or", "not") or (token.kind == "punct" and token.value in "()"):
                raise self.error(f"'{token.value}' is not supported by the emulator (clauses joined by AND only).")
            raise self.error(f"Expecting either 'OR' or 'AND' but got '{token.value}'.")
        return _Jql(clauses, order)

    def clause(self) -> _Clause:
        token = self.take("a field name")
        if token.kind not in ("word", "str"):
            raise self.error(f"Expecting a field name but got '{token.value}'.")
        name = token.value.lower()
        if name in _DATE_FIELDS:
            field_name, operators = _DATE_FIELDS[name], (">=", ">", "<=", "<")
        elif name == "project":
            field_name, operators = "project", ("=", "!=", "in", "not in")
        elif name in _KEY_FIELDS:
            field_name = "id" if name == "id" else "key"
            operators = (
                ("=", "!=", "in", "not in", ">", ">=", "<", "<=") if name == "id" else ("=", "!=", "in", "not in")
            )
        else:
            raise self.error(f"Field '{token.value}' is not supported by the emulator.")
        op_token = self.take("an operator")
        if op_token.kind == "op":
            op = op_token.value
        elif op_token.is_word("in"):
            op = "in"
        elif op_token.is_word("not") and self.peek() is not None and self.tokens[self.pos].is_word("in"):
            self.pos += 1
            op = "not in"
        else:
            raise self.error(f"Expecting operator but got '{op_token.value}'.")
        if op not in operators:
            raise self.error(f"The operator '{op}' is not supported by the '{token.value}' field.")
        if op in ("in", "not in"):
            opening = self.take("'('")
            if opening.kind != "punct" or opening.value != "(":
                raise self.error(f"Expecting '(' but got '{opening.value}'.")
            values = [self.value()]
            while True:
                separator = self.take("')'")
                if separator.kind == "punct" and separator.value == ")":
                    break
                if separator.kind != "punct" or separator.value != ",":
                    raise self.error(f"Expecting ',' or ')' but got '{separator.value}'.")
                values.append(self.value())
        else:
            values = [self.value()]
        return _Clause(field_name, op, values)

    def value(self) -> str:
        token = self.take("a value")
        if token.kind not in ("word", "str"):
            raise self.error(f"Expecting a value but got '{token.value}'.")
        if token.kind == "word" and self.peek() is not None and self.tokens[self.pos].value == "(":
            raise self.error(f"JQL functions such as '{token.value}()' are not supported by the emulator.")
        return token.value

    def sort_key(self) -> tuple[str, bool]:
        token = self.take("a field name")
        name = _ORDER_FIELDS.get(token.value.lower()) if token.kind in ("word", "str") else None
        if name is None:
            raise self.error(f"Ordering by '{token.value}' is not supported by the emulator.")
        descending = False
        nxt = self.peek()
        if nxt is not None and nxt.is_word("asc", "desc"):
            self.pos += 1
            descending = nxt.value.lower() == "desc"
        return name, descending


def parse_jql_date(value: str, field_name: str, timezone: str, now: datetime | None = None) -> datetime:
    """A JQL date literal as an instant: ``yyyy-MM-dd HH:mm``, ``yyyy/MM/dd HH:mm``, ``yyyy-MM-dd`` or
    ``yyyy/MM/dd`` in the user's ``timezone`` (minute precision, like Jira), or a period such as ``-5d``/``-4w 2d``
    (``w``/``d``/``h``/``m``) relative to ``now``."""
    text = value.strip()
    for fmt in _DATE_FORMATS:
        try:
            naive = datetime.strptime(text, fmt)
        except ValueError:
            continue
        return naive.replace(tzinfo=ZoneInfo(timezone)).astimezone(UTC)
    period = _PERIOD_RE.match(text)
    if period:
        units = {"w": 604800, "d": 86400, "h": 3600, "m": 60}
        seconds = sum(int(n) * units[u] for n, u in re.findall(r"(\d+)\s*([wdhm])", period.group(2)))
        sign = -1 if period.group(1) == "-" else 1
        return (now or datetime.now(UTC)) + timedelta(seconds=sign * seconds)
    raise JqlError(
        f"Date value '{value}' for field '{field_name}' is invalid. Valid formats include: 'yyyy/MM/dd HH:mm', "
        "'yyyy-MM-dd HH:mm', 'yyyy/MM/dd', 'yyyy-MM-dd', or a period format e.g. '-5d', '4w 2d'."
    )


def _compare(left: Any, op: str, right: Any) -> bool:
    if op == "=":
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    if op == ">":
        return bool(left > right)
    if op == ">=":
        return bool(left >= right)
    if op == "<":
        return bool(left < right)
    return bool(left <= right)


def compile_jql(jql: str, site: JiraSite) -> tuple[Callable[[dict[str, Any]], bool], list[tuple[str, bool]], bool]:
    """Parse ``jql`` against ``site``: a predicate over stored issues, the ORDER BY keys, and whether the query has a
    search restriction (is bounded). Raises :class:`JqlError` (a 400) for unsupported or invalid queries."""
    parsed = _Parser(jql).parse()
    predicates: list[Callable[[dict[str, Any]], bool]] = []
    for clause in parsed.clauses:
        predicates.append(_clause_predicate(clause, site))

    def matches(issue: dict[str, Any]) -> bool:
        return all(p(issue) for p in predicates)

    return matches, parsed.order, bool(parsed.clauses)


def _clause_predicate(clause: _Clause, site: JiraSite) -> Callable[[dict[str, Any]], bool]:
    op = clause.op
    if clause.field == "project":
        keys: set[str] = set()
        for value in clause.values:
            project = site.project(value)
            if project is None or not project.searchable:
                raise JqlError(f"The value '{value}' does not exist for the field 'project'.")
            keys.add(project.key)
        negate = op in ("!=", "not in")
        return lambda issue: (issue["fields"]["project"]["key"] in keys) != negate
    if clause.field in ("updated", "created"):
        name = clause.field
        bound = parse_jql_date(clause.values[0], name, site.user_timezone)

        def date_matches(issue: dict[str, Any]) -> bool:
            instant = jira_instant(issue["fields"].get(name))
            return instant is not None and _compare(instant, op, bound)

        return date_matches
    if clause.field == "id":
        try:
            numbers = [int(v) for v in clause.values]
        except ValueError:
            raise JqlError(f"The value '{clause.values[0]}' is not a valid issue id for field 'id'.") from None
        if op in ("in", "not in"):
            wanted = {str(n) for n in numbers}
            return lambda issue: (issue["id"] in wanted) != (op == "not in")
        return lambda issue: issue["id"].isdigit() and _compare(int(issue["id"]), op, numbers[0])
    # key: every key must exist (current or former key of a moved issue) and be searchable, like Jira.
    ids: set[str] = set()
    for value in clause.values:
        if not KEY_RE.match(value.upper()) and not value.isdigit():
            raise JqlError(f"The issue key '{value}' for field 'key' is invalid.")
        issue = site.issue(value)
        project = site.issue_project(issue) if issue is not None else None
        if issue is None or project is None or not project.searchable:
            raise JqlError(f"An issue with key '{value}' does not exist for field 'key'.")
        ids.add(issue["id"])
    return lambda issue: (issue["id"] in ids) != (op in ("!=", "not in"))


def _key_sort(key: str) -> tuple[str, int]:
    project, _, number = key.rpartition("-")
    return (project, int(number)) if number.isdigit() else (key, 0)


def _id_sort(issue_id: str) -> tuple[int, str]:
    return (int(issue_id), "") if issue_id.isdigit() else (0, issue_id)


def sort_issues(issues: list[dict[str, Any]], order: list[tuple[str, bool]]) -> list[dict[str, Any]]:
    epoch = datetime.min.replace(tzinfo=UTC)

    def sort_value(issue: dict[str, Any], name: str) -> Any:
        if name in ("updated", "created"):
            return jira_instant(issue["fields"].get(name)) or epoch
        if name == "key":
            return _key_sort(issue["key"])
        return _id_sort(issue["id"])

    result = sorted(issues, key=lambda i: _id_sort(i["id"]))  # the final tie-break
    for name, descending in reversed(order or [("created", True)]):
        result.sort(key=lambda i, n=name: sort_value(i, n), reverse=descending)
    return result
