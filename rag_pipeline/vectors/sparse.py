"""BM25 sparse vectors: term-frequency saturation weights with stable hashed term ids.

Documents carry ``tf·(k1+1) / (tf + k1·(1 − b + b·dl/avg_len))`` per term; queries carry weight 1
per term; the Qdrant collection applies the IDF modifier at query time, so IDF stays right as
partitions add documents and nothing is ever refit. Tokenization (lowercasing, English stopwords,
Snowball stemming) and term hashing are Qdrant's own ``Bm25`` (from qdrant-edge-py), so index-time
and query-time processing are the same code and match what a Qdrant server would do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field
from qdrant_edge import Bm25, Bm25Config


class Bm25Params(BaseModel):
    """BM25 parameters. ``avg_len`` is a fixed prior (in tokens), not a corpus statistic."""

    k1: float = Field(1.2, ge=0)
    b: float = Field(0.75, ge=0, le=1)
    avg_len: float = Field(256.0, gt=0)
    language: str = "english"


@dataclass(frozen=True)
class SparseVector:
    """Parallel term ids and weights."""

    indices: list[int]
    values: list[float]


class Bm25Encoder:
    """Document and query sparse vectors from one tokenizer configuration."""

    def __init__(self, params: Bm25Params | None = None) -> None:
        self.params = params or Bm25Params()
        p = self.params
        self._model = Bm25(Bm25Config(k=p.k1, b=p.b, avg_len=p.avg_len, language=p.language))

    @property
    def model_id(self) -> str:
        p = self.params
        return f"qdrant-bm25(k1={p.k1},b={p.b},avg_len={p.avg_len},lang={p.language})"

    def encode_documents(self, texts: Sequence[str]) -> list[SparseVector]:
        return [self._convert(self._model.embed_document(t)) for t in texts]

    def encode_query(self, text: str) -> SparseVector:
        return self._convert(self._model.embed_query(text))

    @staticmethod
    def _convert(vector: object) -> SparseVector:
        return SparseVector(indices=list(vector.indices), values=[float(v) for v in vector.values])  # type: ignore[attr-defined]


def token_counts(texts: Sequence[str], language: str = "english") -> list[int]:
    """Each text's length in BM25 tokens (after stopwords and stemming), the ``dl`` BM25 normalises by.

    Qdrant's Bm25 does not expose its tokenizer, so this runs it with b = 0, where a term's weight is
    ``tf·(k1+1)/(tf+k1)``, and inverts that to recover ``tf``; the lengths sum the term counts.
    """
    k1 = 1.2
    model = Bm25(Bm25Config(k=k1, b=0.0, avg_len=1.0, language=language))
    counts = []
    for text in texts:
        weights = model.embed_document(text).values
        counts.append(round(sum(w * k1 / (k1 + 1 - w) for w in weights)))
    return counts
