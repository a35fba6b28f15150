"""Mine a workspace's eval sets: every miner's candidates, checked (the author known and allowed to read what is
judged relevant, the question masked where it sits in its own answer), labelled (miner, source, language, week) and
sampled (a cap per source and miner, spread over the weeks), as one eval set per miner in the project's format."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta
from rag_pipeline.evaluation.mining.copies import COPY_TAG, copy_group, is_copy, masked_copy
from rag_pipeline.evaluation.mining.corpus import Corpus
from rag_pipeline.evaluation.mining.links import LinksMiner
from rag_pipeline.evaluation.mining.model import Candidate, Miner, Skipped
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.scheduling.coverage import week_start
from rag_pipeline.sources.document import Document
from rag_pipeline.sources.registry import load_object
from rag_pipeline.text.language import is_cjk_text, is_korean_text
from rag_pipeline.text.tokens import cl100k

# Queries kept per (source, miner) unless the caller says otherwise: a 500-channel workspace evaluates in minutes.
DEFAULT_MAX_QUERIES = 1000
MINED_PREFIX = "mined_"
MINED_TAG = "mined"

ResolvePerson = Callable[[str], Principal | None]
# Who a mined query runs as: its author (the default: relevance and leaks as that person), or everyone (the
# all-documents evaluation principal) where the directory cannot say what anyone reads (an offline dump without a
# directory file names people but no memberships). Such sets are tagged ``as:everyone`` and count no leaks.
RUN_AS = ("authors", "everyone")


def available_miners(corpus: Corpus) -> dict[str, Miner]:
    """The shared links miner and every registered source's own miners, by name."""
    miners: dict[str, Miner] = {"links": LinksMiner()}
    for facts in corpus.facts.values():
        for reference in facts.miners:
            miner = load_object(reference)()
            miners[miner.name] = miner
    return miners


def language_of(text: str) -> str:
    """``ko``, ``ja``, ``zh`` or ``latin``: what a query is labelled with (``lang:ko``)."""
    if is_korean_text(text):
        return "ko"
    if is_cjk_text(text):
        return "ja" if any("\u3040" <= ch <= "\u30ff" for ch in text) else "zh"
    return "latin"


@dataclass
class MiningReport:
    """What mining found: the eval sets, and per miner what was kept, skipped (by reason) and why."""

    eval_sets: dict[str, tuple[EvalSetMeta, list[EvalQuery]]] = field(default_factory=dict)
    found: Counter[tuple[str, str]] = field(default_factory=Counter)  # (miner, source) -> candidates that passed
    kept: Counter[tuple[str, str]] = field(default_factory=Counter)  # (miner, source) -> in the sample
    skipped: Counter[tuple[str, str]] = field(default_factory=Counter)  # (miner, reason) -> candidates
    languages: Counter[str] = field(default_factory=Counter)
    documents: int = 0
    # Threads whose question could not be masked by chunks (whole-thread BM25): copies to write (copies.py).
    masked_copies: list[Document] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """JSON-ready counts (the asset's metadata and ``evaluate --json``)."""
        return {
            "documents": self.documents,
            "queries": {name: len(queries) for name, (_meta, queries) in self.eval_sets.items()},
            "kept": {f"{m}/{s}": n for (m, s), n in sorted(self.kept.items())},
            "found": {f"{m}/{s}": n for (m, s), n in sorted(self.found.items())},
            "skipped": {f"{m}: {r}": n for (m, r), n in sorted(self.skipped.items())},
            "languages": dict(self.languages),
        }

    def examples(self, per_set: int = 3) -> dict[str, list[dict[str, Any]]]:
        """A few queries of each set, shortened, for the UI and the command's output."""
        out: dict[str, list[dict[str, object]]] = {}
        for name, (_meta, queries) in self.eval_sets.items():
            out[name] = [
                {"query": q.query[:160], "relevant": sorted(q.relevant), "tags": q.tags} for q in queries[:per_set]
            ]
        return out


def _masked_children(
    corpus: Corpus, candidates: Sequence[Candidate], records: dict[str, dict[str, Any]]
) -> dict[str, list[str] | None]:
    """Per masked candidate, the child chunks holding its question (None: every child does, nothing to find it by)."""
    spans = corpus.child_spans(c.document_id for c in candidates)
    out: dict[str, list[str] | None] = {}
    encoding = cl100k()
    for candidate in candidates:
        children = spans.get(candidate.document_id, [])
        text = str(records.get(candidate.document_id, {}).get("text") or "")
        question_tokens = len(encoding.encode(text[: candidate.mask_chars], disallowed_special=()))
        masked = [chunk for chunk, start, _parent in children if start < question_tokens]
        out[candidate.document_id] = None if not children or len(masked) == len(children) else masked
    return out


