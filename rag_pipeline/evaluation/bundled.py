"""Builds the bundled dev eval sets from the public datasets' BEIR-style queries and qrels.

Run ``python -m rag_pipeline.evaluation.bundled <shared data dir> <eval_sets dir>``.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, write_eval_set
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.sources.jira.dump import JiraDumpReader, project_group
from rag_pipeline.sources.jira.settings import BUNDLED_JIRA_DUMP, BUNDLED_JIRA_SITE
from rag_pipeline.sources.slack.settings import BUNDLED_SLACK_TEAM
from rag_pipeline.sources.slack.threads import thread_document_id, workspace_group

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
            thread_document_id(BUNDLED_SLACK_TEAM, SLACK_CHANNEL, ts): grade for ts, grade in qrels[q["_id"]].items()
        }
        slack.append(EvalQuery(id=q["_id"], query=q["text"], relevant=relevant, tags=["slack", q.get("split", "dev")]))
    write_eval_set(
        out,
        EvalSetMeta(
            name="slack_ubuntu_dev",
            description="Opening questions of real #ubuntu threads; the thread (whose root was deleted) is relevant.",
            source="slack_ubuntu eval split (rag_pipeline/data/README.md)",
            license="CC-BY-4.0",
            attribution="Kummerfeld et al., ACL 2019, A Large-Scale Corpus for Conversation Disentanglement",
            queries=len(slack),
            sources=["slack"],
        ),
        slack,
    )

    jira_dir = shared_data / "jira_appcelerator" / "eval"
    key_to_id = JiraDumpReader(BUNDLED_JIRA_DUMP, BUNDLED_JIRA_SITE).key_to_document_id()
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
            source="jira_appcelerator eval split (rag_pipeline/data/README.md)",
            license="Apache-2.0",
            attribution="github.com/tidev/jira-archive",
            queries=len(jira),
            sources=["jira"],
        ),
        jira,
    )
    acl = acl_queries(slack, jira, {doc_id: key.split("-")[0] for key, doc_id in key_to_id.items()})
    write_eval_set(
        out,
        EvalSetMeta(
            name="acl_bundled_dev",
            description="Slack and Jira dev queries run as several principals (workspace member, single-project "
            "and two-project Jira users, a user with no groups); relevance is limited to what each may read, "
            "and any returned document the principal may not read is a leak.",
            source="eval_sets/slack_ubuntu_dev + eval_sets/jira_appcelerator_dev",
            license="CC-BY-4.0 (Slack queries), Apache-2.0 (Jira queries)",
            attribution="Kummerfeld et al., ACL 2019; github.com/tidev/jira-archive",
            queries=len(acl),
            tags=["acl"],
        ),
        acl,
    )


# Principals of the ACL eval set: (name, user id, groups). The bundled data has one Slack workspace
# (public channel -> members group) and five Jira projects (browse permission -> project group).
ACL_PRINCIPALS = (
    ("slack-member", "U0ACLSLACK", (workspace_group(BUNDLED_SLACK_TEAM),)),
    ("timob-developer", "U0ACLTIMOB", (project_group(BUNDLED_JIRA_SITE, "TIMOB"),)),
    (
        "ac-aloy-developer",
        "U0ACLACALOY",
        (project_group(BUNDLED_JIRA_SITE, "AC"), project_group(BUNDLED_JIRA_SITE, "ALOY")),
    ),
    ("outsider", "U0ACLNONE", ()),
)


def acl_queries(
    slack: list[EvalQuery], jira: list[EvalQuery], jira_project: dict[str, str], per_principal: int = 15
) -> list[EvalQuery]:
    """Every principal runs the same Slack and Jira queries; relevance keeps only what it may read."""
    site = BUNDLED_JIRA_SITE
    slack_group = workspace_group(BUNDLED_SLACK_TEAM)

    def readable(doc_id: str, groups: tuple[str, ...]) -> bool:
        if doc_id.startswith("slack:"):
            return slack_group in groups
        return project_group(site, jira_project.get(doc_id, "?")) in groups

    # Jira queries whose duplicates are spread over projects, so project principals see part of them.
    picked_jira = [q for q in jira if any(jira_project.get(d) in ("AC", "ALOY") for d in q.relevant)][:per_principal]
    picked_jira += [q for q in jira if q not in picked_jira][: per_principal * 2 - len(picked_jira)]
    picked = slack[:per_principal] + picked_jira
    out = []
    for name, user_id, groups in ACL_PRINCIPALS:
        for q in picked:
            out.append(
                EvalQuery(
                    id=f"{name}:{q.id}",
                    query=q.query,
                    relevant={d: g for d, g in q.relevant.items() if readable(d, groups)},
                    principal=Principal(user_id=user_id, groups=groups),
                    exclude=q.exclude,
                    tags=[*q.tags, "acl", name],
                )
            )
    return out


if __name__ == "__main__":
    build(Path(sys.argv[1]), Path(sys.argv[2]))
