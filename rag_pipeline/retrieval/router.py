"""The search router (the design's ``SearchRouter``), without an LLM: what a question's own words say about how to
search it. The ``routed`` mode (retriever.py) follows the route:

- **exact identifiers first**: a Jira issue key (``TIMOB-1234``), a link (a Jira browse link, a Slack permalink,
  any document's URL) or a document id names one document; it is looked up exactly (within the reader's ACL,
  like every search) and put first, where fusion would otherwise rank it like any text;
- **source hints**: a question that names one product ("in Jira", "슬랙에서") prefers that source's documents,
  without hiding the others (only the product names count: "issue" and "thread" are everyday words in both);
- **date hints**: "yesterday", "last week", "지난주", a named weekday ("금요일에", "先週の月曜日") … narrow the
  search to documents active since then, unless that leaves nothing; the date words themselves are not searched for
  ("어제" is in every thread that says yesterday, whatever it is about);
- **container hints**: "#general", "갤럭시-문의 채널", "開発チャンネル" prefer that channel's documents;
- **strategy**: hybrid for questions; BM25 for a query that is only identifiers and codes (nothing to embed); no
  dense-only route: vector alone loses to hybrid at every question length measured (docs/notes/search_router.md);
- **a rewrite plan** (query rewriting on): routed once from the question and its plan, the plan's single source or
  start date below the confidence its filters need become soft hints like the question's own (:func:`with_plan`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache

from rag_pipeline.retrieval.rewrite import FILTER_CONFIDENCE, QueryPlan
from rag_pipeline.sources.registry import document_sources, registered_sources

ISSUE_KEY = re.compile(r"(?<![\w-])([A-Z][A-Z0-9]{1,9}-[1-9]\d{0,6})(?![\w-])")
URL = re.compile(r"https?://[^\s<>\"')\]]+")
SLACK_PERMALINK = re.compile(r"https?://[^\s/]+/archives/[A-Z0-9]+/p\d{16}")
JIRA_BROWSE = re.compile(r"https?://[^\s/]+(?:/[^\s/]+)*/browse/([A-Z][A-Z0-9]{1,9}-\d+)")
# A question about a named thing is short; past this many words, identifiers in it are references.
REFERENCE_WORDS = 24
# (pattern, days back from now): the newest hint wins when several are given. English, Korean and Japanese.
DATE_HINTS = (
    (re.compile(r"\btoday\b|오늘|今日|本日", re.IGNORECASE), 1),
    # "the day before yesterday" holds "yesterday" (一昨日 holds 昨日): the longer phrase is kept apart.
    (re.compile(r"(?<!before )\byesterday\b|어제|(?<!一)昨日", re.IGNORECASE), 2),
    (re.compile(r"\bday before yesterday\b|그저께|그제(?!서)|一昨日|おととい", re.IGNORECASE), 3),
    (re.compile(r"\b(?:this|past|last) week\b|이번\s?주|지난\s?주|저번\s?주|今週|先週", re.IGNORECASE), 14),
    (re.compile(r"\b(?:this|past|last) month\b|이번\s?달|지난\s?달|저번\s?달|今月|先月", re.IGNORECASE), 62),
    (re.compile(r"\b(?:this|past|last) year\b|올해|작년|今年|去年|昨年", re.IGNORECASE), 730),
)
# Named weekdays, Monday first (datetime.weekday()): "금요일에", "金曜日", "on Friday"; "월욜" is how chat writes it.
WEEKDAYS = tuple(
    re.compile(rf"\b{english}\b|{korean}(?:요일|욜)|{japanese}曜日?", re.IGNORECASE)
    for english, korean, japanese in (
        ("monday", "월", "月"), ("tuesday", "화", "火"), ("wednesday", "수", "水"), ("thursday", "목", "木"),
        ("friday", "금", "金"), ("saturday", "토", "土"), ("sunday", "일", "日"),
    )
)  # fmt: skip
# A weekday of the week before ("지난주 금요일", "先週の金曜日", "last week's Friday"), not the latest one.
WEEK_BEFORE = re.compile(r"\blast week'?s?\b|지난\s?주|저번\s?주|先週", re.IGNORECASE)
# "last Friday" (English): the latest Friday before today, a week back when today is one.
LAST_WEEKDAY = re.compile(r"\blast\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.IGNORECASE)
# The particle or preposition that ties a date word to the sentence goes with it when the words are taken out.
DATE_PARTICLE = r"(?:부터|까지|에는|에서|에|의|から|まで|は|に|の)?"
DATE_LEAD = r"(?:\b(?:on|since|from|until|in|last)\s+)?"
# "#general", "갤럭시-문의 채널", "開発チャンネル", "the general channel": a channel's name (no spaces inside).
CONTAINER_HINTS = (
    re.compile(r"(?<![\w&#])#([\w][\w.-]*)"),
    re.compile(r"(?<![\w#])([\w][\w.-]*)\s?(?:채널|チャンネル)"),
    re.compile(r"\b(?:in|on)\s+(?:the\s+)?([\w][\w.-]*)\s+channel\b", re.IGNORECASE),
)


@cache
def _document_id() -> re.Pattern[str]:
    """A document id: ``<registered document source>:<scope>:<rest>``."""
    names = "|".join(re.escape(name) for name in document_sources())
    return re.compile(rf"(?<![\w:])((?:{names}):[A-Za-z0-9._-]+:[A-Za-z0-9._:#-]+)")


@cache
def _source_words() -> dict[str, re.Pattern[str]]:
    """The registered sources that a question may name, and the words that name them ("jira", "지라")."""
    return {
        name: re.compile(source.retrieval.query_words, re.IGNORECASE)
        for name, source in registered_sources().items()
        if source.retrieval.query_words
    }


@dataclass(frozen=True)
class Route:
    """How to search one question: identifiers to look up exactly, a preferred source, a date window, a
    strategy."""

    strategy: str = "hybrid"
    issue_keys: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    document_ids: tuple[str, ...] = ()
    source: str | None = None
    since_days: int | None = None
    reasons: list[str] = field(default_factory=list)
    container: str | None = None  # a channel the question names ("#general"), preferred like a named source
    text: str | None = None  # what to search for when it differs from the question: the date words taken out

    @property
    def has_identifiers(self) -> bool:
        return bool(self.issue_keys or self.urls or self.document_ids)

    def since(self, now: datetime | None = None) -> str | None:
        """The date window's start as an ISO instant (None without one)."""
        if self.since_days is None:
            return None
        return ((now or datetime.now(UTC)) - timedelta(days=self.since_days)).isoformat(timespec="seconds")

    def describe(self) -> dict[str, object]:
        return {
            "strategy": self.strategy,
            "issue_keys": list(self.issue_keys),
            "urls": len(self.urls),
            "document_ids": len(self.document_ids),
            "source": self.source,
            "since_days": self.since_days,
            "container": self.container,
            "reasons": self.reasons,
        }

    def names_container(self, title: str, container: str) -> bool:
        """Whether a document (its title, "#channel: …", and container id) is in the container the question names."""
        if self.container is None:
            return False
        wanted = self.container.lower()
        head, sep, _ = title.partition(":")
        return container.lower() == wanted or (bool(sep) and head.strip().lower() == f"#{wanted}")


