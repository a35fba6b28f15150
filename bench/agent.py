"""Tool-using answers (issue 52, part 1): latency and tool calls per question of ``RAG_AGENT=1`` answers against the
one-search answers, over a real ``rag-pipeline serve`` and the test kit's OpenAI fake as the model.

    .venv/bin/python -m bench.agent --data-dir /tmp/rag_demo   # a folder `rag-pipeline demo` indexed

The fake model is scripted as a careful agent: it lists the containers once, searches the question, and searches
again with the first line of the question when the first search's best document shares no word with it; then it
answers citing [1]. So the figures are the service's own cost of the agent loop (tool rounds, searches, document
numbering), not a real model's thinking time: how good real agent answers are needs a real model. The questions
are the first ``--questions`` of the bundled Slack and Jira dev sets. Results: bench/results/agent.json.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import openai

from bench.common import RESULTS, demo_reader_groups, dev_questions, parser, run_record, write_json
from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake

TOKEN = "bench-agent-token-123"


def _script(fake: OpenAIFake) -> None:
    def calls(body: dict[str, Any]) -> list[tuple[str, Any]] | None:
        question = next(str(m["content"]) for m in reversed(body["messages"]) if m.get("role") == "user")
        results = [json.loads(m["content"]) for m in body["messages"] if m.get("role") == "tool"]
        if not results:
            return [("list_containers", {}), ("search_documents", {"query": question[:300], "top_k": 5})]
        if len(results) == 2:
            found = results[1].get("documents") or []
            words = set(question.lower().split())
            if not found or not words & set(str(found[0].get("text", "")).lower().split()):
                return [("search_documents", {"query": question.splitlines()[0][:200], "top_k": 5})]
        return None

    fake.respond_with_tools(calls)
    fake.respond(lambda body: "From the documents: see [1]." if any(m.get("role") == "tool" for m in body["messages"])
                 else None)  # fmt: skip


def _run(service: S.ServiceProcess, questions: list[str], user_groups: str) -> dict[str, Any]:
    client = openai.OpenAI(base_url=f"{service.url}/v1", api_key=TOKEN, max_retries=0, timeout=120,
                           default_headers={"X-User-Id": "bench", "X-User-Groups": user_groups})  # fmt: skip
    seconds, tool_calls, sources = [], [], []
    for question in questions:
        started = time.perf_counter()
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": question}])
        seconds.append(time.perf_counter() - started)
        extra = reply.model_extra or {}
        tool_calls.append(len((extra.get("rag") or {}).get("tool_calls") or []))
        sources.append(len(extra.get("sources") or []))
    ms = sorted(s * 1000 for s in seconds)
    return {
        "questions": len(ms),
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 1),
        "tool_calls_per_question": round(statistics.fmean(tool_calls), 2),
        "sources_per_answer": round(statistics.fmean(sources), 2),
    }


def main() -> None:
    args = _parser().parse_args()
    questions = dev_questions(args.questions, cut=500)
    groups = demo_reader_groups(args.data_dir)
    results: dict[str, Any] = {}
    with OpenAIFake() as fake:
        _script(fake)
        env = {"RAG_SERVE_TOKEN": TOKEN, "RAG_ANSWER_MODEL": "gpt-4o-mini", "OPENAI_API_KEY": API_KEY,
               "OPENAI_BASE_URL": fake.base_url, "RAG_SERVE_TRUSTED_PROXY": "1",
               "RAG_SERVE_CACHE_ENTRIES": "0"}  # fmt: skip
        log = args.data_dir.parent / "agent_bench.log"
        for arm, extra in (("one_search", {}), ("agent", {"RAG_AGENT": "1"})):
            with S.running_service(args.data_dir, log, **env, **extra) as service:
                _run(service, questions[:3], groups)  # warm-up
                results[arm] = _run(service, questions, groups)
                print(f"{arm}: {json.dumps(results[arm])}")
    write_json(args.output, {**run_record(), "data_dir": str(args.data_dir), **results})


def _parser() -> Any:
    p = parser(__doc__)
    p.add_argument("--data-dir", type=Path, required=True, help="a data folder the demo indexed")
    p.add_argument("--questions", type=int, default=60, help="questions per arm (default: %(default)s)")
    p.add_argument("--output", type=Path, default=RESULTS / "agent.json")
    return p


if __name__ == "__main__":
    main()
