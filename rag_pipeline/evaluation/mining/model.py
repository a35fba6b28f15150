"""What a miner yields: a candidate query (its text, the documents it judges relevant, what its search must leave
out, who asked) or a skipped candidate with the reason, so the asset's metadata says what was left out and why."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from rag_pipeline.evaluation.mining.corpus import Corpus


@dataclass(frozen=True)
class Candidate:
    """One mined query before its author, access and sample are checked.

    ``relevant`` maps document ids to grades (2: the same question, 1: related). ``exclude`` names documents (the
    query's own document, its family) and, for a chat thread, nothing yet: ``mask_chars`` asks the miner's caller to
    leave out of the scored search every child chunk that holds the first ``mask_chars`` characters of the query
    document (the question itself), which needs the index's chunk spans."""

    miner: str
    document_id: str
    query: str
    relevant: Mapping[str, int]
    author: str | None
    exclude: tuple[str, ...] = ()
    mask_chars: int = 0
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skipped:
    """A candidate a miner (or the checks after it) left out, and why (one short phrase per kind of reason)."""

    miner: str
    document_id: str
    reason: str


@dataclass(frozen=True)
class MinerScope:
    """Which sources a miner's queries search (None: every document source, as a reader's search does)."""

    sources: tuple[str, ...] | None = None
    description: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)


class Miner(Protocol):
    """A source of mined queries: a name (``--miners``), the scope its queries search, and the candidates."""

    name: str
    scope: MinerScope

    def mine(self, corpus: Corpus) -> Iterator[Candidate | Skipped]: ...
