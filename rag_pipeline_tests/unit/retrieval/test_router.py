"""The search router (issue 51, part 5): what a question's words say (identifiers, a named source, a date hint,
the strategy), and the ``routed`` mode following it on every engine: an exact identifier first, only if the reader
may read it; the named source first; a date hint that would leave nothing dropped with a warning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rag_pipeline.index.writer import write_documents
from rag_pipeline.retrieval.calibration import Calibration, CalibrationFile, ModeCalibration
from rag_pipeline.retrieval.planned_search import search_planned
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.retriever import Retriever
from rag_pipeline.retrieval.rewrite import Filters, PlanOutcome, QueryPlan
from rag_pipeline.retrieval.router import plan_route
from rag_pipeline_tests.unit.retrieval.test_retrieval import BM25, EVERYONE, TopicEncoder, document

PRIVATE = {"public": False, "users": ["U1"], "groups": []}


def test_the_route_of_a_question() -> None:
    key = plan_route("why does TIMOB-28561 crash on android?")
    assert key.issue_keys == ("TIMOB-28561",) and key.strategy == "hybrid" and key.has_identifiers
    assert plan_route("TIMOB-28561").strategy == "bm25"  # nothing but an identifier: nothing to embed
    link = plan_route("see https://acme.slack.com/archives/C0123/p1700000000123456?thread_ts=1 please")
    assert link.urls == ("https://acme.slack.com/archives/C0123/p1700000000123456",) and not link.issue_keys
    browse = plan_route("https://jira.acme.com/browse/OPS-7")
    assert browse.urls == ("https://jira.acme.com/browse/OPS-7",) and browse.issue_keys == ()  # the link, once
    assert plan_route("jira:jira.acme.com:10042 and more").document_ids == ("jira:jira.acme.com:10042",)
    assert plan_route("jira:jira.acme.com:10042 and more").source is None  # an id names a document, not Jira
    assert plan_route("the deploy ticket in Jira").source == "jira" and plan_route("슬랙에서 배포").source == "slack"
    assert plan_route("jira or slack?").source is None  # both named: no preference
    assert plan_route("an issue in this thread").source is None  # everyday words are not product names
    assert plan_route("what broke yesterday").since_days == 2 and plan_route("지난주 배포 장애").since_days == 14
    assert plan_route("UTF-8 and COVID-19 and x86-64").issue_keys == ("UTF-8", "COVID-19")  # key-shaped words
    # A long pasted text cites other issues, links and days: references, so it is searched as it is.
    pasted = plan_route("Steps: open the app, rotate, see TIMOB-1 and https://x.test/a since yesterday in jira. " * 3)
    assert pasted.issue_keys == () and pasted.urls == () and pasted.source is None and pasted.since_days is None
    assert pasted.reasons == ["long text: its identifiers are references"]
    plain = plan_route("kernel panic at boot")
    assert not plain.has_identifiers and plain.source is None and plain.since_days is None and plain.reasons == []


@pytest.fixture
def routed(store) -> Retriever:
    write_documents(
        store,
        [
            document("d1", [["kernel panic at boot", "kernel oops again"]]),
            document("d2", [["wifi drops every minute"]]),
            document("browse/OPS-7", [["OPS-7 printer jam in the office"]], source="jira", title="OPS-7: printer jam"),
            document("browse/OPS-8", [["OPS-8 kernel panic on the print server"]], source="jira", acl=PRIVATE),
            document("d5", [["kernel upgrade notes for the wiki"]], source="jira"),
        ],
    )
    return Retriever(store, BM25, dense=TopicEncoder())


@pytest.mark.parametrize(
    ("question", "days"),
    [("오늘 배포 장애", 1), ("어제 회의록", 2), ("그저께 올린 링크", 3), ("그제 얘기한 버그", 3),
     ("이번 주 릴리스", 14), ("저번주 장애 보고", 14), ("지난달 계약서", 62), ("작년 예산", 730),
     ("올해 목표", 730), ("今日の障害", 1), ("昨日のリリース", 2), ("一昨日のバグ", 3), ("先週の会議", 14),
     ("先月の請求", 62), ("去年の予算", 730), ("the day before yesterday", 3), ("what broke yesterday", 2),
     ("그제서야 알았다", None), ("프린터 드라이버", None)],
)  # fmt: skip
def test_korean_and_japanese_date_words_narrow_the_window(question: str, days: int | None) -> None:
    assert plan_route(question).since_days == days


@pytest.mark.parametrize(
    ("question", "source"),
    [("슬랙에서 민수가 올린 링크", "slack"), ("지라 티켓 상태", "jira"), ("위키에 있는 온보딩 문서", "confluence"),
     ("컨플루언스 페이지", "confluence"), ("スラックで共有されたリンク", "slack"), ("프린터 드라이버", None)],
)  # fmt: skip
def test_korean_and_japanese_product_words_pick_the_source(question: str, source: str | None) -> None:
    assert plan_route(question).source == source


def test_routed_puts_the_named_document_first_only_for_a_reader_of_it(routed: Retriever) -> None:
    hybrid = [r.document_id for r in routed.search("kernel panic OPS-7", "hybrid", EVERYONE, top_k=5).results]
    assert hybrid[0] != "browse/OPS-7"  # fusion ranks the key like any text
    response = routed.search("kernel panic OPS-7", "routed", EVERYONE, top_k=5)
    ids = [r.document_id for r in response.results]
    assert response.mode == "routed" and ids[0] == "browse/OPS-7" and len(ids) == len(set(ids))
    assert response.route is not None and response.route["issue_keys"] == ["OPS-7"]
    assert response.results[0].signals["exact"] == 1.0
    by_link = routed.search("what about https://example.test/d2 ?", "routed", EVERYONE, top_k=3).results
    assert by_link[0].document_id == "d2"
    # A key the reader may not read is not found, by key or by link; their search goes on as usual.
    bob = Principal(user_id="U2")
    for query in ("OPS-8 kernel", "https://example.test/browse/OPS-8 kernel"):
        seen = [r.document_id for r in routed.search(query, "routed", bob, top_k=5).results]
        assert "browse/OPS-8" not in seen and seen, query
    alice = Principal(user_id="U1")
    assert routed.search("OPS-8 kernel", "routed", alice, top_k=5).results[0].document_id == "browse/OPS-8"


def test_routed_results_take_the_strategys_calibration_and_exact_hits_are_certain(
    routed: Retriever, tmp_path: Path
) -> None:
    Calibration({"hybrid": ModeCalibration((0.0, 0.05), (0.2, 0.6), 10, 5)}).save(tmp_path / "c.json")
    routed.calibration = CalibrationFile(tmp_path / "c.json")
    response = routed.search("kernel panic OPS-7", "routed", EVERYONE, top_k=5)
    first, rest = response.results[0], response.results[1:]
    assert first.document_id == "browse/OPS-7" and first.relevance == 1.0
    assert rest and all(r.relevance is not None and 0.2 <= r.relevance <= 0.6 for r in rest)


def test_routed_prefers_the_named_source_and_drops_a_date_hint_that_leaves_nothing(routed: Retriever) -> None:
    plain = routed.search("kernel", "routed", EVERYONE, top_k=5).results
    named = routed.search("kernel in jira", "routed", EVERYONE, top_k=5).results
    sources = [r.source for r in named]
    assert sources == sorted(sources, key=lambda s: s != "jira") and "slack" in sources  # first, never alone
    order = [r.source for r in plain]
    assert order.index("slack") < len(order) - 1 - order[::-1].index("jira")  # plain: a Slack hit above a Jira one
    # Every document was last active in 2024: "yesterday" would leave nothing, so it is searched without it.
    dated = routed.search("kernel panic yesterday", "routed", EVERYONE, top_k=5)
    assert dated.results and any("date hint left no document" in w for w in dated.warnings)


MONDAY = datetime(2026, 12, 7, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "days"),
    [("금요일에 올린 링크", 4), ("월요일 회의록", 1), ("지난주 금요일 회의", 11), ("저번주 월요일에 배포", 8),
     ("토욜에 장애", 3), ("金曜日の障害", 4), ("先週の金曜日のリリース", 11), ("日曜に配布", 2),
     ("what broke on friday", 4), ("last friday's deploy", 4), ("last monday", 8), ("monday standup", 1),
     ("월요일부터 수요일까지 장애", 6), ("어제랑 금요일", 2), ("매일 요약", None), ("일요 예배", None)],
)  # fmt: skip
def test_named_weekdays_count_back_from_today(question: str, days: int | None) -> None:
    """A named weekday reaches back to its latest day (today counts); "지난주"/"先週" reach the week before."""
    assert plan_route(question, MONDAY).since_days == days


@pytest.mark.parametrize(
    ("question", "text"),
    [("어제 밤에 사진 찍고 싶어", "밤에 사진 찍고 싶어"), ("지난주 금요일에 민수가 올린 링크", "민수가 올린 링크"),
     ("先週の金曜日の障害", "障害"), ("what happened to the deploy on friday", "what happened to the deploy"),
     ("since last week the wifi drops", "the wifi drops"), ("월요일부터 수요일까지 장애", "장애"),
     ("오늘", None), ("프린터 드라이버", None)],
)  # fmt: skip
def test_the_date_words_are_not_searched_for(question: str, text: str | None) -> None:
    """Inside its window a question is searched without its date words (and their particles); nothing left, or
    no date words, leaves the question as it is."""
    assert plan_route(question, MONDAY).text == text


@pytest.mark.parametrize(
    ("question", "container"),
    [("#general 에서 배포 공지", "general"), ("갤럭시-문의 채널에서 배터리", "갤럭시-문의"),
     ("開発チャンネルのリンク", "開発"), ("the link in the ops-alerts channel", "ops-alerts"),
     ("#a and #b", None), ("C# compiler error", None), ("프린터 드라이버", None)],
)  # fmt: skip
def test_a_named_channel_is_the_routes_container(question: str, container: str | None) -> None:
    assert plan_route(question).container == container


def _dated(points, updated: str):
    for point in (*points.parents, *points.children):
        point.payload["updated"] = updated
    return points


def test_routed_searches_the_window_without_the_date_words_and_prefers_the_named_channel(store) -> None:
    recent = datetime.now(UTC).isoformat()
    write_documents(
        store,
        [
            _dated(document("lunch", [["yesterday yesterday lunch menu yesterday"]], title="#random: lunch"), recent),
            _dated(document("wifi", [["wifi drops every minute"]], title="#ops: wifi drops"), recent),
            _dated(document("wifi2", [["wifi drops again and again"]], title="#help: wifi again"), recent),
        ],
    )
    retriever = Retriever(store, BM25, dense=TopicEncoder())
    # The words as said: BM25 finds the thread that says "yesterday" most.
    assert retriever.search("yesterday wifi", "bm25", EVERYONE, top_k=3).results[0].document_id == "lunch"
    routed = retriever.search("yesterday wifi", "routed", EVERYONE, top_k=3)
    assert routed.route is not None and routed.route["since_days"] == 2
    assert routed.results[0].document_id in {"wifi", "wifi2"} and routed.results[-1].document_id == "lunch"
    # A named channel's thread comes first, the others still follow.
    for channel, first in (("help", "wifi2"), ("ops", "wifi")):
        named = retriever.search(f"wifi drops in the {channel} channel", "routed", EVERYONE, top_k=3).results
        assert named[0].document_id == first and len(named) == 3, channel


def test_a_rewrite_plan_adds_its_unsure_hints_and_never_overrides_the_questions() -> None:
    """Issue 67: the router takes the rewrite plan as input. Below the confidence at which the plan's filters
    apply, its one source and its start date are hints (a preference, a soft window); the question's own win."""
    week_ago = (MONDAY - timedelta(days=6)).isoformat()
    unsure = QueryPlan("kernel panic", filters=Filters(since=week_ago, sources=("jira",)), confidence=0.4)
    routed = plan_route("why does the kernel panic", MONDAY, plan=unsure)
    assert routed.source == "jira" and routed.since_days == 7 and routed.strategy == "hybrid"
    assert "plan names jira" in routed.reasons and "routed with the rewrite plan" in routed.reasons
    # Sure enough: the plan's filters apply as filters (planned_search.py); the route does not repeat them.
    sure = QueryPlan("kernel panic", filters=unsure.filters, confidence=0.9)
    assert plan_route("why does the kernel panic", MONDAY, plan=sure).source is None
    # The question's own source and date win; its identifiers stay, whatever the rewrite kept.
    own = plan_route("TIMOB-28561 in slack yesterday", MONDAY, plan=unsure)
    assert own.source == "slack" and own.since_days == 2 and own.issue_keys == ("TIMOB-28561",) and own.text is None
    assert plan_route("why does the kernel panic", MONDAY, plan=QueryPlan("kernel panic")).reasons == []


