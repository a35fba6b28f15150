"""BM25 sparse vectors: term-frequency saturation weights with stable hashed term ids.

Documents carry ``tf·(k1+1) / (tf + k1·(1 − b + b·dl/avg_len))`` per term; queries carry weight 1
per term; the Qdrant collection applies the IDF modifier at query time, so IDF stays right as
partitions add documents and nothing is ever refit. Tokenization (lowercasing, English stopwords,
Snowball stemming) and term hashing are Qdrant's own ``Bm25`` (from qdrant-edge-py), so index-time
and query-time processing are the same code and match what a Qdrant server would do.

Four tokenizers:

- ``word`` (Qdrant's default) splits on non-word characters, so Japanese or Chinese text, written without
  spaces, becomes a few sentence-long "terms" that no query matches;
- ``multilingual`` (Qdrant's ``Multilingual``) segments Japanese, Chinese and Korean with dictionaries;
- ``cjk-bigram`` rewrites every run of Han, kana or Hangul as its overlapping character bigrams (full-width
  forms folded to their usual width first) and hands the text to the ``word`` tokenizer: the classic CJK
  analysis of Lucene's ``CJKBigramFilter`` and Elasticsearch's ``cjk`` analyzer. Bigrams need no dictionary, so
  a query word matches however a segmenter would have cut the document; measured on the Japanese man pages
  it is far ahead of the dictionary segmentation (docs/notes/own_workspace.md). Text without CJK characters
  passes unchanged, so English gets exactly the ``word`` tokenizer's terms.
- ``ko-morpheme-bigram`` is ``cjk-bigram`` plus the content morphemes of the text's Korean (nouns, roots, verb
  and adjective stems from mecab-ko, :mod:`rag_pipeline.text.korean`): bigrams match compounds and names the
  dictionary lacks, stems match a word's inflected forms (공유하는 / 공유됩니다). On Korean help-desk threads it
  beats both alone (docs/notes/korean.md); text without Hangul gets exactly the ``cjk-bigram`` terms.

The tokenizer is part of :attr:`Bm25Encoder.model_id`, which the index records, so documents and queries are
always encoded alike.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, Field
from qdrant_edge import Bm25, Bm25Config, TokenizerType

from rag_pipeline.sources.registry import registered_sources
from rag_pipeline.text.korean import content_morphemes

Bm25Tokenizer = Literal["word", "multilingual", "cjk-bigram", "ko-morpheme-bigram"]
BM25_TOKENIZERS: tuple[str, ...] = get_args(Bm25Tokenizer)

# Han (with the iteration marks), hiragana, katakana (with the prolonged sound mark, but not the middle dot
# that separates words: ジョン・スミス), half-width katakana and Hangul, including the supplementary Han planes.
_CJK_RUN = re.compile(
    "[\u3005-\u3007\u3040-\u30fa\u30fc-\u30ff\u31f0-\u31ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]+"
)
# Full-width ASCII and half-width katakana: Japanese text mixes both widths of the same letters.
_WIDTH_FORMS = re.compile("[\uff01-\uff5e\uff61-\uff9f]+")


def cjk_bigrams(text: str) -> str:
    """``text`` with each CJK run replaced by its overlapping bigrams, space-separated (a one-character run
    stays itself); other text is unchanged apart from full-width letters and half-width katakana, which are
    folded to their usual width (NFKC) first."""
    text = _WIDTH_FORMS.sub(lambda m: unicodedata.normalize("NFKC", m.group(0)), text)
    return _CJK_RUN.sub(_bigram_run, text)


def contains_cjk(text: str) -> bool:
    """Whether ``text`` has Han, kana or Hangul characters: text the ``word`` tokenizer barely splits."""
    return _CJK_RUN.search(text) is not None


# Chat threads in a CJK index are scored as whole threads (issue 53): every child chunk of a chat thread (a source
# registered with ``retrieval.thread_level_bm25``, Slack) carries
# the BM25 vector of its parent chunk (the thread, up to 2,000 tokens), so a thread is found by all of its words
# however the children cut it. Measured with bm25s on the Chinese KdConv threads: best child 0.295 against whole
# thread 0.315 nDCG@10, and no k1/b or aggregation of children closed the gap (docs/notes/korean.md). English
# indexes keep child-level vectors (their figures were tuned on them).
THREAD_LEVEL_TOKENIZERS = frozenset({"cjk-bigram", "ko-morpheme-bigram", "multilingual"})
# The length prior of thread vectors, in BM25 tokens: the mean thread (parent chunk) of the two CJK chat sets
# measured, 378 (Chinese KdConv) and 315 (Korean help desk). Children's 256 would penalize every thread as long.
THREAD_AVG_LEN = 350.0


def thread_level_sources() -> frozenset[str]:
    """The registered chat sources whose threads BM25 scores whole in a CJK index."""
    return frozenset(name for name, source in registered_sources().items() if source.retrieval.thread_level_bm25)


def scores_whole_threads(tokenizer: str, source: str) -> bool:
    """Whether ``source``'s child chunks carry their thread's BM25 vector in an index with this tokenizer."""
    return tokenizer in THREAD_LEVEL_TOKENIZERS and source in thread_level_sources()


# A stray Japanese word in an English workspace is no reason to re-index; a share of CJK chunks this size is.
CJK_ADVICE_SHARE = 0.01


def cjk_tokenizer_advice(tokenizer: str, cjk_chunks: int, chunks: int, source: str) -> str | None:
    """The warning for a ``word``-tokenized index that holds a noticeable share of CJK chunks, else None."""
    if tokenizer != "word" or not cjk_chunks or cjk_chunks < CJK_ADVICE_SHARE * chunks:
        return None
    return (
        f"{cjk_chunks} of {chunks} {source} child chunks contain Japanese, Chinese or Korean text, which the word "
        "tokenizer leaves almost unsearchable in BM25: index them into a new data folder with "
        "RAG_BM25_TOKENIZER=cjk-bigram"
    )


def _bigram_run(match: re.Match[str]) -> str:
    run = match.group(0)
    if len(run) == 1:
        return f" {run} "
    return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "


def _identity(text: str) -> str:
    return text


def korean_terms(text: str) -> str:
    """``text`` as :func:`cjk_bigrams` writes it, followed by its Korean content morphemes (none without Hangul)."""
    morphemes = content_morphemes(text)
    bigrams = cjk_bigrams(text)
    return f"{bigrams} {' '.join(morphemes)}" if morphemes else bigrams


_TOKENIZERS: dict[str, tuple[TokenizerType, Callable[[str], str]]] = {
    "word": (TokenizerType.Word, _identity),
    "multilingual": (TokenizerType.Multilingual, _identity),
    "cjk-bigram": (TokenizerType.Word, cjk_bigrams),
    "ko-morpheme-bigram": (TokenizerType.Word, korean_terms),
}


# Tokenizers whose queries weigh a term by how often the prepared query holds it, as classic BM25 does with an
# unbounded k3, instead of Qdrant's weight 1 per distinct term: a Korean word is both a bigram and a morpheme, so
# counting it twice weighs the query's real words over the bigrams that straddle two of them (measured with
# bm25s: 0.542 against 0.505 nDCG@10 on the Korean help-desk threads, docs/notes/korean.md).
_QUERY_TF_TOKENIZERS = frozenset({"ko-morpheme-bigram"})


class Bm25Params(BaseModel):
    """BM25 parameters. ``avg_len`` is a fixed prior (in tokens), not a corpus statistic."""

    k1: float = Field(1.2, ge=0)
    b: float = Field(0.75, ge=0, le=1)
    avg_len: float = Field(256.0, gt=0)
    language: str = "english"  # stopwords and stemmer of Latin-script words
    tokenizer: Bm25Tokenizer = "word"


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
        self._tokenizer, self._prepare = _TOKENIZERS[p.tokenizer]
        self._model = Bm25(Bm25Config(k=p.k1, b=p.b, avg_len=p.avg_len, language=p.language, tokenizer=self._tokenizer))
        self._counting: dict[int, Bm25] = {}

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

    @classmethod
    def for_terms(cls, terms_id: str) -> Bm25Encoder:
        """An encoder (default weights) making the terms ``terms_id`` names: the inverse of :attr:`terms_id`.
        Raises ValueError for a tokenizer this code does not know."""
        tokenizer, _, language = terms_id.partition("/")
        return cls(Bm25Params.model_validate({"tokenizer": tokenizer, "language": language}))

    def encode_documents(self, texts: Sequence[str]) -> list[SparseVector]:
        return [self._convert(self._model.embed_document(self._prepare(t))) for t in texts]

    def encode_query(self, text: str) -> SparseVector:
        if self.params.tokenizer in _QUERY_TF_TOKENIZERS:
            counts = self.term_counts(text)
            return SparseVector(indices=list(counts), values=list(counts.values()))
        return self._convert(self._model.embed_query(self._prepare(text)))

    def term_counts(self, text: str, min_token_len: int = 0) -> dict[int, float]:
        """Term id → how often the term occurs in ``text`` (after stopwords and stemming): what a weighted
        query needs and Qdrant's ``embed_query`` (weight 1 per distinct term) does not give. ``min_token_len``
        drops tokens of fewer characters (Qdrant's own filter, so the ids of the others are unchanged)."""
        counting = self._counting.get(min_token_len)
        if counting is None:
            p = self.params
            config = Bm25Config(
                k=_K1,
                b=0.0,
                avg_len=1.0,
                language=p.language,
                tokenizer=self._tokenizer,
                min_token_len=min_token_len or None,
            )
            counting = self._counting[min_token_len] = Bm25(config)
        vector = counting.embed_document(self._prepare(text))
        return {int(i): _tf(float(w)) for i, w in zip(vector.indices, vector.values, strict=True)}

    def content_term_counts(self, text: str, min_len: int = 3, min_cjk_len: int = 2) -> dict[int, float]:
        """The part of :meth:`term_counts` whose tokens are long enough to carry meaning: at least ``min_len``
        characters, or ``min_cjk_len`` in Han, kana or Hangul runs (a CJK bigram is two characters). Every id
        is one :meth:`term_counts` gives for the whole text, so each is a term the index holds for it."""
        whole = self.term_counts(text)
        cjk = " ".join(_CJK_RUN.findall(text))
        rest = _CJK_RUN.sub(" ", text)
        kept = {**self.term_counts(rest, min_len), **(self.term_counts(cjk, min_cjk_len) if cjk else {})}
        # A token that ran across a script boundary ("Linuxの") is one term of the whole text and none of the
        # parts: only ids of the whole text stay, with its counts.
        return {term: whole[term] for term in kept if term in whole}

    @staticmethod
    def _convert(vector: object) -> SparseVector:
        return SparseVector(indices=list(vector.indices), values=[float(v) for v in vector.values])  # type: ignore[attr-defined]


def token_counts(texts: Sequence[str], language: str = "english", tokenizer: Bm25Tokenizer = "word") -> list[int]:
    """Each text's length in BM25 tokens (after stopwords and stemming), the ``dl`` BM25 normalises by.

    Qdrant's Bm25 does not expose its tokenizer, so this runs it with b = 0, where a term's weight is
    ``tf·(k1+1)/(tf+k1)``, and inverts that to recover ``tf``; the lengths sum the term counts.
    """
    encoder = Bm25Encoder(Bm25Params(language=language, tokenizer=tokenizer))
    return [round(sum(encoder.term_counts(text).values())) for text in texts]


_K1 = 1.2  # of the counting model: with b = 0 a term's weight is tf·(k1+1)/(tf+k1)


def _tf(weight: float) -> float:
    return weight * _K1 / (_K1 + 1 - weight)
