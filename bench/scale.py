"""Search at scale on the embedded engine: synthetic points shaped like the real index, 100k and more.

    .venv/bin/python -m bench.scale                                  # 100k and 300k child points
    .venv/bin/python -m bench.scale --points 1000000 --queries 200   # ~45 min on 2 cores, 18 GB RAM

Each point is what ``index_documents`` writes for a child chunk: a 384-d unit dense vector, a BM25 sparse
vector (~60 terms from a Zipf vocabulary of 30k, TF-saturated weights, IDF at query time) and the payload
(document/parent ids, source, container, ACL with users and groups, timestamps, ~400 characters of text).
Dense vectors come in topics, as real text does, in one of two shapes (``--shape``): ``text`` (the default)
is fitted to the neighbourhoods of the bundled child chunks' real MiniLM vectors (bench.scale_calibration:
local intrinsic dimension ~20, shared direction, nested topics); ``isotropic`` puts each point at its topic
centre plus noise in all 384 directions, a far harder case for HNSW than text (LID ~90 at 1M) that the first
runs used. Results are keyed ``<shape>/<points>``.
ACL groups: every point is in ``everyone`` and one long-tail group; 10 % also carry ``sel-10`` and 1 %
``sel-1``, so the hybrid+ACL query (the reader's groups, public or named user, as every search filters) runs
at 100 %, 10 % and 1 % selectivity.

Per N: load (upsert) and HNSW build (``optimize``) time, peak RSS, disk; p50/p95 over ``--queries`` of dense
(HNSW and exact), BM25, hybrid, and hybrid+ACL at each selectivity; HNSW recall@10 against exact search
(unfiltered and at 10 %). All through ``EdgeVectorStore``, the project's embedded engine.
Results: bench/results/scale.json (merged per N, so sizes can be run one at a time).
"""

from __future__ import annotations

import dataclasses
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import AclCondition, DenseSearch, SearchFilter, StorePoint
from rag_pipeline.vectors.sparse import SparseVector

DIM = 384
VOCABULARY = 30_000
TERMS_PER_POINT = 60
TOPICS = 2_000
BATCH = 2_048


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


