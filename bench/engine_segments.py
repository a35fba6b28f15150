"""The embedded engine's memory and time per batch of a first index, by optimizer config (issue 68 item 2).

A first index writes its history in batches (``RAG_BACKFILL_BATCH_DOCUMENTS``) and the points step runs the
engine's ``optimize`` after each: with qdrant-edge's default optimizer config the merge optimizer keeps merging the
new segments into ever larger ones (a segment may grow to the engine's default maximum, hundreds of MB on 2 cores)
and rebuilds their HNSW graph, so a batch's time and the process's peak memory grow with the history written
(docs/notes/company_scale.md: one xl batch 157 s instead of 7-22 s, ~14 KB of RSS per document written).

This bench isolates the engine: synthetic child points shaped like the pipeline's (a 256-d dense vector, a title
vector on each, a BM25-like sparse vector of ~40 terms, a payload with ACL, dates and ~600 characters of text)
written through :class:`~rag_pipeline.index.edge_store.EdgeVectorStore` a batch at a time, reopened for every batch
as the pipeline's points step does, then ``optimize``; each arm in its own process, so its peak RSS is its own.
Per batch: seconds (upsert, optimize), RSS now, peak RSS (VmHWM), RssAnon, RssFile, segments on disk. Arms:
``default`` (the engine's optimizer defaults), ``capped`` (segments of at most ``MAX_SEGMENT_KB``, the store's
default now), ``capped_cold`` (also the dense vectors ``Memory.Cold``: mapped, not read in whole at open),
``capped_all_cold`` (also the BM25 index, the HNSW graphs, the payload indexes and the id tracker ``Memory.Cold``:
``edge_store.INDEX_MEMORY``).
The store returns what malloc holds free when it closes and after a merge (``index/native_memory.py``: the engine
allocates with the system malloc, so what it freed would stay in the process's arenas); ``--no-trim`` turns that off,
the A/B of the change, and then reads RssAnon once more after a ``malloc_trim(0)`` past the last batch: the
difference is memory held but not in use (with the trim on, RssAnon after a batch is already that).

    .venv/bin/python -m bench.engine_segments                          # every arm, 60 batches of 2,000 points
    .venv/bin/python -m bench.engine_segments --batches 20 --arm capped

Results: bench/results/engine_segments.json.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, parser, run_record, write_json

ARMS = ("default", "capped", "capped_cold", "capped_all_cold")


def _status() -> dict[str, int]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in {"VmRSS", "VmHWM", "RssAnon", "RssFile"}:
            fields[key] = int(value.split()[0]) // 1024
    return fields


def _points(rng: random.Random, start: int, count: int, dimension: int) -> list[Any]:
    from rag_pipeline.index.store import StorePoint
    from rag_pipeline.vectors.sparse import SparseVector

    points = []
    for i in range(start, start + count):
        container = f"C{rng.randrange(1000):04d}"
        terms = sorted(rng.sample(range(200_000), 40))
        day = f"2024-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T10:00:00+00:00"
        payload = {
            "document_id": f"slack:T0:{container}:{i}",
            "parent_id": f"p{i}",
            "source": "slack",
            "container": container,
            "acl": {
                "public": rng.random() < 0.9,
                "groups": ["slack:T0:members", f"g{rng.randrange(3000)}"],
                "users": [],
            },
            "authors": [f"U{rng.randrange(2000)}", f"U{rng.randrange(2000)}"],
            "url": f"https://scale.slack.com/archives/{container}/p{i}",
            "created": day,
            "updated": day,
            "version": float(i),
            "title": f"thread {i}",
            "text": " ".join(
                rng.choice(("deploy", "build", "release", "incident", "review", "merge")) for _ in range(90)
            ),
        }
        dense = [rng.gauss(0, 1) for _ in range(dimension)]
        title = [rng.gauss(0, 1) for _ in range(dimension)]
        sparse = SparseVector(indices=terms, values=[rng.random() for _ in terms])
        points.append(StorePoint(id=f"{i:032x}", payload=payload, dense=dense, sparse=sparse, title=title))
    return points


def run_arm(
    arm: str, batches: int, batch_points: int, max_segment_kb: int, folder: Path, trim: bool = True
) -> dict[str, Any]:
    """One arm in this process: ``batches`` batches written and optimized, figures per batch."""
    import qdrant_edge as qe

    from rag_pipeline.index import edge_store, native_memory
    from rag_pipeline.index.edge_store import EdgeVectorStore

    edge_store.SEGMENT_OPTIMIZERS = None if arm == "default" else edge_store.segment_optimizers(max_segment_kb)
    edge_store.VECTOR_MEMORY = qe.Memory.Cold if arm in ("capped_cold", "capped_all_cold") else None
    edge_store.INDEX_MEMORY = qe.Memory.Cold if arm == "capped_all_cold" else None
    release = native_memory.release_freed_memory
    if not trim:  # the store trims when it closes and after a merge (index/native_memory.py): the A/B turns it off
        native_memory.release_freed_memory = lambda: False
    rng = random.Random(7)
    rows = []
    started = time.perf_counter()
    for batch in range(batches):
        points = _points(rng, batch * batch_points, batch_points, 256)
        t0 = time.perf_counter()
        store = EdgeVectorStore(folder)
        try:
            store.create_collections(256)
            store.upsert(store.names.children, points)
            t1 = time.perf_counter()
            store.optimize()
            t2 = time.perf_counter()
        finally:
            store.close()  # flushes: where the engine finishes what its optimizers started
        t3 = time.perf_counter()
        del points
        segments = len(list((folder / store.names.children / "segments").iterdir()))
        status = _status()
        rows.append(
            {
                "batch": batch + 1,
                "upsert_s": round(t1 - t0, 2),
                "optimize_s": round(t2 - t1, 2),
                "close_s": round(t3 - t2, 2),
                "batch_s": round(t3 - t0, 2),
                "segments": segments,
                **{k.lower() + "_mb": v for k, v in status.items()},
            }
        )
        print(json.dumps({"arm": arm, **rows[-1]}), file=sys.stderr, flush=True)
    seconds = round(time.perf_counter() - started, 1)
    release()  # past the last batch, so the no-trim arm's batches ran untrimmed: what of its RssAnon is live
    return {"arm": arm, "seconds": seconds, "batches": rows, "last_rss_anon_live_mb": _status()["RssAnon"]}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--arm", action="append", choices=ARMS, help="an arm to run (default: all)")
    p.add_argument("--batches", type=int, default=60)
    p.add_argument("--batch-points", type=int, default=2_000)
    p.add_argument("--max-segment-kb", type=int, default=None, help="the capped arm's max segment size (KB)")
    p.add_argument("--no-trim", action="store_true", help="leave freed memory in malloc's arenas (the A/B)")
    p.add_argument("--child", choices=ARMS, help="internal: run one arm in this process")
    p.add_argument("--output", type=Path, default=RESULTS / "engine_segments.json")
    args = p.parse_args()
    from rag_pipeline.index.edge_store import MAX_SEGMENT_KB

    max_segment_kb = args.max_segment_kb or MAX_SEGMENT_KB
    if args.child:
        with tempfile.TemporaryDirectory(prefix="engine-segments-") as tmp:
            result = run_arm(
                args.child, args.batches, args.batch_points, max_segment_kb, Path(tmp), trim=not args.no_trim
            )
        print("RESULT " + json.dumps(result), flush=True)
        return
    arms = {}
    for arm in args.arm or ARMS:
        load_before = os.getloadavg()
        command = [sys.executable, "-m", "bench.engine_segments", "--child", arm, "--batches", str(args.batches)]
        command += ["--batch-points", str(args.batch_points), "--max-segment-kb", str(max_segment_kb)]
        command += ["--no-trim"] if args.no_trim else []
        out = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
        result = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])
        rows = result["batches"]
        result.update(
            peak_rss_mb=max(r["vmhwm_mb"] for r in rows),
            slowest_batch_s=max(r["batch_s"] for r in rows),
            peak_rss_anon_mb=max(r["rssanon_mb"] for r in rows),
            peak_rss_file_mb=max(r["rssfile_mb"] for r in rows),
            last_rss_anon_mb=rows[-1]["rssanon_mb"],
            load_average_before=[round(x, 2) for x in load_before],
            load_average_after=[round(x, 2) for x in os.getloadavg()],
        )
        result["malloc_trim"] = not args.no_trim
        if arm != "default":
            result["max_segment_kb"] = max_segment_kb
        arms[arm] = result
        print(arm, {k: v for k, v in result.items() if k != "batches"}, flush=True)
    write_json(
        args.output,
        {
            **run_record(),
            "note": "synthetic child points (256-d dense + title vector, ~40-term sparse, ACL payload); "
            "shared machine: see the load averages",
            "batch_points": args.batch_points,
            "arms": arms,
        },
    )


if __name__ == "__main__":
    main()
