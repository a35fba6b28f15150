"""Reference BM25 on a BEIR dataset with bm25s, scored by the same ranx metrics as ``rag-pipeline bench``.

The SciFact target asks for the pipeline's BM25 arm to be within 0.01 nDCG@10 of bm25s on the same
corpus. bm25s runs with its defaults (Lucene BM25, k1=1.5, b=0.75) plus English stopwords and the
Snowball stemmer, i.e. the same analysis as Qdrant's Bm25 that the pipeline uses.

    .venv/bin/python -m bench.bm25s_reference [SCIFACT_FOLDER] [--k1 1.5 --b 0.75] [--out FILE.json]

The folder defaults to $SCIFACT, else data/beir_scifact. The dataset is not shipped (SciFact is CC BY-NC);
download and unzip it once (bench/README.md)::

    curl -LO https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip
    unzip scifact.zip -d data && mv data/scifact data/beir_scifact
"""

from __future__ import annotations

import json
from pathlib import Path

import bm25s
import Stemmer

from bench import common
from rag_pipeline.evaluation.beir import load_beir
from rag_pipeline.evaluation.metrics import per_query_metrics


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument(
        "beir", type=Path, nargs="?", default=common.scifact_folder(), help="BEIR folder (default: %(default)s)"
    )
    parser.add_argument("--split", default="test")
    parser.add_argument("--k1", type=float, default=1.5)
    parser.add_argument("--b", type=float, default=0.75)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    dataset = load_beir(common.require_beir(args.beir), args.split)
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
        common.write_json(args.out, {**result, "run": common.run_record()})
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
