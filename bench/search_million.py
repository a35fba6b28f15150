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


def fill(folder: Path, children: int, stop_at: int | None = None) -> dict[str, Any]:
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
    workspace = Workspace()
    store = open_store(folder)
    try:
        store.create_collections(384)
        claim_sparse_terms(store, Bm25Encoder().terms_id)
        claim_chunking(store, ChunkingConfig().signature())
        claim_dense_model(store, "all-MiniLM-L6-v2")
        began = time.perf_counter()
        until = min(target, stop_at or target)
        for written, seconds in write_batches(store, workspace, state["written"], max(0, until - state["written"])):
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


def _timed_open(folder: Path) -> dict[str, float]:
    started = time.perf_counter()
    store = open_store(folder)
    opened = time.perf_counter() - started
    children = store.count(store.names.children)
    store.close()
    return {"open_seconds": round(opened, 2), "children_points": children, "load": load_average()}  # type: ignore[dict-item]


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


def measure(folder: Path, queries: int, out: Path) -> dict[str, Any]:
    """Open time, disk, then the service's latency per reader and mode, its RSS, and the writer while it answers."""
    import subprocess
    import sys

    from bench import common
    from bench.serve_load import _cell, _queries, _rss_mb, _service

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
        result["service_rss_mb"] = _rss_mb(process.pid)
        # The writer's throughput while the service answers: new documents through the same writer, three rounds.
        writer = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(folder), str(state.get("written", 0) + 10_000_000), "3", "500"],
            stdout=subprocess.PIPE,
            text=True,
        )
        user, groups = workspace.reader("member")
        before = load_average()
        headers = {"X-User-Id": user, "X-User-Groups": ",".join(groups)}
        during = _cell(url, headers, "hybrid", 1, pool[used : used + queries])
        output, _ = writer.communicate(timeout=1800)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=("fill", "measure"))
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--children", type=int, default=1_000_000)
    parser.add_argument("--stop-at", type=int, default=None, help="documents: stop the fill there (resume later)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.step == "fill":
        fill(args.dir, args.children, args.stop_at)
    else:
        measure(args.dir, args.queries, args.out)


if __name__ == "__main__":
    main()