def _spread(candidates: list[Candidate], weeks: dict[str, date], cap: int, seed: str) -> list[Candidate]:
    """At most ``cap`` candidates, spread over the weeks: a seeded order within each week, weeks taken in turn."""
    if len(candidates) <= cap:
        return candidates
    by_week: dict[date, list[Candidate]] = defaultdict(list)
    for c in candidates:
        by_week[weeks[c.document_id]].append(c)
    for items in by_week.values():
        items.sort(key=lambda c: hashlib.sha256(f"{seed}\x1f{c.document_id}".encode()).hexdigest())
    chosen: list[Candidate] = []
    queues = [by_week[w] for w in sorted(by_week)]
    while len(chosen) < cap:
        for queue in queues:
            if queue and len(chosen) < cap:
                chosen.append(queue.pop(0))
        queues = [q for q in queues if q]
    return chosen


def mine_workspace(
    corpus: Corpus,
    resolve_person: ResolvePerson,
    miners: Iterable[str] | None = None,
    max_queries: int = DEFAULT_MAX_QUERIES,
    since: date | None = None,
    until: date | None = None,
    indexed: Callable[[set[str]], set[str]] | None = None,
    seed: str = "mined",
    run_as: str = "authors",
    whole_threads: frozenset[str] = frozenset(),
) -> MiningReport:
    """Mine ``corpus`` with the named miners (None: all). Each query runs as its author (``resolve_person`` of the
    author's ``source:account``; unknown authors are skipped), judges relevant only what that author may read, and
    is kept when its document was created in ``[since, until)``. ``indexed(ids)`` says which documents the index
    holds now (a document deleted since it was stored is never judged relevant). At most ``max_queries`` per
    (source, miner). ``run_as="everyone"`` runs every query as the all-documents principal instead (see
    :data:`RUN_AS`). ``whole_threads``: the sources whose threads the index's BM25 scores whole: their
    questions are masked by a copy of the thread without them (``report.masked_copies``, to be written)."""
    if run_as not in RUN_AS:
        raise ValueError(f"run_as must be one of {', '.join(RUN_AS)}, got {run_as!r}")
    if max_queries < 1:
        raise ValueError(f"max_queries must be at least 1, got {max_queries}")
    available = available_miners(corpus)
    names = list(available) if miners is None else list(miners)
    unknown = [n for n in names if n not in available]
    if unknown:
        raise ValueError(f"unknown miner(s) {', '.join(unknown)}; choose from {', '.join(available)}")
    report = MiningReport(documents=len(corpus))
    as_author = run_as == "authors"
    principals: dict[str, Principal | None] = {}
    for name in names:
        miner = available[name]
        passed: dict[str, list[Candidate]] = defaultdict(list)  # source -> candidates
        weeks: dict[str, date] = {}
        for item in miner.mine(corpus):
            if isinstance(item, Skipped):
                report.skipped[(name, item.reason)] += 1
                continue
            info = corpus.info(item.document_id)
            if info is None:
                continue
            day = info.created.date()
            if (since and day < since) or (until and day >= until):
                continue
            resolve = resolve_person if as_author else _everyone
            reason = _checked(item, corpus, resolve, principals, indexed)
            if isinstance(reason, str):
                report.skipped[(name, reason)] += 1
                continue
            passed[info.source].append(reason)
            weeks[item.document_id] = week_start(day)
            report.found[(name, info.source)] += 1
        # The texts of the documents whose question is masked (one more pass, only when a miner masks).
        masked_ids = {c.document_id for cs in passed.values() for c in cs if c.mask_chars}
        records = _records_of(corpus, masked_ids) if masked_ids else {}
        queries: list[EvalQuery] = []
        for source, candidates in sorted(passed.items()):
            sample = _sampled(candidates, weeks, max_queries, seed, corpus, records, report, name, whole_threads)
            for candidate in sample:
                info = corpus.info(candidate.document_id)
                assert info is not None
                language = language_of(candidate.query)
                report.languages[language] += 1
                report.kept[(name, source)] += 1
                queries.append(
                    EvalQuery(
                        id=f"{name}:{candidate.document_id}",
                        query=candidate.query,
                        relevant=dict(candidate.relevant),
                        person=candidate.author if as_author else None,
                        exclude=list(candidate.exclude),
                        tags=[
                            MINED_TAG,
                            name,
                            source,
                            f"lang:{language}",
                            f"week:{weeks[candidate.document_id]}",
                            *([] if as_author else ["as:everyone"]),
                            *candidate.tags,
                        ],
                    )
                )
        if not as_author:
            _exclude_other_copies(queries)
        if queries:
            meta = EvalSetMeta(
                name=f"{MINED_PREFIX}{name}",
                description=miner.scope.description,
                source="mined from this workspace's own documents (rag-pipeline evaluate / mined_eval_sets)",
                license="the workspace's own",
                attribution="the workspace's own people",
                queries=len(queries),
                sources=list(miner.scope.sources) if miner.scope.sources else None,
                tags=[MINED_TAG, *miner.scope.tags, *([] if run_as == "authors" else ["as:everyone"])],
            )
            report.eval_sets[meta.name] = (meta, queries)
    return report


