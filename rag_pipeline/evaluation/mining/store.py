"""Mined eval sets on disk: ``weeks/<monday>/<set>.jsonl`` per week mined (a week mined again replaces its files),
and ``sets/<set>.jsonl`` + ``.meta.json``, every week merged and sampled to the cap, which the evaluation runs."""

from __future__ import annotations

import hashlib
import shutil
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, load_eval_set_meta, write_eval_set
from rag_pipeline.evaluation.mining.copies import is_copy
from rag_pipeline.evaluation.mining.mine import MINED_TAG, MiningReport

WEEK_TAG = "week:"


def week_of(query: EvalQuery) -> str:
    return next((t.removeprefix(WEEK_TAG) for t in query.tags if t.startswith(WEEK_TAG)), "")


def _stratum(query: EvalQuery) -> tuple[str, ...]:
    """(miner, source): the tags after ``mined`` (see :func:`mine_workspace`)."""
    return tuple(query.tags[1:3])


def sampled(queries: list[EvalQuery], cap: int, seed: str = "mined") -> list[EvalQuery]:
    """At most ``cap`` queries per (miner, source), taken from the weeks in turn in a seeded order per week."""
    by_stratum: dict[tuple[str, ...], dict[str, list[EvalQuery]]] = defaultdict(lambda: defaultdict(list))
    for q in queries:
        by_stratum[_stratum(q)][week_of(q)].append(q)
    kept: list[EvalQuery] = []
    for _stratum_key, weeks in sorted(by_stratum.items()):
        queues = [
            sorted(items, key=lambda q: hashlib.sha256(f"{seed}\x1f{q.id}".encode()).hexdigest())
            for _week, items in sorted(weeks.items())
        ]
        taken = 0
        while taken < cap and queues:
            for queue in queues:
                if queue and taken < cap:
                    kept.append(queue.pop(0))
                    taken += 1
            queues = [q for q in queues if q]
    return kept


class MinedSets:
    """The mined eval sets of one data folder."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @property
    def weeks_dir(self) -> Path:
        return self.root / "weeks"

    @property
    def sets_dir(self) -> Path:
        """The merged sets the evaluation reads (``RAG_DATA_DIR/reports/mined/sets``)."""
        return self.root / "sets"

    def write_weeks(self, report: MiningReport, weeks: Iterable[str]) -> None:
        """Each mined week's queries, per set; weeks mined with nothing found are emptied."""
        for week in weeks:
            folder = self.weeks_dir / week
            if folder.exists():
                shutil.rmtree(folder)
            for meta, queries in report.eval_sets.values():
                of_week = [q for q in queries if week_of(q) == week]
                if of_week:
                    write_eval_set(folder, meta.model_copy(update={"queries": len(of_week)}), of_week)

    def write_sets(self, report: MiningReport, folder: Path | None = None) -> list[Path]:
        """The report's sets as they are (``evaluate --save-eval-set``, or the current sets): old mined sets go."""
        folder = folder or self.sets_dir
        for old in folder.glob("*.jsonl") if folder.exists() else ():
            if load_eval_set_meta(old).tags[:1] == [MINED_TAG]:
                old.unlink()
                old.with_name(old.name.removesuffix(".jsonl") + ".meta.json").unlink(missing_ok=True)
        return [write_eval_set(folder, meta, queries) for meta, queries in report.eval_sets.values()]

    def merge(self, cap: int) -> dict[str, int]:
        """Every week's queries per set, sampled to ``cap`` per (miner, source), as the current sets."""
        merged: dict[str, tuple[EvalSetMeta, list[EvalQuery]]] = {}
        for path in sorted(self.weeks_dir.glob("*/*.jsonl")):
            meta = load_eval_set_meta(path)
            queries = raw_queries(path)
            if meta.name in merged:
                merged[meta.name][1].extend(queries)
            else:
                merged[meta.name] = (meta, list(queries))
        report = MiningReport()
        for name, (meta, queries) in merged.items():
            kept = sampled(queries, cap)
            report.eval_sets[name] = (meta.model_copy(update={"queries": len(kept)}), kept)
        self.write_sets(report)
        return self.current_counts()

    def judged_copies(self) -> set[str]:
        """The masked copies (``…#masked-question``) the current sets judge relevant: the ones to keep indexed."""
        if not self.sets_dir.exists():
            return set()
        return {
            doc_id
            for path in self.sets_dir.glob("*.jsonl")
            for query in raw_queries(path)
            for doc_id in query.relevant
            if is_copy(doc_id)
        }

    def current_counts(self) -> dict[str, int]:
        if not self.sets_dir.exists():
            return {}
        return {p.name.removesuffix(".jsonl"): len(raw_queries(p)) for p in sorted(self.sets_dir.glob("*.jsonl"))}


def raw_queries(path: Path) -> list[EvalQuery]:
    """The queries as written (a person stays a name: the evaluation resolves it when it loads the set)."""
    return [
        EvalQuery.model_validate_json(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()
    ]
