"""The miners on a crafted workspace: every signal (links across and within sources, Jira typed links, chat
threads), what each must refuse (a link the author may not read, a self-link, a deleted document, a key that is no
issue, an unknown author, a question that fills its thread), the question's mask, Korean labels, the week sample."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

import pytest

from rag_pipeline.evaluation.eval_set import load_eval_set
from rag_pipeline.evaluation.mining.copies import copy_group, copy_id
from rag_pipeline.evaluation.mining.corpus import Corpus
from rag_pipeline.evaluation.mining.mine import MiningReport, mine_workspace
from rag_pipeline.evaluation.mining.store import MinedSets, sampled
from rag_pipeline.evaluation.runner import principal_of
from rag_pipeline.index.store import Hit
from rag_pipeline.retrieval.grouping import documents_from_hits
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.sources.document import Document
from rag_pipeline.text.tokens import cl100k
from rag_pipeline_tests.kit.mining import (
    PUBLIC_SLACK,
    SECRET,
    SITE,
    TEAM,
    WIKI,
    jira_doc,
    page,
    slack_thread,
    write_workspace,
)

# Who the directory knows: rita reads OPS, sam reads OPS and the secret level, U1 and U2 are workspace members,
# pat reads the DOCS space; "ghost" is nobody.
READERS = {
    "jira:rita": Principal(user_id="rita", groups=(f"jira:{SITE}:project:OPS",)),
    "jira:sam": Principal(user_id="sam", groups=(f"jira:{SITE}:project:OPS", f"jira:{SITE}:security:10")),
    "slack:U1": Principal(user_id="U1", groups=(f"slack:{TEAM}:members", f"jira:{SITE}:project:OPS")),
    "slack:U2": Principal(user_id="U2", groups=(f"slack:{TEAM}:members",)),
    "confluence:pat": Principal(user_id="pat", groups=(f"confluence:{WIKI}:space:DOCS", f"jira:{SITE}:project:OPS")),
}
resolve: Callable[[str], Principal | None] = READERS.get

LONG_REPLY = " ".join(f"restart the ingest worker then check step {i} of the runbook" for i in range(12))


def workspace() -> list[Document]:
    return [
        jira_doc(
            "1", "OPS-1", "Ingest worker stalls after deploy", "The ingest worker stops picking jobs.", "2024-03-04"
        ),
        jira_doc(
            "2",
            "OPS-2",
            "Worker stuck again on Monday",
            "Same stall as before, queue grows without bound.",
            "2024-03-11",
            links=[
                {"relation": "duplicates", "key": "OPS-1"},
                {"relation": "relates to", "key": "OPS-3"},
                {"relation": "blocks", "key": "OPS-1"},
                {"relation": "relates to", "key": "OPS-404"},
            ],
        ),
        jira_doc(
            "3", "OPS-3", "Queue metrics missing", "The queue depth gauge is gone since OPS-1 hit us.", "2024-03-05"
        ),
        jira_doc(
            "9", "OPS-9", "Security review notes", "Private findings about the ingest service.", "2024-03-05", SECRET
        ),
        # Links: a key of another issue (OPS-3), its own key (not a link), a key nobody has (OPS-77), no issue (UTF-8).
        jira_doc(
            "4",
            "OPS-4",
            "Dashboard shows nothing",
            "Looks like OPS-3 again, see https://jira.acme.com/browse/OPS-3 and OPS-4 itself; encoding UTF-8 is fine.",
            "2024-03-12",
        ),
        jira_doc("5", "OPS-5", "Broken link only", "Please look at OPS-77 when you can today.", "2024-03-12"),
        # rita may not read OPS-9: never judged relevant to her.
        jira_doc(
            "6", "OPS-6", "Findings follow-up", "Follow up on the findings in OPS-9 for the service.", "2024-03-13"
        ),
        # sam may: judged.
        jira_doc(
            "7",
            "OPS-7",
            "Findings fixed",
            "Fixed what OPS-9 lists for the ingest service.",
            "2024-03-13",
            reporter_account="sam",
        ),
        jira_doc(
            "8",
            "OPS-8",
            "Who wrote this",
            "Mentions OPS-1 but the reporter is unknown here.",
            "2024-03-13",
            reporter_account="ghost",
        ),
        # Slack → Jira and Slack → Slack (a reply's permalink names its thread), Confluence → Jira.
        slack_thread(
            "C0GEN",
            "1710000000.000100",
            [
                ("U1", "alice", "is OPS-1 the reason the worker stalls after every deploy?"),
                (
                    "U2",
                    "bob",
                    "yes, and see https://acme.slack.com/archives/C0GEN/p1710000500000200?thread_ts=1710000400.000100&cid=C0GEN",
                ),
            ],
            "2024-03-09",
        ),
        slack_thread(
            "C0GEN",
            "1710000400.000100",
            [
                ("U2", "bob", "how do I restart the ingest worker safely?"),
                ("U1", "alice", LONG_REPLY),
            ],
            "2024-03-09",
        ),
        page(
            "100",
            "Ingest runbook",
            "When the worker stalls, read https://jira.acme.com/browse/OPS-1 first.",
            "2024-03-06",
        ),
        # A Korean thread, long enough that its replies outlast the question's chunk.
        slack_thread(
            "C0GEN",
            "1710000800.000100",
            [
                ("U1", "민수", "프린터 드라이버가 설치되지 않아요. 어떻게 해야 하나요?"),
                ("U2", "지연", "제어판에서 장치 관리자를 열고 드라이버를 다시 설치하세요. " * 8),
            ],
            "2024-03-10",
        ),
        # A short thread: the question and its answer share the one chunk, nothing is left to find it by.
        slack_thread(
            "C0GEN",
            "1710001200.000100",
            [("U1", "alice", "where is the wiki page for builds?"), ("U2", "bob", "in DOCS")],
            "2024-03-10",
        ),
    ]


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    raw, children = write_workspace(tmp_path, workspace())
    return Corpus(raw, children)


def _by_doc(report: MiningReport, name: str) -> dict[str, object]:
    return {q.id.split(":", 1)[1]: q for q in report.eval_sets[name][1]}


def test_links_within_and_across_sources_cut_the_reference_and_leave_out_the_asker(corpus: Corpus) -> None:
    report = mine_workspace(corpus, resolve, miners=["links"])
    links = _by_doc(report, "mined_links")
    issue4 = links[f"jira:{SITE}:4"]
    assert issue4.relevant == {f"jira:{SITE}:3": 1}  # its own key is no link
    assert (
        "OPS-3" not in issue4.query
        and "jira.acme.com" not in issue4.query
        and "Dashboard shows nothing" in issue4.query
    )
    assert issue4.exclude == [f"jira:{SITE}:4"]
    assert issue4.person == "jira:rita"
    thread = links[f"slack:{TEAM}:C0GEN:1710000000.000100"]
    # Slack → Jira by key, Slack → Slack by a reply's permalink (its thread_ts names the thread).
    assert thread.relevant == {f"jira:{SITE}:1": 1, f"slack:{TEAM}:C0GEN:1710000400.000100": 1}
    assert "OPS-1" not in thread.query and "archives" not in thread.query
    assert thread.person == "slack:U1"
    runbook = links[f"confluence:{WIKI}:100"]
    assert runbook.relevant == {f"jira:{SITE}:1": 1} and runbook.person == "confluence:pat"
    assert report.eval_sets["mined_links"][0].sources is None  # every source, as a reader searches


def test_links_that_must_not_become_queries_are_skipped_with_their_reason(corpus: Corpus) -> None:
    report = mine_workspace(corpus, resolve, miners=["links"])
    links = _by_doc(report, "mined_links")
    assert f"jira:{SITE}:5" not in links  # OPS-77: deleted or never there
    assert f"jira:{SITE}:6" not in links  # rita may not read OPS-9: never a query scoring a leak as relevant
    assert links[f"jira:{SITE}:7"].relevant == {f"jira:{SITE}:9": 1}  # sam may
    assert f"jira:{SITE}:8" not in links  # unknown author
    skipped = {reason for (_m, reason) in report.skipped}
    assert "names no stored document (deleted, or a key that is not one)" in skipped
    assert "author may not read the judged documents" in skipped
    assert "author not in the principal directory" in skipped
    for _meta, queries in report.eval_sets.values():
        for q in queries:
            reader = READERS[q.person]
            assert all(reader.admits(corpus.info(d).acl) for d in q.relevant), q.id
            assert not set(q.relevant) & set(q.exclude)


def test_jira_links_are_graded_by_type_and_scoped_to_jira(corpus: Corpus) -> None:
    report = mine_workspace(corpus, resolve, miners=["jira_links"])
    meta, queries = report.eval_sets["mined_jira_links"]
    assert meta.sources == ["jira"]
    (query,) = queries
    # duplicates → 2 (kept over blocks, which grades nothing), relates to → 1, a link to OPS-404 (not stored) dropped.
    assert query.relevant == {f"jira:{SITE}:1": 2, f"jira:{SITE}:3": 1}
    assert query.query.startswith("Worker stuck again on Monday\n\nSame stall") and "Comments" not in query.query
    assert query.exclude == [f"jira:{SITE}:2"]


def test_a_thread_question_is_masked_by_its_chunks_and_labelled_with_its_language(corpus: Corpus, tmp_path) -> None:
    report = mine_workspace(corpus, resolve, miners=["threads"])
    threads = _by_doc(report, "mined_threads")
    korean_id = f"slack:{TEAM}:C0GEN:1710000800.000100"
    korean = threads[korean_id]
    assert korean.query == "프린터 드라이버가 설치되지 않아요. 어떻게 해야 하나요?"
    assert korean.relevant == {korean_id: 1} and korean.person == "slack:U1"
    assert "lang:ko" in korean.tags and "week:2024-03-04" in korean.tags
    # Masked: exactly the children that start inside the question; the thread keeps children to be found by.
    spans = corpus.child_spans([korean_id])[korean_id]
    question_end = len(cl100k().encode("민수: 프린터 드라이버가 설치되지 않아요. 어떻게 해야 하나요?"))
    assert set(korean.exclude) == {chunk for chunk, start, _parent in spans if start < question_end}
    assert 0 < len(korean.exclude) < len(spans)
    assert f"slack:{TEAM}:C0GEN:1710001200.000100" not in threads  # the question fills its only chunk
    assert report.skipped[("threads", "the question fills every chunk of its thread (nothing left to find)")] >= 1
    assert report.languages["ko"] == 1


def test_a_masked_child_is_never_a_result_but_its_document_is_found_by_the_others() -> None:
    hits = [
        Hit("c0", 0.9, {"document_id": "thread", "parent_id": "p"}),
        Hit("c1", 0.5, {"document_id": "thread", "parent_id": "p"}),
        Hit("x0", 0.7, {"document_id": "other", "parent_id": "q"}),
    ]
    results = documents_from_hits(hits, exclude=["c0"], complete=False)
    assert [(r.document_id, r.child_id, r.score) for r in results] == [("other", "x0", 0.7), ("thread", "c1", 0.5)]
    assert [r.document_id for r in documents_from_hits(hits, exclude=["c0", "c1"])] == ["other"]


def test_since_until_and_the_cap_spread_over_weeks(corpus: Corpus) -> None:
    report = mine_workspace(corpus, resolve, miners=["links"], since=date(2024, 3, 11), until=date(2024, 3, 13))
    assert set(_by_doc(report, "mined_links")) == {f"jira:{SITE}:4"}
    capped = mine_workspace(corpus, resolve, miners=["links"], max_queries=2)
    queries = capped.eval_sets["mined_links"][1]
    by_source: dict[str, list[str]] = {}
    for q in queries:
        by_source.setdefault(q.tags[2], []).append(q.tags[4])
    assert all(len(weeks) <= 2 for weeks in by_source.values())
    jira_weeks = by_source["jira"]
    assert len(jira_weeks) == 2 and len(set(jira_weeks)) == 2  # one from each week before a second from either
    with pytest.raises(ValueError, match=r"unknown miner.*nope.*choose from links"):
        mine_workspace(corpus, resolve, miners=["nope"])


def test_run_as_everyone_keeps_what_no_membership_can_judge(corpus: Corpus) -> None:
    nobody = {k: Principal(user_id=v.user_id, groups=()) for k, v in READERS.items()}
    strict = mine_workspace(corpus, nobody.get, miners=["jira_links"])
    assert not strict.eval_sets
    assert (
        strict.skipped[
            ("jira_links", "author holds no groups in the directory (add a directory file, or run as everyone)")
        ]
        == 1
    )
    everyone = mine_workspace(corpus, nobody.get, miners=["jira_links"], run_as="everyone")
    meta, (query,) = everyone.eval_sets["mined_jira_links"]
    assert query.person is None and query.principal is None and "as:everyone" in query.tags
    assert "as:everyone" in meta.tags


def test_mined_sets_merge_weeks_to_the_cap_and_load_as_eval_sets(corpus: Corpus, tmp_path: Path) -> None:
    report = mine_workspace(corpus, resolve)
    sets = MinedSets(tmp_path / "mined")
    sets.write_weeks(report, ["2024-03-04", "2024-03-11"])
    counts = sets.merge(cap=1)
    assert counts["mined_links"] == 3  # one per source (jira, slack, confluence)
    path = sets.sets_dir / "mined_links.jsonl"
    loaded = load_eval_set(path, resolve_person=READERS.__getitem__)
    assert all(q.principal == READERS[q.person] for q in loaded)
    # Mining again replaces mined sets and leaves a team's own set in the same folder alone.
    (sets.sets_dir / "ours.jsonl").write_text('{"id": "a", "query": "x y z", "relevant": {"d": 1}}\n')
    sets.write_sets(MiningReport())
    assert sorted(p.name for p in sets.sets_dir.glob("*.jsonl")) == ["ours.jsonl"]
    assert len(sampled(report.eval_sets["mined_links"][1], cap=1)) == 3


def test_a_mined_line_whose_author_left_is_left_out_not_an_error(corpus: Corpus, tmp_path: Path) -> None:
    report = mine_workspace(corpus, resolve, miners=["links"])
    path = MinedSets(tmp_path).write_sets(report)[0]

    def gone_rita(person: str) -> Principal:
        if person == "jira:rita":
            raise LookupError("the principal directory knows no person 'jira:rita'")
        return READERS[person]

    with pytest.raises(ValueError, match=r"mined_links\.jsonl:\d+: .*jira:rita"):
        load_eval_set(path, gone_rita)
    kept = load_eval_set(path, gone_rita, skip_unknown_people=True)
    assert kept and all(q.person != "jira:rita" for q in kept)


def test_where_bm25_scores_whole_threads_a_thread_question_judges_a_copy_without_it(corpus: Corpus) -> None:
    # A CJK index: every child carries its thread's BM25 vector, so no chunk mask hides the question. The query
    # judges a copy of the thread without its question, hidden from every reader by a group of its own.
    report = mine_workspace(corpus, resolve, miners=["threads"], whole_threads=frozenset({"slack"}))
    queries = {q.query: q for q in report.eval_sets["mined_threads"][1]}
    korean = queries["프린터 드라이버가 설치되지 않아요. 어떻게 해야 하나요?"]
    thread = f"slack:{TEAM}:C0GEN:1710000800.000100"
    (copy,) = [c for c in report.masked_copies if c.metadata["masked_copy_of"] == thread]
    assert korean.relevant == {copy_id(thread): 1} and korean.exclude == [thread]
    assert "프린터 드라이버가 설치되지" not in copy.text and "프린터 드라이버가 설치되지" not in copy.title
    assert copy.text.startswith("지연: 제어판에서") and "제어판에서" in copy.title
    group = copy_group(thread)
    assert copy.acl.restricted_to == (group,) and copy.acl.groups == PUBLIC_SLACK.groups
    # Nobody reads a copy; the query's reader does, through the copy's own group.
    assert not READERS["slack:U1"].admits(copy.acl.model_dump())
    loaded = korean.model_copy(update={"principal": READERS["slack:U1"]})
    assert principal_of(loaded).admits(copy.acl.model_dump())
    assert len(report.masked_copies) == len(queries) == 4  # the short threads too: no chunk has to survive
    # Run as everyone, a query leaves out every other thread's copy.
    everyone = mine_workspace(
        corpus, resolve, miners=["threads"], whole_threads=frozenset({"slack"}), run_as="everyone"
    )
    for query in everyone.eval_sets["mined_threads"][1]:
        others = {c.id for c in everyone.masked_copies} - set(query.relevant)
        assert others <= set(query.exclude) and not set(query.relevant) & set(query.exclude)


def test_run_as_everyone_needs_no_author(tmp_path: Path) -> None:
    docs = [
        jira_doc("1", "OPS-1", "Worker stalls", "The worker stops picking jobs.", "2024-03-04", reporter_account=None),
        jira_doc("2", "OPS-2", "Stuck again", "Same stall as before on Monday.", "2024-03-04", reporter_account=None,
                 links=[{"relation": "duplicates", "key": "OPS-1"}]),
    ]  # fmt: skip
    raw, children = write_workspace(tmp_path, docs)
    corpus = Corpus(raw, children)
    strict = mine_workspace(corpus, resolve, miners=["jira_links"])
    assert strict.skipped[("jira_links", "no author recorded")] == 1 and not strict.eval_sets
    everyone = mine_workspace(corpus, resolve, miners=["jira_links"], run_as="everyone")
    (query,) = everyone.eval_sets["mined_jira_links"][1]
    assert query.relevant == {f"jira:{SITE}:1": 2} and query.person is None
