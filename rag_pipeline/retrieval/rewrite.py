"""Query rewriting: an LLM turns a question into a search plan (JSON): a refined query, up to four sub-queries,
expansion terms (including the question in the other language: Korean, Japanese or English) and filters (a
date range, authors, sources) with a confidence.

The model sees the question and today's date, never a document. Relative dates come back as words
("last_month", "last_7_days", ...) and are resolved here, in UTC, against the request time, so a test can fix
the clock and a date is never the model's arithmetic. A reply that is not the JSON asked for, a refusal, a time-out
or an API error falls back to the question as it is, with the reason recorded. Plans are cached in SQLite by
(model, prompt version, day, question), like the LLM reranker's grades (the prompt names the day: an ISO date
the model wrote is only right for it).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from rag_pipeline.retrieval.sqlite_cache import SqliteCache
from rag_pipeline.sources.registry import searched_sources_phrase, source_names
from rag_pipeline.text.clean import query_form

PROMPT_VERSION = "1"
MAX_SUB_QUERIES = 4
MAX_EXPANSIONS = 12
SYSTEM_PROMPT = (
    "You plan searches over what a company wrote in {titles}. Today is {today} (UTC).\n"
    "Reply with one JSON object and nothing else, with these keys:\n"
    '"refined_query": the question as a short search query;\n'
    '"sub_queries": at most 4 narrower queries when the question asks several things, else [];\n'
    '"expansions": synonyms, team or product names, and the key terms in the other language (Korean, Japanese '
    "or English);\n"
    '"filters": an object with only what the question asks for: "since" and "until" (an ISO date or one of '
    "today, yesterday, this_week, last_week, this_month, last_month, this_year, last_year, last_N_days), "
    '"authors" (names), "sources" ({sources});\n'
    '"confidence": 0 to 1, how sure you are the filters are what the user asked for.\n'
    "Never invent names or dates."
)

# Filters apply when the plan is at least this sure of them.
FILTER_CONFIDENCE = 0.7
_RELATIVE_DAYS = re.compile(r"^last_(\d{1,4})_days$")


def _sources_phrase() -> str:
    """The registered sources as the prompt names them: ``"slack" and/or "jira"``."""
    return " and/or ".join(f'"{name}"' for name in source_names())


class PlanError(ValueError):
    """A reply that is not a usable plan; the message says what was wrong."""


@dataclass(frozen=True)
class Filters:
    """Filters a plan asks for, resolved: ISO instants [since, until), author names, sources."""

    since: str | None = None
    until: str | None = None
    authors: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    def is_empty(self) -> bool:
        return not (self.since or self.until or self.authors or self.sources)

    def as_dict(self) -> dict[str, object]:
        return {"since": self.since, "until": self.until, "authors": list(self.authors), "sources": list(self.sources)}


@dataclass(frozen=True)
class QueryPlan:
    """A parsed plan, its relative dates resolved."""

    refined_query: str
    sub_queries: tuple[str, ...] = ()
    expansions: tuple[str, ...] = ()
    filters: Filters = field(default_factory=Filters)
    confidence: float = 0.0

    def queries(self) -> list[str]:
        """What to search: the refined query with its expansions, then each sub-query."""
        first = " ".join([self.refined_query, *self.expansions]).strip()
        return list(dict.fromkeys(q for q in [first, *self.sub_queries] if q.strip()))

    def as_dict(self) -> dict[str, object]:
        return {
            "refined_query": self.refined_query,
            "sub_queries": list(self.sub_queries),
            "expansions": list(self.expansions),
            "filters": self.filters.as_dict(),
            "confidence": self.confidence,
        }


@dataclass(frozen=True)
class PlanOutcome:
    """The plan, or None with why the question is searched as it is."""

    plan: QueryPlan | None
    fallback_reason: str | None = None
    cached: bool = False
    seconds: float = 0.0


def _start_of_week(day: date) -> date:
    return day - timedelta(days=day.weekday())


def resolve_date(value: object, now: datetime, bound: str) -> str | None:
    """An ISO date or a relative word as the ISO instant (UTC) the index filters on; ``bound`` "since" takes the
    start of the named period, "until" its end (exclusive). None for None; :class:`PlanError` otherwise."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise PlanError(f"filters.{bound} {value!r} is not a date")
    today = now.astimezone(UTC).date()
    word = value.strip().lower()
    periods: dict[str, tuple[date, date]] = {
        "today": (today, today + timedelta(days=1)),
        "yesterday": (today - timedelta(days=1), today),
        "this_week": (_start_of_week(today), _start_of_week(today) + timedelta(days=7)),
        "last_week": (_start_of_week(today) - timedelta(days=7), _start_of_week(today)),
        "this_month": (today.replace(day=1), (today.replace(day=1) + timedelta(days=32)).replace(day=1)),
        "last_month": ((today.replace(day=1) - timedelta(days=1)).replace(day=1), today.replace(day=1)),
        "this_year": (date(today.year, 1, 1), date(today.year + 1, 1, 1)),
        "last_year": (date(today.year - 1, 1, 1), date(today.year, 1, 1)),
    }
    if word in periods:
        start, end = periods[word]
        day = start if bound == "since" else end
    elif match := _RELATIVE_DAYS.match(word):
        day = today - timedelta(days=int(match.group(1))) if bound == "since" else today + timedelta(days=1)
    else:
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise PlanError(f"filters.{bound} {value!r} is neither an ISO date nor a known period") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return datetime(day.year, day.month, day.day, tzinfo=UTC).isoformat().replace("+00:00", "Z")


