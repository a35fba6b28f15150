"""An LLM as a reranker: each (query, candidate) pair graded 0–10 by a chat model, as JSON.

The candidate is its parent text cut to 1,500 characters. Requests run concurrently, and grades are
cached in SQLite by (model, query, text), so a re-run of an evaluation costs nothing. The ``openai``
client reads OPENAI_API_KEY / OPENAI_BASE_URL (any OpenAI-compatible server) and retries 429/5xx.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_pipeline.retrieval.results import SearchResult
from rag_pipeline.retrieval.sqlite_cache import SqliteCache
from rag_pipeline.sources.registry import searched_sources_phrase

MAX_CANDIDATE_CHARS = 1500
SYSTEM_PROMPT = (
    "You grade search results for an internal search engine over what a company wrote in {sources}. Given a query "
    "and one candidate document, rate how well the candidate answers or directly addresses the query on a 0-10 "
    'scale (10: answers it, 0: unrelated). Reply with JSON only: {"score": <integer 0-10>}.'
)


@dataclass
class LlmUsage:
    """Requests sent, grades from the cache, unparseable replies, tokens."""

    requests: int = 0
    cached: int = 0
    unparseable: int = 0
    tokens: int = 0


def parse_grade(content: str | None) -> float | None:
    """The 0–10 score in a reply (JSON object, or a bare number as a fallback); None if there is none."""
    if not content:
        return None
    try:
        value: Any = json.loads(content)
        value = value.get("score") if isinstance(value, dict) else value
    except ValueError:
        match = re.search(r"-?\d+(?:\.\d+)?", content)
        value = match.group(0) if match else None
    try:
        return min(10.0, max(0.0, float(value)))
    except (TypeError, ValueError):
        return None


class LlmReranker:
    """A :class:`~rag_pipeline.retrieval.rerank.base.Reranker` that asks a chat model for grades."""

    def __init__(
        self,
        model: str = "gpt-4o-mini",
        client: Any = None,
        cache_path: str | Path | None = None,
        concurrency: int = 8,
        max_chars: int = MAX_CANDIDATE_CHARS,
        max_retries: int = 8,
    ) -> None:
        from openai import OpenAI

        self.model = model
        self.name = f"llm:{model}"
        self.client = client or OpenAI(max_retries=max_retries)
        self.cache = SqliteCache(cache_path, "grades", "score", "REAL")
        self.concurrency = concurrency
        self.max_chars = max_chars
        self.usage = LlmUsage()
        self._lock = threading.Lock()

    def _key(self, query: str, text: str) -> str:
        return hashlib.sha256(f"{self.model}\0{query}\0{text}".encode()).hexdigest()

    def _grade(self, query: str, text: str) -> float:
        key = self._key(query, text)
        cached = self.cache.get(key)
        if cached is not None:
            with self._lock:
                self.usage.cached += 1
            return float(cached)
        response = self.client.chat.completions.create(
            model=self.model,
            temperature=0,
            response_format={"type": "json_object"},
            messages=[
                # replace, not format: the prompt's JSON example has braces of its own.
                {"role": "system", "content": SYSTEM_PROMPT.replace("{sources}", searched_sources_phrase())},
                {"role": "user", "content": f"Query: {query}\n\nCandidate:\n{text}"},
            ],
        )
        grade = parse_grade(response.choices[0].message.content if response.choices else None)
        with self._lock:
            self.usage.requests += 1
            self.usage.tokens += int(getattr(response.usage, "total_tokens", 0) or 0)
            if grade is None:
                self.usage.unparseable += 1
        if grade is None:
            return 0.0  # an unreadable grade ranks last, and is asked again next time (not cached)
        self.cache.put(key, grade)
        return grade

    def score(self, query: str, candidates: Sequence[SearchResult]) -> list[float]:
        texts = [(c.parent_text or c.child_text)[: self.max_chars] for c in candidates]
        if not texts:
            return []
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(texts)))) as pool:
            grades = list(pool.map(lambda text: self._grade(query, text), texts))
        # Ties keep the retriever's order: a tiny bonus for earlier candidates.
        return [g + (len(grades) - i) * 1e-6 for i, g in enumerate(grades)]
