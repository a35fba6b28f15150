"""The context an answer is written from: the top documents of a search, each as ``### Document N [SOURCE] by
Author (URL)`` with its title and parent text (capped), numbered from 1 so the answer can cite ``[N]``.

Only search results go in, and a search returns only what its reader may read: the prompt can hold nothing
the reader could not have found themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rag_pipeline.retrieval.results import SearchResult

DEFAULT_CONTEXT_DOCUMENTS = 5
DEFAULT_CONTEXT_CHARS = 1500


@dataclass(frozen=True)
class ContextDocument:
    """One numbered document of the context."""

    number: int
    document_id: str
    source: str
    title: str
    url: str | None
    authors: tuple[str, ...]
    text: str

    def header(self) -> str:
        by = f" by {', '.join(self.authors[:3])}" if self.authors else ""
        where = f" ({self.url})" if self.url else ""
        return f"### Document {self.number} [{self.source.upper()}]{by}{where}"

    def as_source(self) -> dict[str, object]:
        """What a response lists for a cited document."""
        return {"number": self.number, "document_id": self.document_id, "title": self.title, "url": self.url,
                "source": self.source}  # fmt: skip


def one_line(text: str) -> str:
    return " ".join(text.replace("#", "").split())


def capped(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip() + " …"


def build_context(
    results: Sequence[SearchResult],
    documents: int = DEFAULT_CONTEXT_DOCUMENTS,
    max_chars: int = DEFAULT_CONTEXT_CHARS,
) -> list[ContextDocument]:
    """The first ``documents`` results, each with its parent text (else its best child) cut at ``max_chars``."""
    out = []
    for number, result in enumerate(results[:documents], start=1):
        body = result.parent_text or result.child_text
        out.append(
            ContextDocument(
                number=number,
                document_id=result.document_id,
                source=result.source,
                title=result.title,
                url=result.url,
                # A name is part of one header line: a line break or a "###" in one could forge a document.
                authors=tuple(one_line(a) for a in result.authors),
                text=capped(body, max_chars),
            )
        )
    return out


def format_context(documents: Sequence[ContextDocument]) -> str:
    """The documents as the prompt shows them."""
    blocks = []
    for doc in documents:
        # A body line that looks like a document header would let a document's author split the context.
        body = doc.text.replace("### Document", "## Document")
        blocks.append(f"{doc.header()}\n{one_line(doc.title)}\n{body}")
    return "\n\n".join(blocks)
