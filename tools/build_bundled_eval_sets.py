"""Builds the bundled dev eval sets from the public datasets' BEIR-style queries and qrels.

Run ``python -m tools.build_bundled_eval_sets <shared data dir> <eval_sets dir>``; the restricted-comment ACL
set alone (it needs only the bundled dump): ``python -m tools.build_bundled_eval_sets --restricted <eval_sets>``.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

from rag_pipeline.connectors.jira.dump import (
    JiraDumpReader,
    comment_document_id,
    jira_group,
    project_group,
    read_comment_visibility,
    restriction_group,
    role_group,
)
from rag_pipeline.connectors.jira.settings import BUNDLED_COMMENT_VISIBILITY, BUNDLED_JIRA_DUMP, BUNDLED_JIRA_SITE
from rag_pipeline.connectors.slack.settings import BUNDLED_SLACK_TEAM
from rag_pipeline.connectors.slack.threads import thread_document_id, workspace_group
from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, write_eval_set
from rag_pipeline.retrieval.principal import Principal

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


# A query for each comment the bundled overlay restricts (its own words, as a reader remembering it would ask).
RESTRICTED_COMMENT_QUERIES = {
    ("TIMOB-15537", "275298"): "remove the Clean Project option to force a higher-quality build process",
    ("TIMOB-16077", "342638"): "postponing the release of my app, waiting since october for a decent fix",
    ("TIMOB-26211", "439365"): "iphone 7 simulator last button only visible at 24.85% width",
    ("TIMOB-25756", "434032"): "recompiled the test app with sdk 7.0.1 on Android 8, kill the app for the new language",
    ("AC-3308", "303069"): "error after updating Android SDK-tools 22.6.1, duplicate of TIMOB-16640 fixed in 3.2.3",
    ("AC-4954", "419445"): "fixed for 6.1.0 but 6.0.x was already out, use the latest 6_1_X build",
    ("ALOY-448", "273416"): "Alloy compile copies the .svn folders and the Eclipse SVN plugin gets confused",
    ("ALOY-800", "267325"): "platform-specific properties rely on the module reference: MapModule.TERRAIN_TYPE",
}


def _restricted_principals() -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    site = BUNDLED_JIRA_SITE
    timob, ac, aloy = (project_group(site, p) for p in ("TIMOB", "AC", "ALOY"))
    admins = jira_group(site, "jira-admins")
    return (
        ("timob-developer-role", "U0ACLTIMOBROLE", (timob, role_group(site, "TIMOB", "Developers"))),
        ("timob-developer", "U0ACLTIMOB", (timob,)),  # the project, not the role
        ("timob-role-only", "U0ACLROLEONLY", (role_group(site, "TIMOB", "Developers"),)),  # the role, not the project
        ("ac-aloy-admin", "U0ACLADMIN", (ac, aloy, admins, role_group(site, "ALOY", "Developers"))),
        ("ac-aloy-developer", "U0ACLACALOY", (ac, aloy)),
        ("outsider", "U0ACLNONE", ()),
    )


def restricted_comment_queries() -> list[EvalQuery]:
    """Every principal asks for every restricted comment; the comment is relevant only to those holding both its
    issue's project and its role or group, and shown to anyone else it is a leak."""
    key_to_id = JiraDumpReader(BUNDLED_JIRA_DUMP, BUNDLED_JIRA_SITE).key_to_document_id()
    overlay = read_comment_visibility(BUNDLED_COMMENT_VISIBILITY)
    out = []
    for (key, comment_id), query in RESTRICTED_COMMENT_QUERIES.items():
        project = key.split("-")[0]
        restriction = restriction_group(overlay[(key, comment_id)], BUNDLED_JIRA_SITE, project)
        document = comment_document_id(key_to_id[key], comment_id)
        for name, user_id, groups in _restricted_principals():
            may_read = project_group(BUNDLED_JIRA_SITE, project) in groups and restriction in groups
            out.append(
                EvalQuery(
                    id=f"{name}:{key}:{comment_id}",
                    query=query,
                    relevant={document: 1} if may_read else {},
                    principal=Principal(user_id=user_id, groups=groups),
                    tags=["jira", "acl", "restricted-comment", name],
                )
            )
    return out


def build_restricted(out: Path) -> None:
    queries = restricted_comment_queries()
    write_eval_set(
        out,
        EvalSetMeta(
            name="acl_restricted_comments",
            description="Known-item queries for the bundled Jira comments marked restricted to a role or group "
            "(rag_pipeline/data/jira_appcelerator/comment_visibility.json), run as readers holding the project and "
            "the restriction, only one of them, or neither: only the first may be shown the comment, and any "
            "restricted comment shown to another is a leak.",
            source="rag_pipeline/data/jira_appcelerator (comment_visibility.json overlay)",
            license="Apache-2.0",
            attribution="github.com/tidev/jira-archive",
            queries=len(queries),
            sources=["jira"],
            tags=["acl"],
        ),
        queries,
    )


if __name__ == "__main__":
    if sys.argv[1] == "--restricted":
        build_restricted(Path(sys.argv[2]))
    else:
        build(Path(sys.argv[1]), Path(sys.argv[2]))
