"""Korean content morphemes for BM25, from mecab-ko with the dictionary that ships in its PyPI wheel.

Korean glues particles and endings to its words (스피커를, 공유하는, 떠요), so neither whitespace nor character
bigrams find a word's other forms: a query's 공유하는 shares no whitespace token with a reply's 공유됩니다, and its
bigrams (공유, 유하, 하는) only partly. A morphological analyser cuts the particle and ending off and gives the
stem (공유, 뜨). Measured on the Korean help-desk threads (docs/notes/korean.md), morphemes alone are about as
good as bigrams for a plain BM25, and the two together are better than either: bigrams still match compounds
and names the dictionary does not know, morphemes match inflected forms.

mecab-ko (``python-mecab-ko``, BSD-3; dictionary ``python-mecab-ko-dic``, Apache-2.0, both wheels) loads in
~0.03 s, holds ~100 MB and tags ~385,000 characters/s on one core. Kiwi (``kiwipiepy``) was measured too: its
tokens are a little cleaner, but it needs ~525 MB and ~2.3 s per process, and with bigrams it scored lower
here (0.531 against 0.542 nDCG@10), so the BM25 encoder, which every reader process loads, uses mecab-ko.
"""

from __future__ import annotations

import re
import threading
from typing import Any

# Content morphemes: common and proper nouns, numerals, roots, verb and adjective stems, Hanja, and the Latin
# words and numbers of mixed-script text (갤럭시 S23, Wi-Fi, USB) as mecab-ko cuts them (S, 23). Particles (J*),
# endings (E*), suffixes (X*), dependent nouns (것, 수), pronouns and symbols carry no topic. The word tokenizer
# reads the Latin words from the text too, so in Korean text they count twice: measured, that helps (product
# names and model numbers are what a help-desk question turns on: 0.542 against 0.527 nDCG@10 without).
CONTENT_TAGS = frozenset({"NNG", "NNP", "NR", "XR", "VV", "VA", "SH", "SL", "SN"})
# Hangul syllables, jamo and compatibility jamo (text/language.py counts them too).
HANGUL = re.compile("[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")

_local = threading.local()


def has_hangul(text: str) -> bool:
    """Whether ``text`` holds a Hangul syllable or jamo."""
    return HANGUL.search(text) is not None


def _tagger() -> Any:
    # One tagger per thread: a MeCab tagger keeps state between calls.
    tagger = getattr(_local, "tagger", None)
    if tagger is None:
        try:
            import mecab  # python-mecab-ko: imported on first use, so English-only processes never load it
        except ImportError as exc:  # a broken install: say which package, not a bare ModuleNotFoundError
            raise RuntimeError(
                "Korean BM25 terms need python-mecab-ko (and python-mecab-ko-dic), which are dependencies of "
                "rag-pipeline: reinstall it"
            ) from exc
        tagger = _local.tagger = mecab.MeCab()
    return tagger


def content_morphemes(text: str) -> list[str]:
    """The content morphemes of ``text``'s Korean, in order, lower-cased; [] for text without Hangul.

    A word mecab-ko tags as a fused form (떠요: ``VV+EF``) contributes the stem of its first part (뜨)."""
    if not has_hangul(text):
        return []
    terms = []
    for morpheme in _tagger().parse(text):
        tags = morpheme.feature.pos or ""
        first = tags.split("+", 1)[0]
        if first not in CONTENT_TAGS:
            continue
        if "+" in tags and morpheme.feature.expression:
            # expression: "뜨/VV/*+ㅓ요/EF/*" — the first part's surface is the stem
            terms.append(morpheme.feature.expression.split("/", 1)[0].lower())
        else:
            terms.append(morpheme.surface.lower())
    return terms
