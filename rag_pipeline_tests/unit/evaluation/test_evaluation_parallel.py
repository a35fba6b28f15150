"""Issue 48: an evaluation's search arms split over processes, each searching its own copy of the embedded index."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_pipeline.evaluation import parallel
from rag_pipeline.evaluation.eval_set import EvalQuery
from rag_pipeline.evaluation.parallel import EvalUnit, deal, eval_units, evaluate_sets
from rag_pipeline.evaluation.runner import ArmOutcome
from rag_pipeline.index.edge_store import EdgeReaderCopy, EdgeVectorStore
from rag_pipeline.index.writer import write_documents
from rag_pipeline.retrieval.results import MODES
from rag_pipeline.retrieval.retriever import Retriever
from rag_pipeline_tests.unit.retrieval.test_retrieval import BM25, CORPUS, TopicEncoder, document


def _queries(prefix: str, texts: list[tuple[str, str]], repeat: int = 3) -> list[EvalQuery]:
    return [
        EvalQuery(id=f"{prefix}{i}", query=f"{query} {i}", relevant={doc: 1})
        for i, (query, doc) in enumerate(texts * repeat)
    ]


SETS = [
    ("short", None, _queries("s", [("kernel panic", "d1"), ("wifi drops", "d2"), ("printer offline", "d3")])),
    ("long", None, _queries("l", [("kernel wifi\nthe kernel oops after the wifi driver upgrade", "d4"),
                                  ("printer\ncups says the printer is offline", "d3")], repeat=5)),
]  # fmt: skip


@pytest.fixture
def edge_index(tmp_path: Path) -> EdgeVectorStore:
    corpus = {f"n{i}": [[f"kernel wifi printer note {i} " + " ".join(["kernel"] * (i % 4))]] for i in range(24)}
    store = EdgeVectorStore(tmp_path / "qdrant")
    store.create_collections(4)
    write_documents(store, [document(d, parents) for d, parents in {**CORPUS, **corpus}.items()])
    yield store
    store.close()


def test_units_keep_hybrid_and_reranked_together_and_shares_are_balanced_in_order() -> None:
    """The reranked arm reuses the hybrid arm's lists, so they are one unit; every other arm is its own; the
    costliest units go first to the least loaded share, and each share keeps the sets' and arms' order."""
    units = eval_units(SETS, list(MODES))
    assert [(u.eval_set, u.arms) for u in units] == [
        (name, arms)
        for name in ("short", "long")
        for arms in (("hybrid", "reranked"), ("vector",), ("bm25",), ("prf",))
    ]
    long_unit = next(u for u in units if u.eval_set == "long" and u.arms == ("vector",))
    short_unit = next(u for u in units if u.eval_set == "short" and u.arms == ("vector",))
    assert long_unit.cost > short_unit.cost  # longer queries, and more of them
    shares = deal([EvalUnit("a", ("x",), 10.0), EvalUnit("b", ("y",), 6.0), EvalUnit("c", ("z",), 5.0)], 2)
    assert [[u.eval_set for u in share] for share in shares] == [["a"], ["b", "c"]]
    assert deal(units, 1) == [units]
    dealt = [u for share in deal(units, 3) for u in share]
    assert len(dealt) == len(units) and set(dealt) == set(units)


def _rankings(results) -> dict:
    out = {}
    for name, arm, outcome in results:
        assert isinstance(outcome, ArmOutcome), (name, arm, outcome)
        out[(name, arm)] = (outcome.run.rankings, outcome.run.leaks, outcome.warnings)
    return out


def test_arms_split_over_two_processes_rank_as_one_process(edge_index, monkeypatch) -> None:
    """Every (set, arm) ranking, score, leak count and warning is what one process gives, while a share really ran
    in a child process on a copy of the index (which the caller's store never wrote to)."""
    monkeypatch.setattr(parallel, "MIN_PARALLEL_QUERIES", 0)
    copies: list[Path] = []
    real_copy = EdgeVectorStore.reader_copy

    def counted(store: EdgeVectorStore, target: Path) -> EdgeReaderCopy:
        copy = real_copy(store, target)
        copies.append(copy.path)
        return copy

    monkeypatch.setattr(EdgeVectorStore, "reader_copy", counted)
    alone = _rankings(evaluate_sets(Retriever(edge_index, BM25, dense=TopicEncoder()), SETS, list(MODES), workers=1))
    assert copies == []
    encoder = TopicEncoder()
    plans: list[list[str]] = []
    split = _rankings(
        evaluate_sets(
            Retriever(edge_index, BM25, dense=encoder), SETS, list(MODES), workers=2,
            on_plan=lambda shares: plans.append(parallel.describe_shares(shares)),
        )
    )  # fmt: skip
    assert len(copies) == 1 and not copies[0].exists()  # a copy for the one child, removed afterwards
    assert len(plans) == 1 and len(plans[0]) == 2  # told before running: this process's share, the child's
    planned = [
        (name, arm)
        for line in plans[0]
        for part in line.split("; ")
        for name, arms in [part.split(": ")]
        for arm in arms.split(", ")
    ]
    assert sorted(planned) == sorted((name, arm) for name, _, _ in SETS for arm in MODES)  # each (set, arm) once
    assert split == alone
    assert set(split) == {(name, arm) for name, _, _ in SETS for arm in MODES}


def test_a_worker_that_fails_fails_only_its_own_arms_and_says_why(edge_index, monkeypatch) -> None:
    """A child that cannot open its copy fails the arms of its share, each with the child's error; the caller's
    own arms stand."""
    monkeypatch.setattr(parallel, "MIN_PARALLEL_QUERIES", 0)
    monkeypatch.setattr(
        EdgeVectorStore,
        "reader_copy",
        lambda store, target: EdgeReaderCopy(Path("/dev/null/no-index"), store.names, store.dense_search),
    )
    results = list(evaluate_sets(Retriever(edge_index, BM25, dense=TopicEncoder()), SETS, list(MODES), workers=2))
    failed = [(name, arm, outcome) for name, arm, outcome in results if isinstance(outcome, Exception)]
    stood = [(name, arm) for name, arm, outcome in results if isinstance(outcome, ArmOutcome)]
    assert failed and stood and len(failed) + len(stood) == len(SETS) * len(MODES)
    assert all("an evaluation worker exited with code 1" in str(outcome) for _, _, outcome in failed)
    assert all("no-index" in str(outcome) for _, _, outcome in failed)


def test_too_few_queries_no_room_or_a_store_that_cannot_be_copied_stay_in_one_process(
    edge_index, monkeypatch, caplog
) -> None:
    """Below MIN_PARALLEL_QUERIES a child would cost more than it saves; without room for a copy under TMPDIR, or
    with a store without ``reader_copy`` (a Qdrant server), nothing is copied."""
    calls: list[Path] = []
    monkeypatch.setattr(EdgeVectorStore, "reader_copy", lambda store, target: calls.append(target))
    assert sum(len(q) for _, _, q in SETS) < parallel.MIN_PARALLEL_QUERIES
    results = list(evaluate_sets(Retriever(edge_index, BM25, dense=TopicEncoder()), SETS, ["bm25"], workers=2))
    assert calls == [] and len(results) == len(SETS)

    class ServerLike:
        def __init__(self, store: EdgeVectorStore) -> None:
            self._store = store

        def __getattr__(self, name: str):
            if name == "reader_copy":
                raise AttributeError(name)
            return getattr(self._store, name)

    monkeypatch.setattr(parallel, "MIN_PARALLEL_QUERIES", 0)
    # Not room under TMPDIR for a copy: one process, and the log says why.
    monkeypatch.setattr(parallel.shutil, "disk_usage", lambda path: type("Usage", (), {"free": 1024})())
    with caplog.at_level("INFO", logger=parallel.__name__):
        cramped = list(evaluate_sets(Retriever(edge_index, BM25, dense=TopicEncoder()), SETS, ["bm25"], workers=2))
    assert calls == [] and len(cramped) == len(SETS) and "stays in one process" in caplog.text
    monkeypatch.undo()
    monkeypatch.setattr(EdgeVectorStore, "reader_copy", lambda store, target: calls.append(target))
    monkeypatch.setattr(parallel, "MIN_PARALLEL_QUERIES", 0)
    served = list(evaluate_sets(Retriever(ServerLike(edge_index), BM25, dense=TopicEncoder()), SETS, ["bm25"], 2))
    assert calls == [] and len(served) == len(SETS)


def test_a_caller_stopping_early_leaves_no_worker_running(edge_index, monkeypatch) -> None:
    """A caller that stops reading (or fails) kills the workers before their copies are removed."""
    monkeypatch.setattr(parallel, "MIN_PARALLEL_QUERIES", 0)
    started: list[parallel._Child] = []
    real_init = parallel._Child.__init__

    def recording(child, share):
        real_init(child, share)
        started.append(child)

    monkeypatch.setattr(parallel._Child, "__init__", recording)
    results = evaluate_sets(Retriever(edge_index, BM25, dense=TopicEncoder()), SETS, list(MODES), workers=2)
    next(results)
    results.close()
    assert len(started) == 1 and started[0]._process.poll() is not None


def test_a_worker_that_cannot_be_started_leaves_the_evaluation_in_one_process(edge_index, monkeypatch) -> None:
    """No process can be started (a sandbox without fork, out of memory): every arm still runs, here, and nothing
    is copied."""
    monkeypatch.setattr(parallel, "MIN_PARALLEL_QUERIES", 0)
    copies: list[Path] = []
    monkeypatch.setattr(EdgeVectorStore, "reader_copy", lambda store, target: copies.append(target))

    def no_process(*args, **kwargs):
        raise OSError("Resource temporarily unavailable")

    monkeypatch.setattr(parallel.subprocess, "Popen", no_process)
    results = list(evaluate_sets(Retriever(edge_index, BM25, dense=TopicEncoder()), SETS, list(MODES), workers=2))
    assert copies == [] and all(isinstance(outcome, ArmOutcome) for _, _, outcome in results)
    assert {(name, arm) for name, arm, _ in results} == {(name, arm) for name, _, _ in SETS for arm in MODES}
