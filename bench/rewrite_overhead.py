"""What query rewriting adds to a search before the search itself: ``QueryRewriter.plan`` against the project's
OpenAI fake (cache miss: one chat completion through the real ``openai`` client; cache hit: the SQLite plan cache),
and what answering adds (one completion over a 5-document context). The fake answers in about a millisecond,
so these figures are the project's own overhead; a real model adds its latency (typically 0.3-2 s a call).

    /usr/bin/time -v .venv/bin/python -m bench.rewrite_overhead [--queries 200]
"""

from __future__ import annotations

import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import openai

from bench import common
from rag_pipeline.answers.context import build_context
from rag_pipeline.answers.generate import AnswerModel, write_answer
from rag_pipeline.retrieval.results import SearchResult
from rag_pipeline.retrieval.rewrite import QueryRewriter
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path, default=common.RESULTS / "rewrite_overhead.json")
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
    out = {
        "run": common.run_record(),
        "rewrite_cache_miss": common.latency_ms(miss, digits=3),
        "rewrite_cache_hit": common.latency_ms(hit, digits=3),
        "answer_5_documents": common.latency_ms(answer, digits=3),
    }
    print(json.dumps(out, indent=2))
    common.write_json(args.out, out)


if __name__ == "__main__":
    main()
