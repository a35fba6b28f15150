"""Search at a million child chunks, served: the embedded engine filled through the project's own writer and
measured through the running HTTP service (issue 68, item 3).

    .venv/bin/python -m bench.search_million fill                 # resumable; ~1 h on 2 cores (the HNSW build is most)
    .venv/bin/python -m bench.search_million measure              # the service on the filled index
    .venv/bin/python -m bench.search_million fill --children 20000 --dir /tmp/sm_small   # a quick smoke run

The fill writes synthetic documents through :func:`rag_pipeline.stages.index_documents` (the writer the
``points`` asset runs: parents first, then children, version checks, the payload and ``acl.public`` mirror the
engine filters on), then :meth:`EdgeVectorStore.optimize` builds the HNSW graph. Each document has one parent and
four children; a child carries a 384-d dense vector shaped like MiniLM's text vectors (bench.scale's
``TextShapedTopics``), BM25 terms from the project's own encoder over ~60 words drawn from the bundled eval
queries' vocabulary (so real queries' terms hit), and the real payload. ACLs: ~6,000 containers across Slack,
Jira and Confluence; a quarter readable by the whole organisation's group, most by 1-3 of 3,000 groups (Zipf:
a few big teams, a long tail), 15 % private to 3-12 of 20,000 users (private channels, restricted spaces).

The fill keeps its progress in ``<dir>/fill.json`` after every batch: a killed fill resumes at the next batch
(point ids are deterministic, so a batch written twice is the same points). The index stays under ``--dir``
(default /tmp/search_million), never in the repository; ``measure`` reuses it.

``measure``: open time, files on disk, then ``rag-pipeline serve`` on the index (its own process, as deployed)
and, one client at a time, hybrid and reranked searches for a *member* (the organisation's group and 20 team
groups: ~40 % of the points) and a *narrow reader* (two long-tail groups: well under 1 %), p50/p95 as the
client sees them (query embedding included, real eval queries never embedded before); the service's RSS; then
the writer's throughput (documents/s through the same writer) while the service keeps answering. Every figure
carries the ``uptime`` load average read beside it: on a shared machine a figure under load is an upper bound.
Results: bench/results/search_million.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import resource
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

DEFAULT_DIR = Path("/tmp/search_million")
RESULTS = Path(__file__).parent / "results" / "search_million.json"
CHILDREN_PER_DOCUMENT = 4
WORDS_PER_CHILD = 60
CONTAINERS = 6_000
GROUPS = 3_000
USERS = 20_000
ORG_GROUP = "org:all-staff"
BATCH_DOCUMENTS = 2_500
DIRECT_BATCH_DOCUMENTS = 10_000
SEED = 11
SOURCES = ("slack", "jira", "confluence")
FIRST_DAY = datetime(2023, 1, 2, tzinfo=UTC)
HISTORY_DAYS = 3 * 365


def load_average() -> str:
    """The 1/5/15-minute load, as ``uptime`` prints it."""
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def _zipf(n: int, s: float) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1) ** s
    return p / p.sum()


def _vocabulary() -> list[str]:
    """Words of the bundled eval queries (Slack and Jira), most frequent first: the synthetic texts' words, so
    that real queries' BM25 terms hit them."""
    from bench.common import EVAL_SETS

    counts: dict[str, int] = {}
    for name in ("slack_ubuntu_dev", "jira_appcelerator_dev"):
        for line in (EVAL_SETS / f"{name}.jsonl").read_text(encoding="utf-8").split("\n"):
            if line.strip():
                for word in re.findall(r"[a-z][a-z0-9_]{2,}", json.loads(line)["query"].lower()):
                    counts[word] = counts.get(word, 0) + 1
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