def test_a_planned_routed_search_looks_up_the_questions_identifier_the_rewrite_dropped(routed: Retriever) -> None:
    """The rewrite turned "OPS-7 kernel panic" into queries without the key: every query of the plan still follows
    the question's route, so the named document comes first, and the merged response says how it was routed."""
    plan = QueryPlan("kernel panic", sub_queries=("kernel oops",), confidence=0.2)
    planned = search_planned(routed, "kernel panic OPS-7", "routed", EVERYONE, 5, PlanOutcome(plan))
    ids = [r.document_id for r in planned.response.results]
    assert ids[0] == "browse/OPS-7" and planned.queries == ["kernel panic", "kernel oops"]
    assert planned.response.route is not None and planned.response.route["issue_keys"] == ["OPS-7"]
    assert "routed with the rewrite plan" in planned.response.route["reasons"]  # type: ignore[operator]
    # Each query alone, routed by its own words, would not have looked the key up.
    alone = routed.search("kernel panic", "routed", EVERYONE, top_k=5)
    assert alone.route is not None and alone.route["issue_keys"] == []
    # A reader who may not read the issue never gets it, plan or not.
    bob = Principal(user_id="U2")
    private = search_planned(routed, "kernel OPS-8", "routed", bob, 5, PlanOutcome(QueryPlan("kernel")))
    assert "browse/OPS-8" not in [r.document_id for r in private.response.results]