def _weekday_days(query: str, now: datetime) -> int | None:
    """The days back a named weekday reaches ("금요일" on a Monday: 3 days, so a window of 4), None without one."""
    today = now.astimezone(UTC).weekday()
    reaches = []
    for weekday, pattern in enumerate(WEEKDAYS):
        if not pattern.search(query):
            continue
        back = (today - weekday) % 7
        if WEEK_BEFORE.search(query):
            back += 7
        elif back == 0 and LAST_WEEKDAY.search(query):
            back = 7
        reaches.append(back + 1)
    return max(reaches, default=None)  # "월요일부터 수요일까지": from the earliest day named


def _without_date_words(query: str) -> str | None:
    """The question with its date words (and the particle that ties each) taken out, None when nothing is left to
    search for or nothing was taken out."""
    text = query
    for pattern in (*(p for p, _ in DATE_HINTS), *WEEKDAYS, WEEK_BEFORE):
        text = re.sub(rf"{DATE_LEAD}(?:{pattern.pattern}){DATE_PARTICLE}", " ", text, flags=re.IGNORECASE)
    text = " ".join(text.split())
    if text == " ".join(query.split()) or not re.search(r"\w", text):
        return None
    return text


def _container(query: str) -> str | None:
    """The one channel a question names, None for none or several."""
    names = {m.group(1).lower() for pattern in CONTAINER_HINTS for m in pattern.finditer(query)}
    return next(iter(names)) if len(names) == 1 else None


