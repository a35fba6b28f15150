"""Citations in an answer: ``[1]``, ``[1, 3]``, ``[2][4]``; numbers the context does not hold are dropped from the
sources (and counted), never resolved to some other document."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_CITATION = re.compile(r"\[(\s*\d{1,3}(?:\s*,\s*\d{1,3})*\s*)\]")


@dataclass(frozen=True)
class Citations:
    """The numbers an answer cites, in order of first citation: those in the context and the invented ones."""

    valid: tuple[int, ...]
    invalid: tuple[int, ...]


def parse_citations(answer: str, numbers: Iterable[int]) -> Citations:
    """Every ``[N]`` of ``answer`` checked against the context's document ``numbers``."""
    known = set(numbers)
    seen: dict[int, None] = {}
    for match in _CITATION.finditer(answer):
        for part in match.group(1).split(","):
            seen.setdefault(int(part), None)
    return Citations(tuple(n for n in seen if n in known), tuple(n for n in seen if n not in known))