def _exclude_other_copies(queries: list[EvalQuery]) -> None:
    """Run as everyone, a query would see every other thread's copy beside its original: each leaves them out."""
    copies = {d for q in queries for d in q.relevant if is_copy(d)}
    if not copies:
        return
    for i, query in enumerate(queries):
        others = sorted(copies - set(query.relevant))
        if others:
            queries[i] = query.model_copy(update={"exclude": [*query.exclude, *others]})


def _everyone(_author: str) -> Principal:
    return Principal.all_documents_for_evaluation()


def _records_of(corpus: Corpus, document_ids: set[str]) -> dict[str, dict[str, Any]]:
    return {str(r["document_id"]): r for r in corpus.records() if r["document_id"] in document_ids}


def _sampled(
    candidates: list[Candidate],
    weeks: dict[str, date],
    cap: int,
    seed: str,
    corpus: Corpus,
    records: dict[str, dict[str, Any]],
    report: MiningReport,
    name: str,
    whole_threads: frozenset[str] = frozenset(),
) -> list[Candidate]:
    """The sample of one (source, miner), its questions masked: by the chunks that hold them, or, where the index
    scores the source's threads whole (``whole_threads``), by a copy of the thread without its question
    (:mod:`~rag_pipeline.evaluation.mining.copies`, added to ``report.masked_copies``). A candidate whose question
    cannot be masked is replaced by the next one in the sample order."""
    ordered = _spread(candidates, weeks, len(candidates), seed)
    kept: list[Candidate] = []
    position = 0
    while len(kept) < cap and position < len(ordered):
        batch = ordered[position : position + (cap - len(kept))]
        position += len(batch)
        by_chunks = [c for c in batch if c.mask_chars and _source_of(corpus, c) not in whole_threads]
        masks = _masked_children(corpus, by_chunks, records)
        for c in batch:
            if not c.mask_chars:
                kept.append(c)
            elif _source_of(corpus, c) in whole_threads:
                copy = masked_copy(records[c.document_id], c.mask_chars, c.query)
                if copy is None:
                    report.skipped[(name, "nothing is left of the thread without its question")] += 1
                    continue
                report.masked_copies.append(copy)
                tag = f"{COPY_TAG}{copy_group(c.document_id)}"
                kept.append(Candidate(c.miner, c.document_id, c.query, {copy.id: 1}, c.author,
                                      (*c.exclude, c.document_id), tags=(*c.tags, tag)))  # fmt: skip
            elif (masked := masks.get(c.document_id)) is None:
                report.skipped[(name, "the question fills every chunk of its thread (nothing left to find)")] += 1
            else:
                kept.append(Candidate(c.miner, c.document_id, c.query, c.relevant, c.author, (*c.exclude, *masked)))
    return kept


def _source_of(corpus: Corpus, candidate: Candidate) -> str | None:
    info = corpus.info(candidate.document_id)
    return info.source if info is not None else None


def _checked(
    candidate: Candidate,
    corpus: Corpus,
    resolve_person: ResolvePerson,
    principals: dict[str, Principal | None],
    indexed: Callable[[set[str]], set[str]] | None,
) -> Candidate | str:
    """The candidate limited to what its author may read, or why it is skipped (run as everyone, no author is
    needed)."""
    if candidate.author is None and resolve_person is not _everyone:
        return "no author recorded"
    author = candidate.author or ""
    if author not in principals:
        principals[author] = resolve_person(author)
    principal = principals[author]
    if principal is None:
        return "author not in the principal directory"
    # Never judge what the search leaves out (the asking document itself, for the links miners).
    relevant = {d: g for d, g in candidate.relevant.items() if d not in candidate.exclude}
    if indexed is not None:
        present = indexed(set(relevant))
        relevant = {d: g for d, g in relevant.items() if d in present}
        if not relevant:
            return "judged documents no longer indexed"
    readable = {}
    for doc_id, grade in relevant.items():
        info = corpus.info(doc_id)
        if info is not None and principal.admits(info.acl):
            readable[doc_id] = grade
    if not readable:
        if not principal.groups:
            # An offline dump names people but not what they read: nothing can be judged as theirs.
            return "author holds no groups in the directory (add a directory file, or run as everyone)"
        return "author may not read the judged documents"
    return Candidate(
        candidate.miner,
        candidate.document_id,
        candidate.query,
        readable,
        candidate.author,
        candidate.exclude,
        candidate.mask_chars,
    )
