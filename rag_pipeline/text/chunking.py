"""Parent and child chunks over tiktoken tokens (small-to-big retrieval).

Parents (default 2000 tokens, 200 overlap) are what a reader gets back; children (default 400,
50 overlap) are what gets embedded and matched, each pointing at its parent. Children must also
fit the dense model's own input limit, measured in the model's tokenizer: a child that does not
fit is shortened until it does, so no text is silently cut off by the embedder.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pydantic import BaseModel, Field, model_validator

from rag_pipeline.text.tokens import cl100k

log = logging.getLogger(__name__)

# Fixed namespace: chunk ids must be identical on every machine and every re-run.
CHUNK_NAMESPACE = uuid.UUID("6f1c2b8e-3d4a-5b6c-8d7e-9f0a1b2c3d4e")


class ChunkingConfig(BaseModel):
    """Chunk sizes in cl100k tokens."""

    parent_tokens: int = Field(2000, gt=0)
    parent_overlap: int = Field(200, ge=0)
    child_tokens: int = Field(400, gt=0)
    child_overlap: int = Field(50, ge=0)

    def signature(self) -> str:
        """The sizes as the index records them (index_info.claim_chunking)."""
        return f"parent {self.parent_tokens}/{self.parent_overlap}, child {self.child_tokens}/{self.child_overlap}"

    @model_validator(mode="after")
    def _overlaps_smaller_than_chunks(self) -> ChunkingConfig:
        if self.parent_overlap >= self.parent_tokens:
            raise ValueError(f"parent_overlap ({self.parent_overlap}) must be < parent_tokens ({self.parent_tokens})")
        if self.child_overlap >= self.child_tokens:
            raise ValueError(f"child_overlap ({self.child_overlap}) must be < child_tokens ({self.child_tokens})")
        if self.child_tokens > self.parent_tokens:
            raise ValueError(f"child_tokens ({self.child_tokens}) must be <= parent_tokens ({self.parent_tokens})")
        return self


def chunk_id(document_id: str, level: str, index: int) -> str:
    """Deterministic chunk/point id: uuid5 of (document id, level, index)."""
    return str(uuid.uuid5(CHUNK_NAMESPACE, f"{document_id}\x1f{level}\x1f{index}"))


@dataclass(frozen=True)
class Chunk:
    """A span of a document's text."""

    id: str
    document_id: str
    level: str  # "parent" | "child"
    index: int
    text: str
    token_start: int
    token_end: int
    parent_id: str | None = None
    model_tokens: int | None = None

    @property
    def token_count(self) -> int:
        return self.token_end - self.token_start


@dataclass
class ChunkStats:
    """What chunking did, for run metadata and warnings."""

    clamped_children: int = 0
    max_model_tokens: int = 0
    model_limit: int | None = None
    shortest_clamped: int | None = None


TokenCounter = Callable[[str], int]


class Chunker:
    """Splits documents into parents and children.

    ``model_token_counter``/``model_max_tokens`` describe the dense model's tokenizer and input
    limit; when given, every child is guaranteed to fit it.
    """

    def __init__(
        self,
        config: ChunkingConfig | None = None,
        model_token_counter: TokenCounter | None = None,
        model_max_tokens: int | None = None,
    ) -> None:
        self.config = config or ChunkingConfig()
        self._encoding = cl100k()
        self._model_tokens = model_token_counter
        self._model_max = model_max_tokens
        self.stats = ChunkStats(model_limit=model_max_tokens)

    def split(self, document_id: str, text: str) -> tuple[list[Chunk], list[Chunk]]:
        """Parents and children of one document, in order."""
        tokens = self._encoding.encode(text, disallowed_special=())
        parents: list[Chunk] = []
        children: list[Chunk] = []
        cfg = self.config
        for p_index, (p_start, p_end) in enumerate(_windows(0, len(tokens), cfg.parent_tokens, cfg.parent_overlap)):
            parent = Chunk(
                id=chunk_id(document_id, "parent", p_index),
                document_id=document_id,
                level="parent",
                index=p_index,
                text=self._decode(tokens[p_start:p_end]),
                token_start=p_start,
                token_end=p_end,
            )
            parents.append(parent)
            for c_start, c_end, text_c, model_n in self._children(tokens, p_start, p_end):
                children.append(
                    Chunk(
                        id=chunk_id(document_id, "child", len(children)),
                        document_id=document_id,
                        level="child",
                        index=len(children),
                        text=text_c,
                        token_start=c_start,
                        token_end=c_end,
                        parent_id=parent.id,
                        model_tokens=model_n,
                    )
                )
        return parents, children

    def _children(self, tokens: list[int], start: int, stop: int) -> Iterator[tuple[int, int, str, int | None]]:
        size, overlap = self.config.child_tokens, self.config.child_overlap
        while start < stop:
            end = min(start + size, stop)
            text = self._decode(tokens[start:end])
            model_n = self._model_tokens(text) if self._model_tokens else None
            if model_n is not None and self._model_max is not None and model_n > self._model_max:
                end, text, model_n = self._shrink_to_model_limit(tokens, start, end, model_n)
            yield start, end, text, model_n
            if end >= stop:
                return
            # Overlap never exceeds half the (possibly shortened) window, so every step advances.
            start = max(end - min(overlap, (end - start) // 2), start + 1)

    def _shrink_to_model_limit(self, tokens: list[int], start: int, end: int, model_n: int) -> tuple[int, str, int]:
        assert self._model_tokens is not None and self._model_max is not None
        limit = self._model_max
        while model_n > limit and end - start > 1:
            # Scale by the measured ratio, with a small margin, then re-measure.
            end = start + max(1, min(end - start - 1, int((end - start) * limit / model_n * 0.97)))
            text = self._decode(tokens[start:end])
            model_n = self._model_tokens(text)
        self.stats.clamped_children += 1
        length = end - start
        self.stats.shortest_clamped = (
            length if self.stats.shortest_clamped is None else min(self.stats.shortest_clamped, length)
        )
        self.stats.max_model_tokens = max(self.stats.max_model_tokens, model_n)
        if self.stats.clamped_children == 1:
            log.warning(
                "child chunks of %d cl100k tokens exceed the dense model's limit of %d model tokens; "
                "shortening them to fit (first at %d tokens)",
                self.config.child_tokens,
                limit,
                length,
            )
        return end, text, model_n

    def _decode(self, tokens: list[int]) -> str:
        # Windows may cut a multi-byte character; drop the partial bytes instead of inserting U+FFFD.
        return self._encoding.decode_bytes(tokens).decode("utf-8", errors="ignore").strip()


def _windows(start: int, stop: int, size: int, overlap: int) -> Iterator[tuple[int, int]]:
    if stop <= start:
        return
    while True:
        end = min(start + size, stop)
        yield start, end
        if end >= stop:
            return
        start = end - overlap
