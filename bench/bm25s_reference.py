"""Reference BM25 on a BEIR dataset with bm25s, scored by the same ranx metrics as ``rag-pipeline bench``.

The SciFact target asks for the pipeline's BM25 arm to be within 0.01 nDCG@10 of bm25s on the same
corpus. bm25s runs with its defaults (Lucene BM25, k1=1.5, b=0.75) plus English stopwords and the
Snowball stemmer, i.e. the same analysis as Qdrant's Bm25 that the pipeline uses.

    python bench/bm25s_reference.py [data/beir_scifact] [--k1 1.5 --b 0.75] [--out FILE.json]

The dataset is not shipped (SciFact is CC BY-NC); download and unzip it first (bench/README.md):
https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import bm25s
import Stemmer

from rag_pipeline.evaluation.beir import load_beir
from rag_pipeline.evaluation.metrics import per_query_metrics

DEFAULT_BEIR = Path(__file__).resolve().parent.parent / "data" / "beir_scifact"
SCIFACT_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("beir", type=Path, nargs="?", default=DEFAULT_BEIR, help="BEIR folder (default: %(default)s)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--k1", type=float, default=1.5)
    parser.add_argument("--b", type=float, default=0.75)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not (args.beir / "corpus.jsonl").is_file():
        sys.exit(
            f"error: no BEIR dataset at {args.beir} (corpus.jsonl, queries.jsonl, qrels/). Download {SCIFACT_URL}, "
            "unzip it and pass its folder; see bench/README.md"
        )
    dataset = load_beir(args.beir, args.split)
    ids = list(dataset.corpus)
    texts = [f"{d.title}\n\n{d.text}" if d.title else d.text for d in dataset.corpus.values()]
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25(k1=args.k1, b=args.b)
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    qids = list(dataset.qrels)
    tokens = bm25s.tokenize([dataset.queries[q] for q in qids], stopwords="en", stemmer=stemmer, show_progress=False)
    docs, scores = retriever.retrieve(tokens, k=100, show_progress=False)
    run = {q: {ids[int(d)]: float(s) for d, s in zip(docs[i], scores[i], strict=True)} for i, q in enumerate(qids)}
    frame = per_query_metrics(dataset.qrels, run)
    result = {
        "engine": f"bm25s {bm25s.__version__}",
        "k1": args.k1,
        "b": args.b,
        "queries": len(frame),
        **{m: round(float(frame[m].mean()), 4) for m in ("ndcg@10", "recall@10", "recall@100", "mrr@10", "map@100")},
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