class Corpus:
    """Deterministic synthetic child points, generated batch by batch (1M points never sit in memory).

    Sparse vectors and payloads are shared by every shape; a subclass decides where dense vectors lie
    (``dense``) and where a query's dense vector lies relative to the point it was drawn from (``_query_dense``).
    """

    def __init__(self, seed: int = 7) -> None:
        rng = np.random.default_rng(seed)
        self.centres = _unit(rng.standard_normal((TOPICS, DIM)))
        sizes = 1.0 / np.arange(1, TOPICS + 1) ** 0.8
        self.topic_p = sizes / sizes.sum()
        ranks = np.arange(1, VOCABULARY + 1)
        term_p = 1.0 / ranks**1.07
        term_p[:50] = 0  # the stopwords BM25 drops
        self.term_p = term_p / term_p.sum()
        group_p = 1.0 / np.arange(1, 1001) ** 1.1
        self.group_p = group_p / group_p.sum()
        self.seed = seed

    def _topics(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.choice(TOPICS, size=size, p=self.topic_p)

    def dense(self, start: int, size: int) -> np.ndarray:
        """The unit dense vectors ``batch(start, size)`` writes. A batch is seeded by its start, so these are the
        corpus's points only for the starts and sizes the load uses (multiples of ``BATCH``); other calls draw new
        points from the same distribution."""
        raise NotImplementedError

    def _query_dense(self, start: int, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def query_vectors(self, count: int, seed: int = 1) -> np.ndarray:
        """The dense halves of ``queries(count, seed)``."""
        return np.asarray([dense for dense, _ in self.queries(count, seed)], dtype=np.float32)

    def batch(self, start: int, size: int) -> list[StorePoint]:
        dense = self.dense(start, size)
        # ACLs and terms come from their own stream, so every shape gets the same sparse vectors and payloads
        rng = np.random.default_rng((self.seed, start, 1))
        groups = rng.choice(1000, size=size, p=self.group_p)
        selector = rng.random(size)
        points = []
        for i in range(size):
            n = start + i
            terms = np.unique(rng.choice(VOCABULARY, size=TERMS_PER_POINT, p=self.term_p))
            tf = rng.integers(1, 4, size=len(terms))
            weights = tf * 2.2 / (tf + 1.2)  # BM25 TF saturation, k1 = 1.2, document at the average length
            acl_groups = ["everyone", f"group-{groups[i]}"] + (["sel-10"] if selector[i] < 0.10 else [])
            acl_groups += ["sel-1"] if selector[i] < 0.01 else []
            document = n // 5
            points.append(
                StorePoint(
                    id=str(uuid.UUID(int=n + 1)),
                    payload={
                        "document_id": f"doc-{document}",
                        "parent_id": f"parent-{document}",
                        "source": "slack" if document % 2 else "jira",
                        "container": f"C{document % 300:04d}",
                        "acl": {"public": False, "users": [f"U{document % 5000:05d}"], "groups": acl_groups},
                        "created": "2024-01-01T00:00:00+00:00",
                        "updated": "2024-06-01T00:00:00+00:00",
                        "version": float(n),
                        "text": "synthetic chunk text " * 19,
                    },
                    dense=dense[i].tolist(),
                    sparse=SparseVector(indices=[int(t) for t in terms], values=[float(w) for w in weights]),
                )
            )
        return points

    def queries(self, count: int, seed: int = 1) -> list[tuple[list[float], SparseVector]]:
        """Per query a new point drawn as the corpus's are (not one of them): a dense vector near it (per shape)
        and 6 of its terms. Terms do not depend on the topic, so the two halves find different points and hybrid
        fuses two lists, as a real query whose words and meaning point different ways would."""
        rng = np.random.default_rng(self.seed + seed)
        picked = []
        for start in rng.integers(0, 50_000, size=count):
            point = self.batch(int(start), 1)[0]
            assert point.sparse is not None
            noisy = self._query_dense(int(start), rng)
            chosen = rng.choice(point.sparse.indices, size=min(6, len(point.sparse.indices)), replace=False)
            picked.append((noisy.tolist(), SparseVector(indices=sorted(int(t) for t in chosen), values=[1.0] * 6)))
        return picked


class IsotropicTopics(Corpus):
    """Each point is its topic centre plus noise in all 384 directions, and a query is a corpus point plus more of
    that noise. Within a topic this is uniform noise: its queries' local intrinsic dimension is ~78 at 300k points
    and ~93 at 1M, where real chunk vectors measure 14-18 (bench.scale_calibration), the hard case for HNSW.
    The first scale runs used it."""

    def dense(self, start: int, size: int) -> np.ndarray:
        rng = np.random.default_rng((self.seed, start))
        topics = self._topics(rng, size)
        return _unit(self.centres[topics] + rng.standard_normal((size, DIM)).astype(np.float32) * 0.045)

    def _query_dense(self, start: int, rng: np.random.Generator) -> np.ndarray:
        return _unit(self.dense(start, 1)[0] + rng.standard_normal(DIM) * 0.03)


class TextShapedTopics(Corpus):
    """Vectors whose neighbourhoods look like the real index's (fitted by bench.scale_calibration against the
    bundled child chunks embedded with MiniLM): every vector shares one direction (mean cosine ~0.2), topics sit
    under 60 areas, and a topic's points spread in a 20-dimensional subspace of their own plus a little noise in
    all directions. A query is a fresh draw from a corpus point's topic, a little further out than its points."""

    AREAS = 60
    SUBSPACE = 20
    # weights of the shared direction, the area, the topic's own direction, the subspace spread and the
    # all-direction noise of points and of queries
    SHARED, AREA, TOPIC, SPREAD, NOISE, QUERY_NOISE = 0.543, 0.799, 0.451, 0.173, 0.326, 0.6

    def __init__(self, seed: int = 7) -> None:
        super().__init__(seed)
        rng = np.random.default_rng((seed, 2))
        shared = _unit(rng.standard_normal(DIM))
        areas = _unit(rng.standard_normal((self.AREAS, DIM)))
        area_p = 1.0 / np.arange(1, self.AREAS + 1) ** 0.8
        area_of = rng.choice(self.AREAS, TOPICS, p=area_p / area_p.sum())
        self.centres = (
            shared * self.SHARED + areas[area_of] * self.AREA + _unit(rng.standard_normal((TOPICS, DIM))) * self.TOPIC
        ).astype(np.float32)
        self.bases = (rng.standard_normal((TOPICS, DIM, self.SUBSPACE)) / np.sqrt(DIM)).astype(np.float32)

    def _draw(self, rng: np.random.Generator, topics: np.ndarray, noise: float) -> np.ndarray:
        spread = rng.standard_normal((len(topics), self.SUBSPACE)).astype(np.float32)
        within = np.empty((len(topics), DIM), dtype=np.float32)
        for i in range(0, len(topics), BATCH):  # bases[topics] is 30 KB per point: never for all points at once
            part = slice(i, i + BATCH)
            within[part] = np.einsum("nij,nj->ni", self.bases[topics[part]], spread[part])
        within *= self.SPREAD
        everywhere = rng.standard_normal((len(topics), DIM)).astype(np.float32) * (noise / np.sqrt(DIM))
        return _unit(self.centres[topics] + within + everywhere)

    def dense(self, start: int, size: int) -> np.ndarray:
        rng = np.random.default_rng((self.seed, start))
        return self._draw(rng, self._topics(rng, size), self.NOISE)

    def _query_dense(self, start: int, rng: np.random.Generator) -> np.ndarray:
        topic = self._topics(np.random.default_rng((self.seed, start)), 1)
        return self._draw(rng, topic, self.QUERY_NOISE)[0]


SHAPES: dict[str, type[Corpus]] = {"text": TextShapedTopics, "isotropic": IsotropicTopics}


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _disk_mb(folder: Path) -> float:
    return round(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20, 1)


def _latency(run: Callable[[Any], Any], queries: list[Any]) -> dict[str, float]:
    times = []
    for query in queries:
        started = time.perf_counter()
        run(query)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
    }


def _recall(store: EdgeVectorStore, exact: EdgeVectorStore, queries: list[Any], flt: SearchFilter | None) -> float:
    found = []
    for dense, _ in queries:
        truth = {h.id for h in exact.search_dense(dense, 10, flt)}
        got = {h.id for h in store.search_dense(dense, 10, flt)}
        found.append(len(truth & got) / max(1, len(truth)))
    return round(float(np.mean(found)), 4)


def run_size(
    n: int, queries: int, work: Path, search: DenseSearch, extra_ef: list[int], shape: str = "text"
) -> dict[str, Any]:
    corpus = SHAPES[shape]()
    folder = work / f"n{n}"
    shutil.rmtree(folder, ignore_errors=True)
    result: dict[str, Any] = {
        "points": n,
        "shape": shape,
        "hnsw": {"m": search.m, "ef_construct": search.ef_construct, "ef": search.hnsw_ef},
        "run": common.run_record(),
    }
    with EdgeVectorStore(folder, dense_search=search) as store:
        store.create_collections(DIM)
        started = time.perf_counter()
        for start in range(0, n, BATCH):
            store.upsert(store.names.children, corpus.batch(start, min(BATCH, n - start)))
            if (start // BATCH) % 50 == 0:
                print(f"  {n}: {start + BATCH:,} points loaded, {time.perf_counter() - started:.0f} s", flush=True)
        result["load_seconds"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        store.optimize()
        result["hnsw_build_seconds"] = round(time.perf_counter() - started, 1)
        print(
            f"  {n}: loaded in {result['load_seconds']} s, HNSW built in {result['hnsw_build_seconds']} s", flush=True
        )
    result["disk_mb"] = _disk_mb(folder)
    picked = corpus.queries(queries)
    acl = {
        "100%": SearchFilter(acl=AclCondition(user_ids=("nobody",), groups=("everyone",))),
        "10%": SearchFilter(acl=AclCondition(user_ids=("nobody",), groups=("sel-10",))),
        "1%": SearchFilter(acl=AclCondition(user_ids=("nobody",), groups=("sel-1",))),
    }
    started = time.perf_counter()
    with EdgeVectorStore(folder, dense_search=search) as store:
        result["open_seconds"] = round(time.perf_counter() - started, 2)
        # Untimed first, with other queries: the first query kinds timed after opening otherwise pay the cold page
        # cache (the results without "warm_up_queries" had none: their dense HNSW and BM25 rows read high).
        warm_up = corpus.queries(50, seed=2)
        for query in warm_up:
            store.search_hybrid(query[0], query[1], 10)
        result["warm_up_queries"] = len(warm_up)
        latency = {
            "dense_hnsw": _latency(lambda q: store.search_dense(q[0], 10), picked),
            "bm25": _latency(lambda q: store.search_sparse(q[1], 10), picked),
            "hybrid": _latency(lambda q: store.search_hybrid(q[0], q[1], 10), picked),
        }
        for share, flt in acl.items():
            latency[f"hybrid_acl_{share}"] = _latency(
                lambda q, f=flt: store.search_hybrid(q[0], q[1], 10, flt=f), picked
            )
        store.dense_search = DenseSearch(exact=True)
        latency["dense_exact"] = _latency(lambda q: store.search_dense(q[0], 10), picked)
        exact = _ExactView(store)
        result["recall@10"] = {}
        for ef in sorted({search.hnsw_ef, *extra_ef}):
            store.dense_search = dataclasses.replace(search, hnsw_ef=ef)
            if ef != search.hnsw_ef:
                latency[f"dense_hnsw_ef{ef}"] = _latency(lambda q: store.search_dense(q[0], 10), picked)
            result["recall@10"][f"ef{ef}"] = {
                "unfiltered": _recall(store, exact, picked, None),
                "acl_10%": _recall(store, exact, picked, acl["10%"]),
                "acl_1%": _recall(store, exact, picked, acl["1%"]),
            }
        store.dense_search = search
    result["latency"] = latency
    result["peak_rss_mb"] = _peak_rss_mb()
    shutil.rmtree(folder, ignore_errors=True)
    return result


class _ExactView:
    """The same open store answering dense queries by exact search (one opener per folder)."""

    def __init__(self, store: EdgeVectorStore) -> None:
        self.store = store

    def search_dense(self, dense: list[float], limit: int, flt: SearchFilter | None) -> list[Any]:
        previous = self.store.dense_search
        self.store.dense_search = DenseSearch(exact=True)
        try:
            return self.store.search_dense(dense, limit, flt)
        finally:
            self.store.dense_search = previous


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--points", type=int, nargs="+", default=[100_000, 300_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ef", type=int, default=DenseSearch().hnsw_ef, help="hnsw_ef at search time")
    parser.add_argument(
        "--also-ef", type=int, nargs="*", default=[64, 256], help="more hnsw_ef values: recall, latency"
    )
    parser.add_argument("--m", type=int, default=DenseSearch().m)
    parser.add_argument("--ef-construct", type=int, default=DenseSearch().ef_construct)
    parser.add_argument(
        "--shape",
        choices=sorted(SHAPES),
        default="text",
        help="dense vectors shaped like the real index's (text) or uniform noise around topic centres (isotropic)",
    )
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "scale.json")
    args = parser.parse_args()
    if len(args.points) > 1:
        # One process per size: peak RSS is per process, and each size's figure must be its own.
        for n in args.points:
            command = [sys.executable, "-m", "bench.scale", "--points", str(n), "--queries", str(args.queries)]
            command += ["--ef", str(args.ef), "--m", str(args.m), "--ef-construct", str(args.ef_construct)]
            command += ["--also-ef", *map(str, args.also_ef), "--shape", args.shape]
            command += ["--out", str(args.out)] + (["--work", str(args.work)] if args.work else [])
            subprocess.run(command, check=True)
        return
    search = DenseSearch(m=args.m, ef_construct=args.ef_construct, hnsw_ef=args.ef)
    results = common.read_json(args.out)
    with tempfile.TemporaryDirectory(dir=args.work) as scratch:
        for n in args.points:
            print(f"{n:,} points", flush=True)
            key = f"{args.shape}/{n}"
            results[key] = run_size(n, args.queries, Path(scratch), search, args.also_ef, args.shape)
            common.write_json(args.out, results)
            print(json.dumps(results[key], indent=2), flush=True)


if __name__ == "__main__":
    main()
