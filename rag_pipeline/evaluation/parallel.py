"""Eval sets' arms run side by side: the caller's process and worker processes, each searching its own copy of the
embedded index.

One process searches on one core: qdrant-edge holds the GIL while it searches, and one opener per folder rules out a
second process on the same folder (measured 2026-11-29, AMD EPYC AVX-512 BF16, 2 cores: two threads searching one
shard took as long as one). So the work is cut into units — an eval set's hybrid and reranked arms together (the
reranked arm reuses the hybrid arm's lists and its own training candidates), every other arm alone — and the units
are dealt to the workers by their estimated cost (largest first, to the least loaded). The caller runs the first
share in-process on its open index; each other share runs in a child Python process on a copy of the index
(:meth:`~rag_pipeline.index.edge_store.EdgeVectorStore.reader_copy`, 0.7 s for the bundled 677 MB), with the query
vectors the caller embedded, so no child loads the model. Searches are deterministic and the reranker fits too, so
every ranking is the one a single process gives; the latencies are measured beside another process's work.

On the bundled closing evaluation (2 cores) the arms took 45.5 s in one process and 27 s in two. A Qdrant server (the
client store) cannot be copied and is not split here; nor are sets too small to pay for a child's start (~2 s).
"""

from __future__ import annotations

import logging
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import rag_pipeline
from rag_pipeline.evaluation.eval_set import EvalQuery
from rag_pipeline.evaluation.evaluate import arm_outcomes
from rag_pipeline.evaluation.runner import DEFAULT_DEPTH, ArmOutcome, ProgressCallback
from rag_pipeline.machine import usable_cores
from rag_pipeline.retrieval.results import Mode
from rag_pipeline.retrieval.retriever import Retriever, RetrieverConfig
from rag_pipeline.vectors.sparse import Bm25Encoder, Bm25Params

log = logging.getLogger(__name__)

# Relative cost of an arm per query (measured on the bundled Jira set: vector 2.0 s, bm25 1.4, hybrid 5.5,
# reranked with its training 17, prf 6.3). Only the split's balance depends on them.
ARM_WEIGHT: dict[str, float] = {"vector": 1.0, "bm25": 1.0, "hybrid": 3.0, "reranked": 8.0, "prf": 3.0, "routed": 3.0}
# Arms that share their searches, so they run in one process.
SHARED_ARMS = ("hybrid", "reranked")
# Fewer queries than this over every set run in one process: a child costs ~2 s to start (imports, opening its
# copy, reading the payloads into memory) and ~0.7 s to copy the bundled index.
MIN_PARALLEL_QUERIES = 300
# At most this many processes: each holds its own copy of the index on disk and in the page cache.
MAX_WORKERS = 4
# How much of a failed child's stderr an error quotes.
STDERR_TAIL = 2000

EvalSet = tuple[str, Sequence[str] | None, Sequence[EvalQuery]]  # name, sources, queries
ArmResult = tuple[str, str, ArmOutcome | Exception]  # eval set, arm, its outcome or what it raised


@dataclass(frozen=True)
class EvalUnit:
    """Arms of one eval set that run together, and their estimated cost (queries × length × arm weights)."""

    eval_set: str
    arms: tuple[Mode, ...]
    cost: float


def eval_units(sets: Sequence[EvalSet], arms: Sequence[Mode]) -> list[EvalUnit]:
    """Each set's hybrid and reranked arms as one unit, every other arm as its own; a query's cost grows with its
    length (a Jira issue searches many more terms than a Slack question)."""
    units = []
    for name, _sources, queries in sets:
        size = sum(1.0 + len(q.query) / 500.0 for q in queries)
        together = tuple(a for a in arms if a in SHARED_ARMS)
        groups = ([together] if together else []) + [(a,) for a in arms if a not in SHARED_ARMS]
        units += [EvalUnit(name, group, size * sum(ARM_WEIGHT.get(a, 3.0) for a in group)) for group in groups]
    return units


def deal(units: Sequence[EvalUnit], workers: int) -> list[list[EvalUnit]]:
    """The units in ``workers`` shares of about equal cost: the costliest first, each to the least loaded share
    (each share keeps its sets' order, so a set's arms run in the order asked)."""
    shares: list[list[EvalUnit]] = [[] for _ in range(max(workers, 1))]
    loads = [0.0] * len(shares)
    for unit in sorted(units, key=lambda u: -u.cost):
        least = loads.index(min(loads))
        shares[least].append(unit)
        loads[least] += unit.cost
    order = {unit: i for i, unit in enumerate(units)}
    return [sorted(share, key=order.__getitem__) for share in shares if share]


def describe_shares(shares: Sequence[Sequence[EvalUnit]]) -> list[str]:
    """One line per process: its eval sets' arms, e.g. ``jira_appcelerator_dev: hybrid, reranked``."""
    lines = []
    for share in shares:
        arms: dict[str, list[str]] = {}
        for unit in share:
            arms.setdefault(unit.eval_set, []).extend(unit.arms)
        lines.append("; ".join(f"{name}: {', '.join(names)}" for name, names in arms.items()))
    return lines


