"""BM25 sparse vectors: term-frequency saturation weights with stable hashed term ids.

Documents carry ``tf·(k1+1) / (tf + k1·(1 − b + b·dl/avg_len))`` per term; queries carry weight 1
per term; the Qdrant collection applies the IDF modifier at query time, so IDF stays right as
partitions add documents and nothing is ever refit. Tokenization (lowercasing, English stopwords,
Snowball stemming) and term hashing are Qdrant's own ``Bm25`` (from qdrant-edge-py), so index-time
and query-time processing are the same code and match what a Qdrant server would do.

Two tokenizers: ``word`` (Qdrant's default; splits on non-word characters, so Japanese or Chinese text,
written without spaces, becomes a few sentence-long "terms" that no query matches) and ``multilingual``
(Qdrant's ``Multilingual``: dictionary segmentation of Japanese, Chinese and Korean, words elsewhere). The
tokenizer is part of :attr:`Bm25Encoder.model_id`, which the index records, so documents and queries are
always encoded alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field
from qdrant_edge import Bm25, Bm25Config, TokenizerType

_TOKENIZERS = {"word": TokenizerType.Word, "multilingual": TokenizerType.Multilingual}


class Bm25Params(BaseModel):
    """BM25 parameters. ``avg_len`` is a fixed prior (in tokens), not a corpus statistic."""

    k1: float = Field(1.2, ge=0)
    b: float = Field(0.75, ge=0, le=1)
    avg_len: float = Field(256.0, gt=0)
    language: str = "english"  # stopwords and stemmer of Latin-script words
    tokenizer: Literal["word", "multilingual"] = "word"


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
        self._model = Bm25(
            Bm25Config(k=p.k1, b=p.b, avg_len=p.avg_len, language=p.language, tokenizer=_TOKENIZERS[p.tokenizer])
        )
        self._counting: Bm25 | None = None

    @property
    def model_id(self) -> str:
        p = self.params
        tokenizer = "" if p.tokenizer == "word" else f",tokenizer={p.tokenizer}"  # word: the ids indexes already hold
        return f"qdrant-bm25(k1={p.k1},b={p.b},avg_len={p.avg_len},lang={p.language}{tokenizer})"

    @property
    def terms_id(self) -> str:
        """What decides the term ids (tokenizer and stemming language): documents and queries must agree on it;
        k1, b and avg_len only change document weights."""
        return f"{self.params.tokenizer}/{self.params.language}"

    def encode_documents(self, texts: Sequence[str]) -> list[SparseVector]:
        return [self._convert(self._model.embed_document(t)) for t in texts]

    def encode_query(self, text: str) -> SparseVector:
        return self._convert(self._model.embed_query(text))

    def term_counts(self, text: str) -> dict[int, float]:
        """Term id → how often the term occurs in ``text`` (after stopwords and stemming): what a weighted
        query needs and Qdrant's ``embed_query`` (weight 1 per distinct term) does not give."""
        if self._counting is None:
            p = self.params
            self._counting = Bm25(
                Bm25Config(k=_K1, b=0.0, avg_len=1.0, language=p.language, tokenizer=_TOKENIZERS[p.tokenizer])
            )
        vector = self._counting.embed_document(text)
        return {int(i): _tf(float(w)) for i, w in zip(vector.indices, vector.values, strict=True)}

    @staticmethod
    def _convert(vector: object) -> SparseVector:
        return SparseVector(indices=list(vector.indices), values=[float(v) for v in vector.values])  # type: ignore[attr-defined]


def token_counts(texts: Sequence[str], language: str = "english", tokenizer: str = "word") -> list[int]:
    """Each text's length in BM25 tokens (after stopwords and stemming), the ``dl`` BM25 normalises by.

    Qdrant's Bm25 does not expose its tokenizer, so this runs it with b = 0, where a term's weight is
    ``tf·(k1+1)/(tf+k1)``, and inverts that to recover ``tf``; the lengths sum the term counts.
    """
    encoder = Bm25Encoder(Bm25Params(language=language, tokenizer=tokenizer))
    return [round(sum(encoder.term_counts(text).values())) for text in texts]


_K1 = 1.2  # of the counting model: with b = 0 a term's weight is tf·(k1+1)/(tf+k1)


def _tf(weight: float) -> float:
    return weight * _K1 / (_K1 + 1 - weight)