def _strings(value: object, name: str, limit: int) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PlanError(f"{name} is not a list of strings")
    return tuple(dict.fromkeys(" ".join(v.split()) for v in value if v.strip()))[:limit]


def parse_plan(content: str | None, question: str, now: datetime) -> QueryPlan:
    """A reply as a plan (:class:`PlanError` naming what is wrong)."""
    if not content:
        raise PlanError("empty reply")
    text = content.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, flags=re.DOTALL)
    try:
        raw: Any = json.loads(fenced.group(1) if fenced else text)
    except ValueError:
        raise PlanError("the reply is not JSON") from None
    if not isinstance(raw, dict):
        raise PlanError("the reply is not a JSON object")
    refined = raw.get("refined_query")
    if not isinstance(refined, str) or not refined.strip():
        refined = question
    filters_raw = raw.get("filters") or {}
    if not isinstance(filters_raw, dict):
        raise PlanError("filters is not an object")
    known = source_names()
    sources = _strings(filters_raw.get("sources"), "filters.sources", len(known))
    unknown = [s for s in sources if s not in known]
    if unknown:
        raise PlanError(f"filters.sources names {unknown[0]!r}; the sources are {' and '.join(known)}")
    filters = Filters(
        since=resolve_date(filters_raw.get("since"), now, "since"),
        until=resolve_date(filters_raw.get("until"), now, "until"),
        authors=_strings(filters_raw.get("authors"), "filters.authors", 10),
        sources=sources,
    )
    confidence = raw.get("confidence", 0.0)
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        raise PlanError("confidence is not a number")
    return QueryPlan(
        refined_query=" ".join(refined.split()),
        sub_queries=_strings(raw.get("sub_queries"), "sub_queries", MAX_SUB_QUERIES),
        expansions=_strings(raw.get("expansions"), "expansions", MAX_EXPANSIONS),
        filters=filters,
        confidence=min(1.0, max(0.0, float(confidence))),
    )


class QueryRewriter:
    """Plans searches with a chat model (``RAG_REWRITE_MODEL``) through the ``openai`` client."""

    def __init__(
        self, model: str, client: Any = None, cache_path: str | Path | None = None, timeout: float = 20.0
    ) -> None:
        if client is None:
            from openai import OpenAI

            client = OpenAI(timeout=timeout, max_retries=1)
        self.model = model
        self.client = client
        self.cache = SqliteCache(cache_path, "plans", "reply", "TEXT")

    def _key(self, question: str, day: date) -> str:
        return hashlib.sha256(f"{self.model}\0{PROMPT_VERSION}\0{day}\0{question}".encode()).hexdigest()

    def plan(self, question: str, now: datetime | None = None) -> PlanOutcome:
        """The plan for ``question`` (relative dates against ``now``, default: the current time), or the reason
        there is none."""
        import time

        now = now or datetime.now(UTC)
        started = time.perf_counter()
        question = query_form(question)  # one cached plan whatever Unicode form the question was typed in
        key = self._key(question, now.astimezone(UTC).date())
        reply = self.cache.get(key)
        cached = reply is not None
        if reply is None:
            try:
                response = self.client.chat.completions.create(
                    model=self.model,
                    temperature=0,
                    response_format={"type": "json_object"},
                    messages=[
                        {
                            "role": "system",
                            "content": SYSTEM_PROMPT.format(
                                today=now.astimezone(UTC).date(),
                                sources=_sources_phrase(),
                                titles=searched_sources_phrase(),
                            ),
                        },
                        {"role": "user", "content": question},
                    ],
                )
            except Exception as exc:  # time-outs, refusals by status, connection errors: searched as asked
                return PlanOutcome(None, f"rewrite failed: {type(exc).__name__}", False, time.perf_counter() - started)
            message = response.choices[0].message
            if getattr(message, "refusal", None):
                return PlanOutcome(None, "rewrite refused by the model", False, time.perf_counter() - started)
            reply = message.content or ""
        try:
            plan = parse_plan(reply, question, now)
        except PlanError as exc:
            return PlanOutcome(None, f"rewrite unusable: {exc}", cached, time.perf_counter() - started)
        if not cached:
            self.cache.put(key, reply)  # only usable plans: a bad reply is asked again next time
        return PlanOutcome(plan, None, cached, time.perf_counter() - started)