def evaluation_workers(requested: int = 0) -> int:
    """Processes an evaluation may use: ``requested``, or (0) one per core this process may use, at most
    :data:`MAX_WORKERS`."""
    return requested if requested > 0 else min(usable_cores(), MAX_WORKERS)


def evaluate_sets(
    retriever: Retriever,
    sets: Sequence[EvalSet],
    arms: Sequence[Mode],
    workers: int = 1,
    folds: int = 5,
    depth: int = DEFAULT_DEPTH,
    model_cache: Path | None = None,
    progress_for: Callable[[str], ProgressCallback | None] = lambda _name: None,
    on_plan: Callable[[list[list[EvalUnit]]], None] | None = None,
) -> Iterator[ArmResult]:
    """Every (set, arm) outcome, or what that arm raised, split over up to ``workers`` processes where the index
    can be copied and the sets are large enough (:data:`MIN_PARALLEL_QUERIES`); else one set after another here.
    ``progress_for(name)`` reports this process's own arms (a child's are reported when it finishes);
    ``on_plan(shares)`` is told what each process runs (this one's first) before any runs."""
    units = eval_units(sets, arms)
    copy_to = getattr(retriever.store, "reader_copy", None)
    large_enough = sum(len(q) for _, _, q in sets) >= MIN_PARALLEL_QUERIES
    shares = deal(units, workers) if copy_to is not None and workers > 1 and large_enough else [units]
    if len(shares) > 1 and not _room_for_copies(retriever.store, len(shares) - 1):
        shares = [units]
    children = _start_children(shares[1:]) if len(shares) > 1 else []
    if not children or copy_to is None:
        if on_plan is not None:
            on_plan([units])
        yield from _run_share(retriever, sets, units, folds, depth, model_cache, progress_for)
        return
    if on_plan is not None:
        on_plan(shares)
    with tempfile.TemporaryDirectory(prefix="rag-eval-workers-") as scratch:
        for i, child in enumerate(children, start=1):
            try:
                child.send(
                    _job(retriever, copy_to(Path(scratch) / str(i)), sets, child.share, folds, depth, model_cache)
                )
            except Exception as exc:  # that share's arms fail with it; the others run
                child.fail(exc)
        try:
            yield from _run_share(retriever, sets, shares[0], folds, depth, model_cache, progress_for)
            for child in children:
                yield from child.results()
        finally:  # a caller that stops early (or fails) leaves no worker searching a copy about to be removed
            for child in children:
                child.stop()


def _start_children(shares: Sequence[list[EvalUnit]]) -> list[_Child]:
    """A child per share, or none (the evaluation stays in one process) when one cannot be started."""
    children: list[_Child] = []
    try:
        for share in shares:
            children.append(_Child(share))
    except OSError as exc:
        for child in children:
            child.stop()
        log.warning("the evaluation stays in one process: a worker could not be started (%s)", exc)
        return []
    return children


def _room_for_copies(store: Any, copies: int) -> bool:
    """Whether ``TMPDIR`` holds ``copies`` copies of the index with a fifth to spare; if not, the evaluation stays
    in one process (a company's index can be many times the bundled 677 MB) and says why in the log."""
    size = int(getattr(store, "disk_bytes", lambda: 0)())
    scratch = tempfile.gettempdir()
    free = shutil.disk_usage(scratch).free
    if size * copies * 1.2 <= free:
        return True
    log.info(
        "the evaluation stays in one process: %d copies of the index (%.1f GB each) need more than the %.1f GB "
        "free under %s (set TMPDIR elsewhere, or RAG_EVAL_WORKERS=1 to skip this check)",
        copies, size / 1e9, free / 1e9, scratch,
    )  # fmt: skip
    return False


def _run_share(
    retriever: Retriever,
    sets: Sequence[EvalSet],
    share: Sequence[EvalUnit],
    folds: int,
    depth: int,
    model_cache: Path | None,
    progress_for: Callable[[str], ProgressCallback | None],
) -> Iterator[ArmResult]:
    for name, sources, queries in sets:
        arms = [arm for unit in share if unit.eval_set == name for arm in unit.arms]
        if not arms:
            continue
        progress = progress_for(name)
        for arm, outcome in arm_outcomes(retriever, queries, arms, sources, folds, progress, depth, model_cache):
            yield name, arm, outcome


@dataclass
class WorkerJob:
    """What a child needs to run its share (pickled on its stdin): its copy of the index, the searches' settings,
    the query vectors (texts → the caller's own cached vectors), the sets and its units."""

    index: Any  # EdgeReaderCopy: opens the copy
    config: RetrieverConfig
    bm25: Bm25Params
    model_id: str
    vectors: dict[str, np.ndarray]
    sets: list[tuple[str, list[str] | None, list[EvalQuery]]]
    share: list[EvalUnit]
    folds: int
    depth: int
    model_cache: Path | None


