"""Which language family a data folder's index is built for, chosen from the data when nobody said.

Two settings decide how well Japanese, Chinese or Korean text can be found: the BM25 tokenizer (``word``
leaves a CJK sentence as one unsearchable token; ``cjk-bigram`` indexes its character bigrams) and the dense
model (all-MiniLM-L6-v2 was trained on English; multilingual-e5-small on a hundred languages). A user who
indexes a Japanese workspace without knowing this used to get BM25 0.265 / vector 0.186 nDCG@10 instead of
0.358 / 0.536 (issue 38). So the first index of a data folder samples the documents it is about to write and
picks the CJK pair when enough of them are CJK; the choice is recorded in the data folder and kept by every
later run, because the index's vectors and terms can only be searched with the models that wrote them.

``cjk-bigram`` treats text without CJK characters exactly as ``word`` does, so a mixed workspace loses nothing
on its English documents' BM25 by going CJK; its dense side trades MiniLM for the multilingual model.

Korean is its own choice (issue 53): when most CJK documents of the sample are Korean, BM25 adds Korean stems to
the bigrams (``ko-morpheme-bigram``), which beat bigrams alone on Korean chat threads (docs/notes/korean.md).
Japanese and Chinese keep ``cjk-bigram``, which won for them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, cast

from rag_pipeline.env_values import SettingsError
from rag_pipeline.text.korean import HANGUL

Language = Literal["english", "cjk", "korean"]
LanguageSetting = Literal["auto", "english", "cjk", "korean"]
LANGUAGE_SETTINGS: tuple[LanguageSetting, ...] = ("auto", "english", "cjk", "korean")
CJK_LANGUAGES: frozenset[str] = frozenset({"cjk", "korean"})

# language -> (dense model, BM25 tokenizer)
MODELS: dict[Language, tuple[str, str]] = {
    "english": ("all-MiniLM-L6-v2", "word"),
    "cjk": ("multilingual-e5-small", "cjk-bigram"),
    "korean": ("multilingual-e5-small", "ko-morpheme-bigram"),
}

# Han, Hiragana, Katakana (and half-width), Hangul syllables and jamo, CJK punctuation excluded.
_CJK_CHAR = re.compile(
    "[\u3040-\u30ff\u31f0-\u31ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Han
    "\uff66-\uff9f"  # half-width Katakana
    "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]"  # Hangul syllables and jamo
)
_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)
# A document is CJK when this share of its letters are CJK characters: a Japanese message quoting an English
# error line stays Japanese; an English thread with one Japanese name does not become Japanese.
CJK_LETTER_SHARE = 0.2
# The folder goes CJK when this share of the sampled documents are CJK (measured in docs/notes/language_choice.md:
# the bundled English Slack and Jira data hold 0.0-0.1 % CJK documents, the Japanese and Korean man pages
# 96-100 %). Low on purpose: with a few percent of CJK documents, the word tokenizer already loses them.
CJK_DOCUMENT_SHARE = 0.05
SAMPLE_SIZE = 2000
# A CJK folder is Korean when at least this share of its CJK documents are mostly Hangul: Korean text holds a few
# Han characters at most, Japanese and Chinese none (and a Korean-Japanese mix is best served by bigrams).
KOREAN_SHARE = 0.5


def is_cjk_text(text: str) -> bool:
    """At least :data:`CJK_LETTER_SHARE` of the text's letters are CJK characters."""
    letters = len(_LETTER.findall(text))
    return letters > 0 and len(_CJK_CHAR.findall(text)) >= CJK_LETTER_SHARE * letters


@dataclass(frozen=True)
class LanguageChoice:
    """The language an index is built for, its two models, and how it was decided."""

    language: Language
    dense_model: str
    bm25_tokenizer: str
    decided_by: str  # "sample", "setting" (RAG_LANGUAGE / --language) or "existing index"
    sampled: int = 0
    cjk_documents: int = 0
    decided_at: str = ""

    def describe(self) -> str:
        """One line for a summary."""
        how = {
            "sample": f"chosen from the data: {self.cjk_documents} of {self.sampled} sampled documents are CJK",
            "setting": "set by RAG_LANGUAGE / --language",
            "existing index": "kept from the index already in this data folder",
        }.get(self.decided_by, self.decided_by)
        return f"{self.language} (dense {self.dense_model}, BM25 {self.bm25_tokenizer}; {how})"


def is_korean_text(text: str) -> bool:
    """At least half of the text's CJK characters are Hangul."""
    cjk = len(_CJK_CHAR.findall(text))
    return cjk > 0 and len(HANGUL.findall(text)) * 2 >= cjk


def choose_language(texts: Sequence[str], sample: int = SAMPLE_SIZE) -> LanguageChoice:
    """The language of the documents about to be indexed, from an evenly spaced sample of at most ``sample``."""
    count = min(len(texts), sample) if sample > 0 else len(texts)
    sampled = [texts[i * len(texts) // count] for i in range(count)]
    cjk_texts = [t for t in sampled if is_cjk_text(t)]
    cjk = len(cjk_texts)
    language: Language = "english"
    if sampled and cjk >= CJK_DOCUMENT_SHARE * len(sampled):
        korean = sum(is_korean_text(t) for t in cjk_texts)
        language = "korean" if korean >= KOREAN_SHARE * cjk else "cjk"
    return chosen(language, "sample", sampled=len(sampled), cjk_documents=cjk)


def chosen(language: Language, decided_by: str, **counts: int) -> LanguageChoice:
    dense, tokenizer = MODELS[language]
    return LanguageChoice(
        language, dense, tokenizer, decided_by, decided_at=datetime.now(UTC).isoformat(timespec="seconds"), **counts
    )


def language_of_models(dense_model: str, bm25_tokenizer: str) -> Language:
    """The language an index written with these models is for (an index built before the choice existed)."""
    if bm25_tokenizer == MODELS["korean"][1]:
        return "korean"
    return "cjk" if bm25_tokenizer != "word" or dense_model == MODELS["cjk"][0] else "english"


def read_choice(path: Path) -> LanguageChoice | None:
    """The choice recorded in ``path``; None when there is none. A damaged file is an error naming it."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["language"] = cast(Language, data["language"])
        if data["language"] not in MODELS:
            raise ValueError(f"unknown language {data['language']!r}")
        return LanguageChoice(**data)
    except (ValueError, KeyError, TypeError) as exc:
        raise SettingsError(f"{path} does not hold a language choice ({exc}): delete it to choose again") from exc


def record_choice(path: Path, choice: LanguageChoice) -> None:
    """Written whole, then renamed, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(f".{os.getpid()}.tmp")
    temp.write_text(json.dumps(asdict(choice), indent=2) + "\n", encoding="utf-8")
    temp.replace(path)


def record_first_choice(path: Path, choice: LanguageChoice) -> LanguageChoice:
    """Record ``choice`` unless a choice is already recorded, and return the one in force: two runs deciding
    at once (a sensor launching many partitions of a new folder) agree on whichever was written first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(f".{os.getpid()}.tmp")
    temp.write_text(json.dumps(asdict(choice), indent=2) + "\n", encoding="utf-8")
    try:
        os.link(temp, path)  # fails when the file exists: the first writer wins
    except FileExistsError:
        pass
    finally:
        temp.unlink(missing_ok=True)
    found = read_choice(path)
    assert found is not None
    return found
