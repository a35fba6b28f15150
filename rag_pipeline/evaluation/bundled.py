"""Builds the bundled dev eval sets from the public datasets' BEIR-style queries and qrels.

Run ``python -m rag_pipeline.evaluation.bundled <shared data dir> <eval_sets dir>``.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

from rag_pipeline import settings
from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, write_eval_set
from rag_pipeline.sources.jira_dump import JiraDumpReader
from rag_pipeline.sources.slack_export import thread_document_id

SLACK_CHANNEL = "C0UBUNTU00"


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = defaultdict(dict)
    with path.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            result[row["query-id"]][row["corpus-id"]] = int(row["score"])
    return result


def build(shared_data: Path, out: Path) -> None:
    slack_dir = shared_data / "slack_ubuntu" / "eval"
    qrels = _qrels(slack_dir / "qrels.tsv")
    slack = []
    for line in (slack_dir / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        relevant = {
            thread_document_id(settings.BUNDLED_SLACK_TEAM, SLACK_CHANNEL, ts): grade
            for ts, grade in qrels[q["_id"]].items()
        }
        slack.append(EvalQuery(id=q["_id"], query=q["text"], relevant=relevant, tags=["slack", q.get("split", "dev")]))
    write_eval_set(
        out,
        EvalSetMeta(
            name="slack_ubuntu_dev",
            description="Opening questions of real #ubuntu threads; the thread (whose root was deleted) is relevant.",
            source="shared/data/slack_ubuntu/eval",
            license="CC-BY-4.0",
            attribution="Kummerfeld et al., ACL 2019, A Large-Scale Corpus for Conversation Disentanglement",
            queries=len(slack),
        ),
        slack,
    )

    jira_dir = shared_data / "jira_appcelerator" / "eval"
    key_to_id = JiraDumpReader(settings.BUNDLED_JIRA_DUMP, settings.BUNDLED_JIRA_SITE).key_to_document_id()
    qrels = _qrels(jira_dir / "qrels.tsv")
    jira = []
    for line in (jira_dir / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        relevant = {key_to_id[k]: g for k, g in qrels[q["_id"]].items() if k in key_to_id}
        if not relevant:
            continue
        jira.append(
            EvalQuery(
                id=q["_id"],
                query=f"{q['title']}\n{q['text']}".strip(),
                relevant=relevant,
                exclude=[key_to_id[q["_id"]]] if q["_id"] in key_to_id else [],
                tags=["jira", "duplicates"],
            )
        )
    write_eval_set(
        out,
        EvalSetMeta(
            name="jira_appcelerator_dev",
            description="Issues resolved as duplicates (title + description) -> the issues they duplicate; "
            "the query issue itself is excluded from its results.",
            source="shared/data/jira_appcelerator/eval",
            license="Apache-2.0",
            attribution="github.com/tidev/jira-archive",
            queries=len(jira),
        ),
        jira,
    )


if __name__ == "__main__":
    build(Path(sys.argv[1]), Path(sys.argv[2]))
