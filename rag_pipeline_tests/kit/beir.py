"""A tiny BEIR dataset for ``rag-pipeline bench --beir``: six abstracts, two test and four train queries."""

from __future__ import annotations

import json
from pathlib import Path

DOCS = {
    "d1": ("Aspirin and heart attacks", "Daily aspirin lowers the risk of a second heart attack in adults."),
    "d2": ("Vitamin D and bones", "Vitamin D supplements increase bone density in older women."),
    "d3": ("Sleep and memory", "Deep sleep consolidates memory of facts learned during the day."),
    "d4": ("Coffee and the liver", "Coffee drinkers show lower rates of liver cirrhosis."),
    "d5": ("Exercise and mood", "Aerobic exercise reduces symptoms of depression."),
    "d6": ("Salt and blood pressure", "Cutting salt intake lowers blood pressure in hypertension."),
}
TEST = {"t1": ("does aspirin prevent heart attacks", "d1"), "t2": ("salt raises blood pressure", "d6")}
TRAIN = {
    "r1": ("vitamin d for bone density", "d2"),
    "r2": ("sleep helps memory", "d3"),
    "r3": ("coffee protects the liver", "d4"),
    "r4": ("exercise against depression", "d5"),
}


def write_tiny_beir(folder: Path) -> Path:
    """Six documents, two test and four train queries, each judging one document."""
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "\n".join(json.dumps({"_id": k, "title": t, "text": x}) for k, (t, x) in DOCS.items()) + "\n"
    )
    queries = {**TEST, **TRAIN}
    (folder / "queries.jsonl").write_text("\n".join(json.dumps({"_id": k, "text": q}) for k, (q, _) in queries.items()))
    for split, qs in (("test", TEST), ("train", TRAIN)):
        rows = "".join(f"{q}\t{doc}\t1\n" for q, (_, doc) in qs.items())
        (folder / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return folder
