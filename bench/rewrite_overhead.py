"""What query rewriting adds to a search before the search itself: ``QueryRewriter.plan`` against the project's
OpenAI fake (cache miss: one chat completion through the real ``openai`` client; cache hit: the SQLite plan cache),
and what answering adds (one completion over a 5-document context). The fake answers in about a millisecond,
so these figures are the project's own overhead; a real model adds its latency (typically 0.3-2 s a call).

    /usr/bin/time -v .venv/bin/python bench/rewrite_overhead.py [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import openai

from rag_pipeline.answers.context import build_context
from rag_pipeline.answers.generate import AnswerModel, write_answer
from rag_pipeline.retrieval.results import SearchResult
from rag_pipeline.retrieval.rewrite import QueryRewriter
from rag_pipeline_tests.emulators.openai_api import API_KEY, OpenAIFake


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1000, 3),
        "n": len(ordered),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("bench/results/rewrite_overhead.json"))
    args = parser.parse_args()
    questions = [f"what did team {n} decide about the postgres upgrade last month?" for n in range(args.queries)]
    results = [
        SearchResult(
            f"slack:T:C:{n}.0",
            1.0,
            "slack",
            "C",
            f"Thread {n}",
            None,
            f"c{n}",
            "x",
            f"p{n}",
            parent_text="the postgres upgrade was decided by the infra team " * 20,
        )
        for n in range(5)
    ]
    now = datetime.now(UTC)
    with OpenAIFake() as fake, tempfile.TemporaryDirectory() as tmp:
        client = openai.OpenAI(base_url=fake.base_url, api_key=API_KEY, max_retries=0)
        rewriter = QueryRewriter("gpt-4o-mini", client=client, cache_path=Path(tmp) / "plans.sqlite")
        miss, hit, answer = [], [], []
        for question in questions:
            started = time.perf_counter()
            assert rewriter.plan(question, now).plan is not None
            miss.append(time.perf_counter() - started)
        for question in questions:
            started = time.perf_counter()
            assert rewriter.plan(question, now).cached
            hit.append(time.perf_counter() - started)
        model = AnswerModel("gpt-4o-mini", client=client)
        context = build_context(results)
        for question in questions[:50]:
            started = time.perf_counter()
            write_answer(model, question, context)
            answer.append(time.perf_counter() - started)
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if "model name" in line)
    except (OSError, StopIteration):
        pass
    out = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpu": cpu, "python": platform.python_version()},
        "rewrite_cache_miss": _ms(miss),
        "rewrite_cache_hit": _ms(hit),
        "answer_5_documents": _ms(answer),
    }
    print(json.dumps(out, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
