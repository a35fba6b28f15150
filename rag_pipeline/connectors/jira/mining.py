"""What the eval-set miners know of Jira: an issue's key as other documents write it, its reporter, its question
(summary and description, without comments), and the typed-links miner (duplicates grade 2; relates, causes and
clones grade 1), built as the bundled Jira eval set was so the two can be compared."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rag_pipeline.connectors.source_facts import metadata_account, metadata_handles
from rag_pipeline.evaluation.mining.corpus import Corpus
from rag_pipeline.evaluation.mining.links import MIN_QUERY_WORDS, clipped, question_text
from rag_pipeline.evaluation.mining.model import Candidate, MinerScope, Skipped

SOURCE = "jira"
_KEY = re.compile(r"(?<![A-Za-z0-9_-])([A-Z][A-Z0-9_]{0,9}-[1-9][0-9]{0,6})(?![A-Za-z0-9_]|-[A-Za-z0-9])")
_COMMENTS = "\n\nComments:\n"
# Link relations (both directions) and the grade they give the linked issue.
GRADES = {
    "duplicates": 2,
    "is duplicated by": 2,
    "relates to": 1,
    "causes": 1,
    "is caused by": 1,
    "clones": 1,
    "is cloned by": 1,
}


def key_handle(key: str) -> str:
    return f"jira-key:{key}"


def handles(record: Mapping[str, Any]) -> Sequence[str]:
    return metadata_handles(record, "key", key_handle)


def references(text: str) -> Sequence[tuple[int, int, str]]:
    """Every issue-key-shaped word (an address ``…/browse/AC-12`` included); keys no stored issue has resolve to
    nothing, so ``UTF-8`` names no document."""
    return [(m.start(1), m.end(1), key_handle(m.group(1))) for m in _KEY.finditer(text)]


def author_account(record: Mapping[str, Any]) -> str | None:
    return metadata_account(record, SOURCE, "reporter_account")


def query_text(record: Mapping[str, Any]) -> str:
    """Summary and description (the text before its comments), without the ``KEY: `` the title line starts with."""
    text = str(record.get("text") or "").split(_COMMENTS, 1)[0]
    key = record["metadata"].get("key")
    if key and text.startswith(f"{key}: "):
        text = text[len(key) + 2 :]
    return text


class IssueLinksMiner:
    """An issue linked to others: its summary and description -> the linked issues, graded by the link's type."""

    name = "jira_links"
    scope = MinerScope(
        sources=(SOURCE,),
        description="Jira issue links: the linking issue's summary and description -> the issues it duplicates or "
        "is duplicated by (grade 2), relates to, causes or clones (grade 1); the query issue is left out of results.",
        tags=("jira", "duplicates"),
    )

    def mine(self, corpus: Corpus) -> Iterator[Candidate | Skipped]:
        for record in corpus.records(sources=[SOURCE]):
            links = record["metadata"].get("links") or []
            doc_id = str(record["document_id"])
            info = corpus.info(doc_id)
            if not links or info is None or info.belongs_to:
                continue
            relevant: dict[str, int] = {}
            missing = 0
            for link in links:
                grade = GRADES.get(str(link.get("relation") or "").lower())
                if grade is None or not link.get("key"):
                    continue
                target = corpus.resolve(key_handle(str(link["key"])))
                if target is None:
                    missing += 1
                elif target != doc_id:
                    relevant[target] = max(grade, relevant.get(target, 0))
            if not relevant:
                if missing:
                    yield Skipped(self.name, doc_id, "linked issues not stored (deleted or in another project)")
                continue
            query = clipped(question_text(corpus, record).strip())
            if len(query.split()) < MIN_QUERY_WORDS:
                yield Skipped(self.name, doc_id, "too few words in summary and description")
                continue
            own = (doc_id, *info.family)
            yield Candidate(self.name, doc_id, query, relevant, author_account(record), exclude=own)


def issue_links_miner() -> IssueLinksMiner:
    return IssueLinksMiner()
