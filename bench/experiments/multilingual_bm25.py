"""BM25 tokenizers on non-English and English retrieval sets: the word tokenizer (English-only setup) against
Qdrant's multilingual one and CJK character bigrams, every arm, through ``rag-pipeline bench --beir`` (same
chunking, vectors and index).

    .venv/bin/python -m bench.experiments.multilingual_bm25        # Japanese and Korean man pages, SciFact
    .venv/bin/python -m bench.experiments.multilingual_bm25 --sets eval_sets/manpages_ja --arms bm25
    .venv/bin/python -m bench.experiments.multilingual_bm25 --tokenizers cjk-bigram   # keeps the other figures

SciFact is read from $SCIFACT, else data/beir_scifact (download it once: bench/README.md); without it the
default runs the man-page sets only.

The dense arm is the configured model (RAG_DENSE_MODEL, default the English MiniLM) in both setups: only
the BM25 terms change. Embeddings are cached in --data-dir, so the second tokenizer of a set re-embeds
nothing. Results: bench/experiments/results/multilingual_bm25.json and a markdown table printed at the end.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import common

TOKENIZERS = ("word", "multilingual", "cjk-bigram", "ko-morpheme-bigram")


def default_sets() -> list[Path]:
    """The Japanese and Korean man-page sets, and SciFact where it was downloaded (bench/README.md)."""
    sets = [common.EVAL_SETS / "manpages_ja", common.EVAL_SETS / "manpages_ko"]
    scifact = common.scifact_folder()
    return [*sets, scifact] if (scifact / "corpus.jsonl").is_file() else sets


def run_bench(
    folder: Path, tokenizer: str, arms: Sequence[str], data_dir: Path, dense_model: str | None = None
) -> dict[str, Any]:
    """``rag-pipeline bench --beir`` with the tokenizer (and ``RAG_DENSE_MODEL``, when given): its JSON figures."""
    options = ["--arms", *arms, "--bm25-tokenizer", tokenizer]
    return common.beir_bench(folder, options, data_dir, {"RAG_DENSE_MODEL": dense_model} if dense_model else None)


def main() -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--sets", nargs="+", type=Path, default=default_sets(), help="BEIR folders")
    parser.add_argument("--arms", nargs="+", default=["vector", "bm25", "hybrid"], help="arms to run")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/rag-bench-multilingual"), help="embedding cache")
    parser.add_argument("--out", type=Path, default=common.EXPERIMENT_RESULTS / "multilingual_bm25.json")
    parser.add_argument("--tokenizers", nargs="+", choices=TOKENIZERS, default=list(TOKENIZERS), help="to run")
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = common.read_json(args.out)
    for folder in args.sets:
        for tokenizer in args.tokenizers:
            print(f"{folder.name}: {tokenizer} …", file=sys.stderr, flush=True)
            figures = run_bench(common.require_beir(folder), tokenizer, args.arms, args.data_dir)
            results.setdefault(folder.name, {})[tokenizer] = {**figures, "run": common.run_record()}
    common.write_json(args.out, results)
    print("| set | tokenizer | " + " | ".join(f"{a} nDCG@10" for a in args.arms) + " | queries |")
    print("|---|---|" + "---:|" * (len(args.arms) + 1))
    for name, by_tokenizer in results.items():
        for tokenizer, figures in by_tokenizer.items():
            cells = [f"{figures['arms'][a]['ndcg@10']:.3f}" for a in args.arms]
            print(f"| {name} | {tokenizer} | " + " | ".join(cells) + f" | {figures['queries']} |")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
