"""What the eval-set miners know of Slack: a thread's permalink as other documents paste it, who asked the thread's
question, and the thread miner (the question as the query, the thread found from its replies)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rag_pipeline.connectors.source_facts import metadata_account
from rag_pipeline.evaluation.mining.corpus import Corpus
from rag_pipeline.evaluation.mining.links import MIN_QUERY_WORDS, clipped
from rag_pipeline.evaluation.mining.model import Candidate, MinerScope, Skipped

SOURCE = "slack"
# https://acme.slack.com/archives/C0123/p1700000000000100 (a message), ?thread_ts=1700000000.000100 (its thread)
_PERMALINK = re.compile(
    r"https?://[A-Za-z0-9.-]+/archives/([CGD][A-Z0-9]{2,})/p(\d{10})(\d{6})(?:\?[^\s<>|]*?thread_ts=(\d{10}\.\d{6}))?"
)


def thread_handle(channel: str, thread_ts: str) -> str:
    return f"slack-thread:{channel}:{thread_ts}"


def handles(record: Mapping[str, Any]) -> Sequence[str]:
    """A thread is named by its root's permalink (a reply's permalink carries the thread's ts as ``thread_ts``)."""
    thread_ts = record["metadata"].get("thread_ts")
    return [thread_handle(str(record["container"]), str(thread_ts))] if thread_ts else []


def references(text: str) -> Sequence[tuple[int, int, str]]:
    found = []
    for match in _PERMALINK.finditer(text):
        channel, seconds, micros, thread_ts = match.groups()
        found.append((match.start(), match.end(), thread_handle(channel, thread_ts or f"{seconds}.{micros}")))
    return found


def author_account(record: Mapping[str, Any]) -> str | None:
    """The user who opened the thread (none where its root was deleted)."""
    return metadata_account(record, SOURCE, "root_user")


class ThreadMiner:
    """A thread's first message asks; the thread, found from its replies, answers.

    The question is in the thread's own text, so its search leaves out every child chunk that holds the question
    (``Candidate.mask_chars``): the thread must be found by the replies alone, without indexing anything again. The
    first child also carries the thread's title vector (the title repeats the question), so that goes too."""

    name = "threads"
    # Scoped to Slack as the bundled chat sets are (the search then fuses with Slack's learned RRF): a thread's
    # question is asked of the chat it was asked in, and the figures compare with the bundled sets'.
    scope = MinerScope(
        sources=(SOURCE,),
        description="Chat threads: the opening message is the query, the thread is the one relevant document, found "
        "from its replies (the question's chunks left out of the scored search, or, where BM25 scores threads "
        "whole, a copy of the thread without its question judged instead).",
        tags=("chat", "known-item"),
    )

    def mine(self, corpus: Corpus) -> Iterator[Candidate | Skipped]:
        for record in corpus.records(sources=[SOURCE]):
            metadata = record["metadata"]
            doc_id = str(record["document_id"])
            if int(metadata.get("message_count") or 0) < 2:
                continue  # a message nobody answered
            span = metadata.get("root_span")
            if not span:
                yield Skipped(self.name, doc_id, "the thread's question is not in the stored text (root deleted)")
                continue
            start, end = int(span[0]), int(span[1])
            question = clipped(str(record.get("text") or "")[start:end].strip())
            if len(question.split()) < MIN_QUERY_WORDS and len(question) < 12:
                yield Skipped(self.name, doc_id, "the question is too short to search with")
                continue
            yield Candidate(self.name, doc_id, question, {doc_id: 1}, author_account(record), mask_chars=end)


def thread_miner() -> ThreadMiner:
    return ThreadMiner()
