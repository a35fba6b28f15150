"""OpenAI embeddings (``text-embedding-3-small`` by default) as a dense encoder.

The official ``openai`` client reads ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` (any OpenAI-compatible
server) from the environment and retries 429/5xx with backoff, honouring Retry-After. Inputs are
truncated to the model's 8,191 tokens with tiktoken (cl100k_base, the v3 models' tokenizer) and
batched within the API's limits: 2,048 inputs and 300,000 tokens per request.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np

from rag_pipeline.text.tokens import cl100k

MODEL_DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
# US dollars per million input tokens (openai.com/api/pricing, 2026).
PRICE_PER_MILLION_TOKENS = {
    "text-embedding-3-small": 0.02,
    "text-embedding-3-large": 0.13,
    "text-embedding-ada-002": 0.10,
}
MAX_INPUT_TOKENS = 8191
MAX_INPUTS_PER_REQUEST = 2048
MAX_TOKENS_PER_REQUEST = 300_000
OPENAI_PREFIX = "openai:"


@dataclass
class OpenAIUsage:
    """What the encoder spent: requests, tokens billed, inputs truncated, retried responses."""

    model: str
    requests: int = 0
    tokens: int = 0
    truncated_inputs: int = 0
    retried_responses: int = 0

    @property
    def cost_usd(self) -> float:
        return round(self.tokens * PRICE_PER_MILLION_TOKENS.get(self.model, 0.0) / 1_000_000, 9)

    def as_metadata(self) -> dict[str, float | int]:
        return {
            "openai_requests": self.requests,
            "openai_tokens": self.tokens,
            "openai_cost_usd": self.cost_usd,
            "openai_truncated_inputs": self.truncated_inputs,
            "openai_retried_responses": self.retried_responses,
        }


def parse_openai_model(name: str) -> tuple[str, int | None]:
    """``openai:text-embedding-3-small@256`` -> (model, dimensions)."""
    spec = name.removeprefix(OPENAI_PREFIX)
    model, _, dims = spec.partition("@")
    if model not in MODEL_DIMENSIONS:
        raise ValueError(f"unknown OpenAI embedding model {model!r}: use one of {sorted(MODEL_DIMENSIONS)}")
    if dims and (not dims.isdigit() or not 1 <= int(dims) <= MODEL_DIMENSIONS[model]):
        raise ValueError(f"dimensions of {model} must be 1..{MODEL_DIMENSIONS[model]}, got {dims!r} in {name!r}")
    if dims and model == "text-embedding-ada-002":
        raise ValueError("text-embedding-ada-002 does not take `dimensions`")
    return model, int(dims) if dims else None


class OpenAIEmbeddingEncoder:
    """A :class:`~rag_pipeline.vectors.dense.DenseEncoder` on the OpenAI embeddings API."""

    backend = "openai"

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        dimensions: int | None = None,
        client: Any = None,
        max_retries: int = 8,
        timeout: float = 60.0,
    ) -> None:
        from openai import OpenAI

        self.model = model
        self.dimensions = dimensions
        self.model_id = f"{OPENAI_PREFIX}{model}" + (f"@{dimensions}" if dimensions else "")
        self.dimension = dimensions or MODEL_DIMENSIONS[model]
        self.max_tokens = MAX_INPUT_TOKENS
        self.usage = OpenAIUsage(model)
        # Count the 429/5xx answers the client retries (it hides them), for run metadata.
        http_client = httpx.Client(event_hooks={"response": [self._observe]}, timeout=timeout)
        self.client = client or OpenAI(max_retries=max_retries, timeout=timeout, http_client=http_client)

    def _observe(self, response: httpx.Response) -> None:
        if response.status_code == 429 or response.status_code >= 500:
            self.usage.retried_responses += 1

    def count_tokens(self, text: str) -> int:
        return len(cl100k().encode(text, disallowed_special=()))

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def _prepared(self, texts: Sequence[str]) -> list[tuple[str, int]]:
        out = []
        encoding = cl100k()
        for text in texts:
            tokens = encoding.encode(text or " ", disallowed_special=())
            if len(tokens) > MAX_INPUT_TOKENS:
                self.usage.truncated_inputs += 1
                tokens = tokens[:MAX_INPUT_TOKENS]
                text = encoding.decode(tokens)
            # The API rejects empty strings.
            out.append((text or " ", len(tokens)))
        return out

    @staticmethod
    def _batches(items: list[tuple[str, int]]) -> Iterator[list[str]]:
        batch: list[str] = []
        tokens = 0
        for text, count in items:
            if batch and (len(batch) >= MAX_INPUTS_PER_REQUEST or tokens + count > MAX_TOKENS_PER_REQUEST):
                yield batch
                batch, tokens = [], 0
            batch.append(text)
            tokens += count
        if batch:
            yield batch

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        rows: list[list[float]] = []
        for batch in self._batches(self._prepared(texts)):
            # No encoding_format: the client then asks for base64 and decodes it with numpy. Asking for floats made
            # the client build one pydantic value per float (4 million for the demo): ~10x the decoding CPU.
            kwargs: dict[str, Any] = {"model": self.model, "input": batch}
            if self.dimensions:
                kwargs["dimensions"] = self.dimensions
            response = self.client.embeddings.create(**kwargs)
            data = sorted(response.data, key=lambda d: d.index)
            if len(data) != len(batch):
                raise ValueError(f"OpenAI returned {len(data)} embeddings for {len(batch)} inputs")
            rows.extend(d.embedding for d in data)
            self.usage.requests += 1
            self.usage.tokens += int(getattr(response.usage, "total_tokens", 0) or 0)
        vectors = np.asarray(rows, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1.0, norms)
