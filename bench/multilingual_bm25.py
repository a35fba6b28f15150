"""BM25 tokenizers on non-English and English retrieval sets: the word tokenizer (English-only setup) against
Qdrant's multilingual one and CJK character bigrams, every arm, through ``rag-pipeline bench --beir`` (same
chunking, vectors and index).

    .venv/bin/python bench/multilingual_bm25.py                     # Japanese and Korean man pages, SciFact
    .venv/bin/python bench/multilingual_bm25.py --sets eval_sets/manpages_ja --arms bm25
    .venv/bin/python bench/multilingual_bm25.py --tokenizers cjk-bigram   # keeps the other tokenizers' figures

The dense arm is the configured model (RAG_DENSE_MODEL, default the English MiniLM) in both setups: only
the BM25 terms change. Embeddings are cached in --data-dir, so the second tokenizer of a set re-embeds
nothing. Results: bench/results/multilingual_bm25.json and a markdown table printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SETS = [
    ROOT / "eval_sets" / "manpages_ja",
    ROOT / "eval_sets" / "manpages_ko",
    # SciFact is downloaded by the user (bench/README.md); the bench runs on what is there.
    ROOT / "data" / "beir_scifact",
]
TOKENIZERS = ("word", "multilingual", "cjk-bigram")


def run_bench(
    folder: Path, tokenizer: str, arms: Sequence[str], data_dir: Path, dense_model: str | None = None
) -> dict[str, Any]:
    """``rag-pipeline bench --beir`` with the tokenizer (and ``RAG_DENSE_MODEL``, when given): its JSON figures."""
    command = [
        str(Path(sys.executable).parent / "rag-pipeline"),
        "bench",
        "--beir",
        str(folder),
        "--arms",
        *arms,
        "--bm25-tokenizer",
        tokenizer,
        "--json",
        "--data-dir",
        str(data_dir),
    ]
    started = time.perf_counter()
    env = {**os.environ, "RAG_DENSE_MODEL": dense_model} if dense_model else None
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    figures = json.loads(done.stdout)
    figures["seconds"] = round(time.perf_counter() - started, 1)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", type=Path, default=DEFAULT_SETS, help="BEIR folders")
    parser.add_argument("--arms", nargs="+", default=["vector", "bm25", "hybrid"], help="arms to run")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/rag-bench-multilingual"), help="embedding cache")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/multilingual_bm25.json")
    parser.add_argument("--tokenizers", nargs="+", choices=TOKENIZERS, default=list(TOKENIZERS), help="to run")
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = json.loads(args.out.read_text()) if args.out.exists() else {}
    for folder in args.sets:
        for tokenizer in args.tokenizers:
            print(f"{folder.name}: {tokenizer} …", file=sys.stderr, flush=True)
            results.setdefault(folder.name, {})[tokenizer] = run_bench(folder, tokenizer, args.arms, args.data_dir)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
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
