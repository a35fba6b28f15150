"""Arm runs on disk: one parquet per (arm, eval set), so arms evaluated in separate runs can be compared."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd

from rag_pipeline.evaluation.runner import ArmOutcome
from rag_pipeline.evaluation.summary import ArmRun

RUN_COLUMNS = ("query_id", "document_ids", "scores", "latency_ms", "leaks", "warnings", "chunk_ids")


def run_path(directory: Path, arm: str, eval_set: str) -> Path:
    return Path(directory) / arm / f"{eval_set}.parquet"


def eval_set_fingerprint(path: Path) -> str:
    """Hash of an eval set file: a saved run only counts for the eval set it was computed on."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def run_fingerprint(directory: Path, arm: str, eval_set: str) -> str | None:
    sidecar = run_path(directory, arm, eval_set).with_suffix(".json")
    return json.loads(sidecar.read_text()).get("eval_set_sha256") if sidecar.exists() else None


def save_arm_outcome(directory: Path, eval_set: str, outcome: ArmOutcome, fingerprint: str | None = None) -> Path:
    run = outcome.run
    frame = pd.DataFrame(
        [
            (
                qid,
                [d for d, _ in ranking],
                [float(s) for _, s in ranking],
                float(run.latency_ms.get(qid, float("nan"))),
                int(run.leaks.get(qid, 0)),
                json.dumps(outcome.warnings.get(qid, [])),
                [c for c, _ in outcome.chunk_rankings.get(qid, [])],
            )
            for qid, ranking in run.rankings.items()
        ],
        columns=list(RUN_COLUMNS),
    )
    path = run_path(directory, run.arm, eval_set)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path, index=False)
    path.with_suffix(".json").write_text(json.dumps({"eval_set_sha256": fingerprint, "queries": len(frame)}) + "\n")
    return path


def load_arm_outcome(directory: Path, arm: str, eval_set: str) -> ArmOutcome:
    path = run_path(directory, arm, eval_set)
    if not path.exists():
        raise FileNotFoundError(
            f"no {arm!r} run for eval set {eval_set!r} at {path}; materialize retrieval_eval[{arm}]"
        )
    frame = pd.read_parquet(path)
    run = ArmRun(arm=arm, rankings={}, latency_ms={}, leaks={})
    warnings: dict[str, list[str]] = {}
    chunks: dict[str, list[tuple[str, float]]] = {}
    row: Any  # pandas types a namedtuple's fields as any scalar; RUN_COLUMNS says what they hold
    for row in frame.itertuples(index=False):
        if "chunk_ids" in frame.columns:
            chunks[row.query_id] = list(zip(list(row.chunk_ids), [float(s) for s in row.scores], strict=True))
        run.rankings[row.query_id] = list(zip(list(row.document_ids), [float(s) for s in row.scores], strict=True))
        run.latency_ms[row.query_id] = float(row.latency_ms)
        run.leaks[row.query_id] = int(row.leaks)
        if row.warnings and row.warnings != "[]":
            warnings[row.query_id] = json.loads(row.warnings)
    return ArmOutcome(run, warnings, chunks)
