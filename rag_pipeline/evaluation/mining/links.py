"""The links miner: a document that names another (an issue key, a permalink, a page address) asked about it.

The query is the asking document's own question (its source's ``query_text``: a Jira issue's summary and
description, a thread, a page) with every reference cut out, so the answer cannot be found by the key alone; the
relevant documents are the ones it names; the query document and its family are left out of the results. Works
across sources (a Slack thread naming a Jira issue, a page linking a runbook) without naming any: each source says
how its documents are named (:class:`~rag_pipeline.sources.registry.MiningFacts`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from rag_pipeline.evaluation.mining.corpus import Corpus
from rag_pipeline.evaluation.mining.model import Candidate, MinerScope, Skipped

# A query is at most this many characters of the asking document (a long page is not one question, and a query's
# cost grows with its terms).
MAX_QUERY_CHARS = 1500
# Fewer words than this left after the references are cut: nothing to search with.
MIN_QUERY_WORDS = 3
_URL = re.compile(r"<?https?://[^\s<>|\]]+>?")
_SPACES = re.compile(r"[ \t]+")
_BLANK_LINES = re.compile(r"\n\s*\n+")


def question_text(corpus: Corpus, record: Mapping[str, Any]) -> str:
    """The part of a document that asks (its source's ``query_text``; the whole text otherwise)."""
    facts = corpus.facts.get(str(record["source"]))
    if facts is not None and facts.query_text is not None:
        return facts.query_text(record)
    return str(record.get("text") or "")


def without_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the spans cut out, and any address that held one removed whole."""
    kept, position = [], 0
    for start, end in sorted(spans):
        # The whole address a key sat in goes with it (jira.acme.com/browse/AC-12 must not leave "jira.acme.com").
        for url in _URL.finditer(text, max(0, start - 200), min(len(text), end + 200)):
            if url.start() <= start and end <= url.end():
                start, end = url.start(), url.end()
                break
        if start >= position:
            kept.append(text[position:start])
            position = end
        else:
            position = max(position, end)
    kept.append(text[position:])
    return _BLANK_LINES.sub("\n", _SPACES.sub(" ", "".join(kept))).strip()


def clipped(text: str, limit: int = MAX_QUERY_CHARS) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return cut[:space] if space > limit // 2 else cut


def author_of(corpus: Corpus, record: Mapping[str, Any]) -> str | None:
    facts = corpus.facts.get(str(record["source"]))
    return facts.author_account(record) if facts is not None and facts.author_account is not None else None


class LinksMiner:
    """Documents that name other documents, within and across sources."""

    name = "links"
    scope = MinerScope(
        description="A document that names another by issue key, permalink or page address: its question (the "
        "reference cut out) -> the documents it names; the asking document and its family are left out of results.",
        tags=("links",),
    )

    def mine(self, corpus: Corpus) -> Iterator[Candidate | Skipped]:
        for record in corpus.records():
            doc_id = str(record["document_id"])
            info = corpus.info(doc_id)
            if info is None or info.belongs_to:
                continue  # a restricted part repeats its head's question
            asked = question_text(corpus, record)
            references = corpus.references_in(asked)
            if not references:
                continue
            own = {doc_id, *info.family}
            targets: dict[str, int] = {}
            unresolved = 0
            for _start, _end, handle in references:
                target = corpus.resolve(handle)
                if target is None:
                    unresolved += 1
                elif target not in own:
                    targets[target] = 1
            if not targets:
                if unresolved:
                    yield Skipped(self.name, doc_id, "names no stored document (deleted, or a key that is not one)")
                continue  # only its own key or address (a Jira issue's title line names itself)
            query = clipped(without_spans(asked, [(s, e) for s, e, _h in references]))
            if len(query.split()) < MIN_QUERY_WORDS:
                yield Skipped(self.name, doc_id, "too few words left once the references are cut")
                continue
            yield Candidate(self.name, doc_id, query, targets, author_of(corpus, record), exclude=tuple(sorted(own)))