class Workspace:
    """Deterministic synthetic documents of a company: containers with ACLs, documents with four children each."""

    def __init__(self, seed: int = SEED) -> None:
        from bench.scale import TextShapedTopics

        rng = np.random.default_rng((seed, 0))
        self.seed = seed
        self.words = np.array(_vocabulary())
        self.word_p = _zipf(len(self.words), 1.0)
        self.topic_words = [rng.permutation(len(self.words))[:150] for _ in range(200)]
        self.container_p = _zipf(CONTAINERS, 0.9)
        self.group_p = _zipf(GROUPS, 1.0)
        self.acls: list[dict[str, Any]] = []
        for _ in range(CONTAINERS):
            kind = rng.random()
            if kind < 0.25:
                self.acls.append({"public": False, "users": [], "groups": [ORG_GROUP]})
            elif kind < 0.85:
                groups = rng.choice(GROUPS, size=int(rng.integers(1, 4)), replace=False, p=self.group_p)
                self.acls.append({"public": False, "users": [], "groups": [f"team-{g:04d}" for g in sorted(groups)]})
            else:
                users = rng.choice(USERS, size=int(rng.integers(3, 13)), replace=False)
                self.acls.append({"public": False, "users": [f"user-{u:05d}" for u in sorted(users)], "groups": []})
        self.dense = TextShapedTopics(seed)

    @staticmethod
    def document_id(n: int) -> str:
        return f"{SOURCES[n % 3]}:doc-{n:08d}"

    def frames(self, first: int, count: int) -> Any:
        """The index stage's input frames for documents ``first`` .. ``first + count - 1``."""
        from rag_pipeline.stages import IndexInputs
        from rag_pipeline.text.chunking import chunk_id
        from rag_pipeline.vectors.sparse import Bm25Encoder

        rng = np.random.default_rng((self.seed, 1, first))
        containers = rng.choice(CONTAINERS, size=count, p=self.container_p)
        topics = rng.integers(0, len(self.topic_words), size=count)
        days = rng.integers(0, HISTORY_DAYS, size=count)
        n_children = count * CHILDREN_PER_DOCUMENT
        common = rng.choice(len(self.words), size=(n_children, WORDS_PER_CHILD // 2), p=self.word_p)
        docs, parents, children, texts = [], [], [], []
        for i in range(count):
            n = first + i
            doc_id = self.document_id(n)
            container = int(containers[i])
            updated = FIRST_DAY + timedelta(days=int(days[i]), minutes=int(rng.integers(0, 1440)))
            own = self.topic_words[int(topics[i])]
            child_texts = []
            for k in range(CHILDREN_PER_DOCUMENT):
                row = i * CHILDREN_PER_DOCUMENT + k
                topical = own[rng.integers(0, len(own), size=WORDS_PER_CHILD // 2)]
                words = np.concatenate([common[row], topical])
                rng.shuffle(words)
                child_texts.append(" ".join(self.words[words]))
            text = "\n".join(child_texts)
            source = SOURCES[n % 3]
            docs.append(
                {
                    "document_id": doc_id,
                    "source": source,
                    "container": f"{source}-c{container:05d}",
                    "title": " ".join(child_texts[0].split()[:8]),
                    "text": text,
                    "url": f"https://example.test/{doc_id}",
                    "authors": json.dumps([f"user-{int(rng.integers(0, USERS)):05d}"]),
                    "created": updated.isoformat(),
                    "updated": updated.isoformat(),
                    "version": float(updated.timestamp()),
                    "content_hash": f"{n:016x}",
                    "acl": json.dumps(self.acls[container]),
                    "metadata": "{}",
                }
            )
            parent = chunk_id(doc_id, "parent", 0)
            parents.append((parent, doc_id, 0, text, 0, 400, 400))
            for k, child_text in enumerate(child_texts):
                children.append((chunk_id(doc_id, "child", k), doc_id, k, child_text, k * 100, k * 100 + 100, 100,
                                 parent, 100))  # fmt: skip
                texts.append(child_text)
        first_child = first * CHILDREN_PER_DOCUMENT
        vectors = self.dense.dense(first_child, n_children)
        sparse = Bm25Encoder().encode_documents(texts)
        child_ids = [c[0] for c in children]
        doc_of = [c[1] for c in children]
        from rag_pipeline.stages import CHILD_COLUMNS, DENSE_COLUMNS, PARENT_COLUMNS, SPARSE_COLUMNS

        return IndexInputs(
            documents=pd.DataFrame(docs),
            parents=pd.DataFrame(parents, columns=list(PARENT_COLUMNS)),
            children=pd.DataFrame(children, columns=list(CHILD_COLUMNS)),
            dense=pd.DataFrame(
                {"chunk_id": child_ids, "document_id": doc_of, "model": "all-MiniLM-L6-v2", "vector": list(vectors)},
                columns=list(DENSE_COLUMNS),
            ),
            sparse=pd.DataFrame(
                {
                    "chunk_id": child_ids,
                    "document_id": doc_of,
                    "indices": [np.asarray(v.indices, dtype=np.int64) for v in sparse],
                    "values": [np.asarray(v.values, dtype=np.float32) for v in sparse],
                },
                columns=list(SPARSE_COLUMNS),
            ),
        )

    def reader(self, kind: str) -> tuple[str, list[str]]:
        """(user id, groups) of the member (the organisation's group and 20 popular teams: about half the points) or
        the narrow reader (a member of one small private container and of two long-tail teams, each on one
        container: well under 1 %)."""
        if kind == "member":
            return "user-00001", [ORG_GROUP, *(f"team-{g:04d}" for g in range(0, 40, 2))]
        holders: dict[str, list[int]] = {}
        for c, acl in enumerate(self.acls):
            for group in acl["groups"]:
                holders.setdefault(group, []).append(c)
        single = sorted((float(self.container_p[cs[0]]), g) for g, cs in holders.items() if len(cs) == 1)
        groups = [g for _, g in single[len(single) // 2 : len(single) // 2 + 2]]
        private = min(
            (c for c, acl in enumerate(self.acls) if acl["users"]),
            key=lambda c: abs(float(self.container_p[c]) - 0.0005),
        )
        return str(self.acls[private]["users"][0]), groups


def _state(folder: Path) -> dict[str, Any]:
    path = folder / "fill.json"
    return dict(json.loads(path.read_text())) if path.exists() else {}


def _save_state(folder: Path, state: dict[str, Any]) -> None:
    path = folder / "fill.json"
    path.with_suffix(".tmp").write_text(json.dumps(state, indent=2) + "\n")
    path.with_suffix(".tmp").replace(path)


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def index_folder(folder: Path) -> Path:
    return folder / "data" / "qdrant"


def open_store(folder: Path, **kwargs: Any) -> Any:
    from rag_pipeline.index.edge_store import EdgeVectorStore

    return EdgeVectorStore(index_folder(folder), **kwargs)


def write_batches(store: Any, workspace: Workspace, first: int, count: int) -> Iterator[tuple[int, float]]:
    """Write documents ``first`` .. ``first + count - 1`` through the index stage in batches; yields (documents
    written so far, seconds of that batch)."""
    from rag_pipeline.stages import index_documents

    done = first
    while done < first + count:
        size = min(BATCH_DOCUMENTS, first + count - done)
        started = time.perf_counter()
        index_documents(store, workspace.frames(done, size), 384)
        done += size
        yield done, time.perf_counter() - started


def write_direct(store: Any, workspace: Workspace, first: int, count: int) -> Iterator[tuple[int, float]]:
    """Write documents ``first`` .. ``first + count - 1`` straight through the store's batch upsert, in batches of
    :data:`DIRECT_BATCH_DOCUMENTS`: the points the index stage builds (:func:`rag_pipeline.stages.document_points`:
    the real payload, ACL and ``acl.public`` mirror), without the writer's per-batch version reads (a fresh fill
    has nothing older to skip). About 10× the writer's pace; yields (documents written so far, seconds)."""
    from rag_pipeline.stages import document_points

    done = first
    while done < first + count:
        size = min(DIRECT_BATCH_DOCUMENTS, first + count - done)
        started = time.perf_counter()
        documents = document_points(workspace.frames(done, size))
        store.upsert(store.names.parents, [p for d in documents for p in d.parents])
        store.upsert(store.names.children, [p for d in documents for p in d.children])
        done += size
        yield done, time.perf_counter() - started


def dense_search_of(config: dict[str, Any]) -> Any:
    """The :class:`DenseSearch` a fill's recorded ``engine_config`` creates its collections with."""
    from rag_pipeline.index.store import DenseSearch

    return DenseSearch(**config)


def fill(
    folder: Path, children: int, stop_at: int | None = None, engine: dict[str, Any] | None = None, direct: bool = True
) -> dict[str, Any]:
    from rag_pipeline.index.index_info import claim_chunking, claim_dense_model, claim_sparse_terms
    from rag_pipeline.text.chunking import ChunkingConfig
    from rag_pipeline.vectors.sparse import Bm25Encoder

    folder.mkdir(parents=True, exist_ok=True)
    state = _state(folder)
    target = children // CHILDREN_PER_DOCUMENT
    if state.get("documents") and state["documents"] != target:
        raise SystemExit(f"{folder} holds a fill of {state['documents']} documents, not {target}: use another --dir")
    state.setdefault("documents", target)
    state.setdefault("written", 0)
    state.setdefault("write_seconds", 0.0)
    state.setdefault("engine_config", engine or {})
    state.setdefault("writes", "direct (store.upsert of the index stage's points)" if direct else "index_documents")
    workspace = Workspace()
    store = open_store(folder, dense_search=dense_search_of(state["engine_config"]))
    try:
        store.create_collections(384)
        claim_sparse_terms(store, Bm25Encoder().terms_id)
        claim_chunking(store, ChunkingConfig().signature())
        claim_dense_model(store, "all-MiniLM-L6-v2")
        began = time.perf_counter()
        until = min(target, stop_at or target)
        writes = write_direct if direct else write_batches
        for written, seconds in writes(store, workspace, state["written"], max(0, until - state["written"])):
            state["written"] = written
            state["write_seconds"] = round(state["write_seconds"] + seconds, 1)
            _save_state(folder, state)
            rate = (written * CHILDREN_PER_DOCUMENT) / max(state["write_seconds"], 1e-9)
            print(f"{written:,}/{target:,} documents, {rate:,.0f} children/s, load {load_average()}", flush=True)
        if state["written"] and state.get("optimized_at") != state["written"]:
            print(f"building the HNSW graph (optimize), load {load_average()}", flush=True)
            started = time.perf_counter()
            store.optimize()
            state["optimize_seconds"] = round(time.perf_counter() - started, 1)
            state["optimize_load"] = load_average()
            state["optimized_at"] = state["written"]
        state["fill_peak_rss_mb"] = max(state.get("fill_peak_rss_mb", 0.0), _peak_rss_mb())
        state["fill_wall_this_run_s"] = round(time.perf_counter() - began, 1)
        state["children_points"] = store.count(store.names.children)
        state["parent_points"] = store.count(store.names.parents)
        _save_state(folder, state)
    finally:
        store.close()
    print(json.dumps(state, indent=2))
    return state


_WRITER = """
import json, sys, time
from pathlib import Path
from bench.search_million import Workspace, open_store, write_batches
folder, first, rounds, per_round = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
workspace, out = Workspace(), []
for r in range(rounds):
    time.sleep(2.0)
    asked = time.perf_counter()
    store = open_store(folder, wait_seconds=300)
    opened = time.perf_counter()
    for _ in write_batches(store, workspace, first + r * per_round, per_round):
        pass
    store.close()
    held = round(time.perf_counter() - opened, 2)
    out.append({"documents": per_round, "wait_s": round(opened - asked, 2), "held_s": held})
print(json.dumps(out))
"""


def _timed_open(folder: Path) -> dict[str, Any]:
    started = time.perf_counter()
    store = open_store(folder)
    opened = time.perf_counter() - started
    children = store.count(store.names.children)
    store.close()
    return {"open_seconds": round(opened, 2), "children_points": children, "load": load_average()}


def _disk(folder: Path) -> dict[str, float]:
    files = [f for f in index_folder(folder).rglob("*") if f.is_file()]
    return {
        "index_files": len(files),
        "index_disk_mb": round(sum(f.stat().st_blocks * 512 for f in files) / 2**20, 1),
    }


def _reader_share(folder: Path, workspace: Workspace) -> dict[str, float]:
    """The share of the child points each reader may read (what the ACL filter keeps)."""
    from rag_pipeline.index.store import AclCondition, SearchFilter

    store = open_store(folder)
    try:
        total = store.count(store.names.children)
        out = {}
        for kind in ("member", "narrow"):
            user, groups = workspace.reader(kind)
            flt = SearchFilter(acl=AclCondition(user_ids=(user,), groups=tuple(groups)))
            out[kind] = round(store.count(store.names.children, flt) / max(total, 1), 5)
        return out
    finally:
        store.close()


def _service_memory_mb(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").split("\n"):
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def measure(folder: Path, queries: int, out: Path, writer: bool = True) -> dict[str, Any]:
    """Open time, disk, then the service's latency per reader and mode, its RSS, and the writer while it answers."""
    import subprocess
    import sys

    from bench import common
    from bench.serve_load import _cell, _queries, _service

    state = _state(folder)
    workspace = Workspace()
    result: dict[str, Any] = {
        "machine": "2 cores, AMD EPYC with AVX-512 BF16, 24 GB, shared with other helpers (load beside each figure)",
        "encoder": "all-MiniLM-L6-v2 for queries (the service's own); points: synthetic text-shaped vectors",
        "command": f"python -m bench.search_million fill --dir {folder}; python -m bench.search_million measure",
        "fill": state,
        **_disk(folder),
        "open": _timed_open(folder),
        "reader_share_of_children": _reader_share(folder, workspace),
    }
    print(json.dumps(result, indent=2), flush=True)
    os.environ["RAG_LANGUAGE"] = "english"
    pool = _queries()
    cells: list[dict[str, Any]] = []
    with _service(folder / "data", folder / "serve.log") as (url, process, first):
        result["start_to_first_answer_seconds"] = round(first, 2)
        used = 0
        for mode in ("hybrid", "reranked"):
            for kind in ("member", "narrow"):
                user, groups = workspace.reader(kind)
                headers = {"X-User-Id": user, "X-User-Groups": ",".join(groups)}
                asked = pool[used : used + queries]
                used += queries
                before = load_average()
                cell = _cell(url, headers, mode, 1, asked)
                cell.update({"reader": kind, "load_before": before, "load_after": load_average()})
                cells.append(cell)
                print(json.dumps(cell), flush=True)
        result["service_rss_mb"] = _service_memory_mb(process.pid)
        if not writer:
            result["writer_while_serving"] = "not measured this run (--no-writer)"
        else:
            # The writer's throughput while the service answers: new documents through the same writer, 3 rounds.
            writer_process = subprocess.Popen(
                [sys.executable, "-c", _WRITER, str(folder), str(state.get("written", 0) + 10_000_000), "3", "500"],
                stdout=subprocess.PIPE,
                text=True,
            )
            user, groups = workspace.reader("member")
            before = load_average()
            headers = {"X-User-Id": user, "X-User-Groups": ",".join(groups)}
            during = _cell(url, headers, "hybrid", 1, pool[used : used + queries])
            output, _ = writer_process.communicate(timeout=1800)
            rounds = json.loads(output)
            during.update({"reader": "member", "load_before": before, "load_after": load_average(), "writes": rounds})
            held = sum(r["held_s"] for r in rounds)
            result["writer_while_serving"] = {
                "documents_per_second_while_held": round(sum(r["documents"] for r in rounds) / max(held, 1e-9), 1),
                "children_per_second_while_held": round(
                    CHILDREN_PER_DOCUMENT * sum(r["documents"] for r in rounds) / max(held, 1e-9), 1
                ),
                "rounds": rounds,
                "searches_during_writes": during,
            }
    result["cells"] = cells
    result["date"] = datetime.now(UTC).date().isoformat()
    key = f"{state.get('written', 0) * CHILDREN_PER_DOCUMENT}_children"
    merged = json.loads(out.read_text()) if out.exists() else {}
    merged[key] = result
    common.write_json(out, merged)
    print(json.dumps(result, indent=2))
    return result


def _quantiles(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(ms, 50)), 2), "p95_ms": round(float(np.percentile(ms, 95)), 2)}


def _proc_memory_mb() -> dict[str, float]:
    """This process's resident memory: all of it, its anonymous part (heap: what stays in RAM) and its file-backed
    part (mapped index files the kernel may drop), and the peak."""
    out = {}
    for line in Path("/proc/self/status").read_text(encoding="utf-8").split("\n"):
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def query_vectors(folder: Path, count: int) -> dict[str, Any]:
    """The real query encoder's vectors of ``count`` eval queries (dense and BM25), computed once and kept in
    ``<dir>/queries.npz``, so engine-only timings leave the encoder out; the encoder's own time per query is kept
    beside them."""
    from rag_pipeline.composition import bm25_encoder, dense_encoder_of
    from rag_pipeline.settings import Settings

    path = folder / "queries.npz"
    if path.exists():
        kept = np.load(path, allow_pickle=True)
        return {k: kept[k] for k in kept.files}
    os.environ.setdefault("RAG_LANGUAGE", "english")
    from bench.serve_load import _queries

    settings = Settings.from_env()
    encoder, bm25 = dense_encoder_of(settings), bm25_encoder(settings)
    texts = [q for _, q in _queries()[:count]]
    encoder.encode_queries(texts[:2])  # the first call loads the model
    dense, dense_ms, sparse = [], [], []
    for text in texts:
        started = time.perf_counter()
        dense.append(np.asarray(encoder.encode_queries([text])[0], dtype=np.float32))
        dense_ms.append((time.perf_counter() - started) * 1000)
        vector = bm25.encode_query(text)
        sparse.append((np.asarray(vector.indices, dtype=np.int64), np.asarray(vector.values, dtype=np.float32)))
    out = {
        "dense": np.stack(dense),
        "dense_ms": np.asarray(dense_ms),
        "sparse": np.array(sparse, dtype=object),
        "model": np.array(encoder.model_id),
        "load": np.array(load_average()),
    }
    np.savez(path, **out)  # type: ignore[arg-type]
    return out


def sweep(folder: Path, queries: int, out: Path, settings_list: list[str]) -> dict[str, Any]:
    """Engine-only: the store opened in this process (as the service opens it), the kept query vectors, hybrid
    (dense + BM25, RRF, prefetch 50, top 10) and dense-only searches under each reader's ACL filter, for each
    search-time configuration; recall@10 of the dense list and of the fused top 10 against the same search with an
    exact dense scan. Memory of this process after each configuration."""
    import qdrant_edge as qe

    from bench import common
    from rag_pipeline.index.store import AclCondition, SearchFilter
    from rag_pipeline.vectors.sparse import SparseVector

    vectors = query_vectors(folder, queries)
    sparse = [
        SparseVector(indices=list(map(int, i)), values=list(map(float, v))) for i, v in vectors["sparse"][:queries]
    ]
    state = _state(folder)
    workspace = Workspace()
    # Two dense query sets: the real encoder's (eval queries: latency as served, but far from the synthetic points,
    # so their top 10 are near-ties and recall on them says little) and fresh draws from the points' own topics
    # (bench.scale's queries: what recall@10 is read on). Both paired with the real queries' BM25 vectors.
    query_sets = {"real": vectors["dense"][:queries], "shaped": workspace.dense.query_vectors(len(sparse))}
    memory_before = _proc_memory_mb()
    started = time.perf_counter()
    store = open_store(folder, dense_search=dense_search_of(state.get("engine_config", {})))
    open_seconds = time.perf_counter() - started
    configs: dict[str, dict[str, Any]] = {
        # the truth: every point the filter admits scored on its float vectors
        "exact": {"exact": True, "quantization": qe.QuantizationSearchParams(ignore=True)},
        "ef64": {"hnsw_ef": 64},
        "ef128": {"hnsw_ef": 128},
        "ef256": {"hnsw_ef": 256},
        "ef128_float": {"hnsw_ef": 128, "quantization": qe.QuantizationSearchParams(ignore=True)},
        "ef128_int8_rescore": {"hnsw_ef": 128, "quantization": qe.QuantizationSearchParams(rescore=True)},
        "ef128_int8_rescore_x2": {
            "hnsw_ef": 128,
            "quantization": qe.QuantizationSearchParams(rescore=True, oversampling=2.0),
        },
        "ef128_int8_no_rescore": {"hnsw_ef": 128, "quantization": qe.QuantizationSearchParams(rescore=False)},
        "ef64_int8_no_rescore": {"hnsw_ef": 64, "quantization": qe.QuantizationSearchParams(rescore=False)},
        "ef128_acorn": {"hnsw_ef": 128, "acorn": qe.AcornSearchParams(enable=True)},
    }
    chosen = settings_list or list(configs)
    result: dict[str, Any] = {
        "machine": "2 cores, AMD EPYC with AVX-512 BF16, 24 GB, shared with other helpers (load beside each figure)",
        "what": "engine only: store.search_hybrid / search_dense in-process with precomputed query vectors "
        f"({vectors['model']}; its own time per query is query_encoder_ms), ACL filter of each reader",
        "command": f"python -m bench.search_million sweep --dir {folder}",
        "engine_config": state.get("engine_config", {}),
        "children_points": store.count(store.names.children),
        "open_seconds": round(open_seconds, 2),
        "memory_before_open_mb": memory_before,
        "memory_after_open_mb": _proc_memory_mb(),
        "query_encoder_ms": {**_quantiles(list(vectors["dense_ms"])), "load": str(vectors["load"])},
        "configs": {},
    }
    print(json.dumps(result, indent=2), flush=True)
    readers = {}
    for kind in ("member", "narrow"):
        user, groups = workspace.reader(kind)
        readers[kind] = SearchFilter(acl=AclCondition(user_ids=(user,), groups=tuple(groups)))
    exact_ids: dict[tuple[str, str, str], list[list[str]]] = {}
    fields = ["document_id", "parent_id", "chunk_index"]
    try:
        for name in ["exact", *[c for c in chosen if c != "exact"]]:
            params = configs[name]
            store._search_params = lambda q, p=params: qe.SearchParams(**p) if q.dense else None
            cell: dict[str, Any] = {"load_before": load_average()}
            for (kind, flt), (set_name, dense), mode in itertools.product(
                readers.items(), query_sets.items(), ("hybrid", "dense")
            ):
                ms, ids = [], []
                for i in range(len(dense)):
                    begun = time.perf_counter()
                    if mode == "hybrid":
                        hits = store.search_hybrid(dense[i], sparse[i], 10, 50, flt, fields=fields)
                    else:
                        hits = store.search_dense(dense[i], 10, flt, fields=fields)
                    ms.append((time.perf_counter() - begun) * 1000)
                    ids.append([h.id for h in hits])
                entry: dict[str, Any] = _quantiles(ms)
                if name == "exact":
                    exact_ids[(kind, set_name, mode)] = ids
                truth = exact_ids[(kind, set_name, mode)]
                entry["recall_at_10_vs_exact"] = round(
                    float(np.mean([len(set(a) & set(b)) / max(len(b), 1) for a, b in zip(ids, truth, strict=True)])),
                    4,
                )
                cell[f"{kind}_{set_name}_{mode}"] = entry
            if name == "exact":
                # The BM25 list alone (no dense knob touches it): what of a hybrid search is the sparse side's.
                for kind, flt in readers.items():
                    ms = []
                    for vector in sparse:
                        begun = time.perf_counter()
                        store.search_sparse(vector, 50, flt, fields=fields)
                        ms.append((time.perf_counter() - begun) * 1000)
                    cell[f"{kind}_sparse_top50"] = _quantiles(ms)
            cell["load_after"] = load_average()
            cell["memory_mb"] = _proc_memory_mb()
            result["configs"][name] = cell
            print(name, json.dumps(cell), flush=True)
    finally:
        store.close()
    result["date"] = datetime.now(UTC).date().isoformat()
    merged = json.loads(out.read_text()) if out.exists() else {}
    merged[f"sweep_{result['children_points']}_children"] = result
    common.write_json(out, merged)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=("fill", "measure", "sweep"))
    parser.add_argument("--configs", default="", help="sweep: comma-separated configuration names (default all)")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--children", type=int, default=1_000_000)
    parser.add_argument("--stop-at", type=int, default=None, help="documents: stop the fill there (resume later)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--no-writer", action="store_true", help="measure: skip the writer-while-serving part")
    parser.add_argument("--through-writer", action="store_true", help="fill through index_documents (slow)")
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--ef-construct", type=int, default=100)
    parser.add_argument("--payload-m", type=int, default=None, help="0: no payload graph links (fast build)")
    parser.add_argument("--quantization", choices=("none", "int8"), default="none")
    args = parser.parse_args()
    if args.step == "fill":
        engine = {"m": args.m, "ef_construct": args.ef_construct, "quantization": args.quantization}
        if args.payload_m is not None:
            engine["payload_m"] = args.payload_m
        fill(args.dir, args.children, args.stop_at, engine, direct=not args.through_writer)
    elif args.step == "sweep":
        sweep(args.dir, args.queries, args.out, [c for c in args.configs.split(",") if c])
    else:
        measure(args.dir, args.queries, args.out, writer=not args.no_writer)


if __name__ == "__main__":
    main()