def plan_route(query: str, now: datetime | None = None, plan: QueryPlan | None = None) -> Route:
    """The route the question's words ask for (a named weekday counts back from ``now``, default: the clock), with
    what a rewrite ``plan`` of it adds (:func:`with_plan`)."""
    route = _question_route(query, now)
    return route if plan is None else with_plan(route, plan, now)


def with_plan(route: Route, plan: QueryPlan, now: datetime | None = None) -> Route:
    """``route`` with a rewrite plan's hints: a plan that names one source, or a start date, without the confidence
    its filters need to apply (``FILTER_CONFIDENCE``; at or above it they are filters already) prefers that
    source's documents, or narrows to that window unless it leaves nothing, as the question's own words would. The
    question's own hints win; the plan's queries are searched as they are (no date words to take out)."""
    reasons = list(route.reasons)
    source, since_days = route.source, route.since_days
    unsure = plan.confidence < FILTER_CONFIDENCE
    if unsure and source is None and len(plan.filters.sources) == 1:
        source = plan.filters.sources[0]
        reasons.append(f"plan names {source}")
    if unsure and since_days is None and plan.filters.since:
        start = datetime.fromisoformat(plan.filters.since.replace("Z", "+00:00"))
        since_days = max(1, ((now or datetime.now(UTC)) - start).days + 1)
        reasons.append(f"plan's date: last {since_days} days")
    if route.has_identifiers or source != route.source or since_days != route.since_days:
        reasons.append("routed with the rewrite plan")
    return Route(route.strategy, route.issue_keys, route.urls, route.document_ids, source, since_days, reasons,
                 route.container, None)  # fmt: skip


def _question_route(query: str, now: datetime | None) -> Route:
    reasons: list[str] = []
    urls = tuple(dict.fromkeys(u.split("?", 1)[0].split("#", 1)[0].rstrip(".,;") for u in URL.findall(query)))
    linked_keys = {m for u in urls for m in JIRA_BROWSE.findall(u)}
    # Any link may be a document's own (a Slack permalink, a Jira browse link, a page): each is looked up exactly.
    exact_urls = urls
    outside_urls = URL.sub(" ", query)
    keys = tuple(k for k in dict.fromkeys(ISSUE_KEY.findall(outside_urls)) if k not in linked_keys)
    document_id = _document_id()
    ids = tuple(dict.fromkeys(document_id.findall(outside_urls)))
    words = re.findall(r"\w{2,}", ISSUE_KEY.sub(" ", document_id.sub(" ", outside_urls)))
    if len(words) > REFERENCE_WORDS:
        # A long text (a pasted report, a description) cites other issues and links and tells its own story
        # ("since yesterday", "in Jira"): they are references, not what is sought (on the Jira set, 146 of 560
        # queries carry identifiers; looking them up first cost nDCG there). It is searched as it is.
        if keys or exact_urls or ids:
            reasons.append("long text: its identifiers are references")
        return Route("hybrid", reasons=reasons)
    if keys or exact_urls or ids:
        reasons.append("exact identifiers")
    plain = document_id.sub(" ", outside_urls)  # "jira:site:1" names a document, not the product
    named = [name for name, pattern in _source_words().items() if pattern.search(plain)]
    source = named[0] if len(named) == 1 else None
    if source:
        reasons.append(f"names {source}")
    hinted = [days for pattern, days in DATE_HINTS if pattern.search(query)]
    weekday = _weekday_days(query, now or datetime.now(UTC))
    since_days = min([*hinted, *([weekday] if weekday is not None else [])], default=None)
    text = None
    if since_days is not None:
        reasons.append(f"date hint: last {since_days} days")
        text = _without_date_words(query)
    container = _container(outside_urls)
    if container:
        reasons.append(f"names channel {container}")
    strategy = "bm25" if (keys or exact_urls or ids) and not words else "hybrid"
    return Route(strategy, keys, exact_urls, ids, source, since_days, reasons, container, text)