class KnownQueryVectors:
    """A dense encoder answering only the queries it was given the vectors of (a child's: the caller embedded them,
    so no child loads the model); any other text is an error, which degrades that search as a model failure would."""

    max_tokens = 512

    def __init__(self, model_id: str, vectors: dict[str, np.ndarray]) -> None:
        self.model_id, self._vectors = model_id, vectors
        self.dimension = len(next(iter(vectors.values()))) if vectors else 0

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in texts if t not in self._vectors]
        if missing:
            raise KeyError(f"{len(missing)} query texts were not embedded by the evaluation, e.g. {missing[0][:60]!r}")
        return np.stack([self._vectors[t] for t in texts])

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError("an evaluation worker embeds no documents")

    def count_tokens(self, text: str) -> int:
        raise NotImplementedError("an evaluation worker counts no tokens")


class _Child:
    """A worker process: started first (its imports overlap the caller's embedding of the queries and copying of the
    index), then given its job (:meth:`send`); :meth:`results` waits for its answer."""

    def __init__(self, share: list[EvalUnit]) -> None:
        self.share = share
        # The caller's package first on the child's path: the child runs the same code (a worktree, an editable
        # install). ``python -c``, not multiprocessing: no re-import of the caller's __main__, and a Celery pool
        # process (daemonic) may start it.
        root = str(Path(rag_pipeline.__file__).resolve().parent.parent)
        self._process = subprocess.Popen(
            [sys.executable, "-c", f"import sys; sys.path.insert(0, {root!r}); from {__name__} import main; main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._answer: tuple[bytes, bytes] | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._reaped = False

    def send(self, job: WorkerJob) -> None:
        self._thread = threading.Thread(target=self._talk, args=(pickle.dumps(job),), name="eval-worker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Kill the child if it still runs (its answer is no longer wanted); idempotent."""
        if self._process.poll() is None:
            self._process.kill()
        if self._thread is not None:
            self._thread.join()
        elif not self._reaped:
            self._process.communicate()
        self._reaped = True

    def fail(self, error: BaseException) -> None:
        """No job could be made (copying the index failed): stop the child; its arms fail with ``error``."""
        self._error = error
        self.stop()

    def _talk(self, request: bytes) -> None:
        try:
            self._answer = self._process.communicate(request)
        except BaseException as exc:  # reported by results()
            self._error = exc

    def results(self) -> Iterator[ArmResult]:
        if self._thread is not None:
            self._thread.join()
        try:
            if self._error is not None:
                raise self._error
            out, err = self._answer or (b"", b"")
            if self._process.returncode != 0 or not out:
                tail = err.decode(errors="replace")[-STDERR_TAIL:]
                raise RuntimeError(f"an evaluation worker exited with code {self._process.returncode}: {tail}")
            answered: list[ArmResult] = pickle.loads(out)
        except Exception as exc:  # every arm of the share failed with it
            answered = [(unit.eval_set, arm, exc) for unit in self.share for arm in unit.arms]
        yield from answered


def _job(
    retriever: Retriever,
    index: Any,
    sets: Sequence[EvalSet],
    share: list[EvalUnit],
    folds: int,
    depth: int,
    model_cache: Path | None,
) -> WorkerJob:
    names = {unit.eval_set for unit in share}
    mine = [(n, list(s) if s else None, list(q)) for n, s, q in sets if n in names]
    cache = retriever.query_cache
    vectors: dict[str, np.ndarray] = {}
    for _name, _sources, queries in mine:
        # Embedded set by set, as each arm's run embeds them (the same batches, so the same vectors).
        vectors.update(retriever.embed_queries([q.query for q in queries]))
    return WorkerJob(
        index=index,
        config=retriever.config,
        bm25=retriever.bm25.params,
        model_id=cache.encoder.model_id if cache is not None else "",
        vectors=vectors,
        sets=mine,
        share=share,
        folds=folds,
        depth=depth,
        model_cache=model_cache,
    )


def main() -> None:
    """A worker: read its job on stdin, run its share, write the pickled (set, arm, outcome or error) list."""
    job: WorkerJob = pickle.loads(sys.stdin.buffer.read())
    with job.index.open() as store:
        dense = KnownQueryVectors(job.model_id, job.vectors) if job.vectors else None
        retriever = Retriever(store, Bm25Encoder(job.bm25), dense=dense, config=job.config)
        sets: list[EvalSet] = [(n, s, q) for n, s, q in job.sets]
        results = list(_run_share(retriever, sets, job.share, job.folds, job.depth, job.model_cache, lambda _: None))
    try:
        payload = pickle.dumps(results)
    except Exception:  # an exception that does not pickle travels as its text
        payload = pickle.dumps(
            [
                (s, a, o if isinstance(o, ArmOutcome) else RuntimeError(f"{type(o).__name__}: {o}"))
                for s, a, o in results
            ]
        )
    sys.stdout.buffer.write(payload)
    sys.stdout.buffer.flush()
