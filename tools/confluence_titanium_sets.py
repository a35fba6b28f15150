"""The bundled Confluence corpus and its eval sets, from the Titanium SDK API reference cast into Confluence pages.

``tools/build_confluence_corpus.py`` (needs ``markdown pyyaml lxml`` and the ``tidev/titanium_mobile`` history, see
its docstring) writes ``pages.jsonl`` (REST content objects: storage-format bodies, ancestors, labels, versions),
``queries.jsonl`` and ``qrels.tsv`` (Jira issues of the bundled Appcelerator dump that link an API page: the issue's
summary and description, links removed, is the question; the linked page is the answer). This script, with the
project's own dependencies only, turns them into what the project ships:

- ``rag_pipeline/data/confluence_titanium/pages.jsonl.gz``: the pages with the site's base URL, plus an access
  overlay that is **synthetic** (the public docs had none): the space is viewable by group ``titanium-devs``; the
  ``Titanium.Media`` subtree is restricted to ``media-team`` and, below it, ``Titanium.Media.VideoPlayer`` to
  ``media-leads`` as well (two levels, an intersection); ``Titanium.Android`` to ``android-team``.
- ``eval_sets/confluence_titanium/confluence_titanium.jsonl``: the known-item set (every reader's view).
- ``eval_sets/confluence_titanium/acl_confluence_titanium.jsonl``: the same queries as five principals; relevance
  keeps what each may read, and any other returned page is a leak.

    python -m tools.confluence_titanium_sets BUILD_OUT_DIR
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
from pathlib import Path
from typing import Any

from rag_pipeline.connectors.confluence.acl import restricted_group, space_group
from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, write_eval_set
from rag_pipeline.retrieval.principal import Principal

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "rag_pipeline" / "data" / "confluence_titanium"
EVAL = ROOT / "eval_sets" / "confluence_titanium"
SITE = "wiki.appcelerator.org"
SPACE = "TIAPI"
VIEWERS = "titanium-devs"
# Page title -> the groups its view restriction admits (the synthetic overlay).
RESTRICTED = {
    "Titanium.Media": ["media-team"],
    "Titanium.Media.VideoPlayer": ["media-leads"],
    "Titanium.Android": ["android-team"],
}
BUILT_AT = "2017-07-28T00:00:00.000Z"  # the source commit's day
LICENSE = "Apache-2.0"
ATTRIBUTION = (
    "Titanium SDK API documentation (apidoc), Copyright 2008-2017 Appcelerator, Inc., Apache License 2.0, from "
    "github.com/tidev/titanium_mobile @ 6aeeb353; questions from the Appcelerator Jira (github.com/tidev/jira-archive)"
)


def _read_restriction(groups: list[str]) -> dict[str, Any]:
    return {
        "read": {
            "operation": "read",
            "restrictions": {
                "user": {"results": [], "size": 0},
                "group": {"results": [{"type": "group", "name": g} for g in groups], "size": len(groups)},
            },
        }
    }


def _space_record() -> dict[str, Any]:
    grant = {"operation": {"operation": "read", "targetType": "space"},
             "subjects": {"group": {"results": [{"type": "group", "name": VIEWERS}], "size": 1}}}  # fmt: skip
    return {"type": "space", "key": SPACE, "name": "Titanium SDK API Reference", "permissions": [grant],
            "anonymous": False}  # fmt: skip


def document_id(page_id: str) -> str:
    return f"confluence:{SITE}:{page_id}"


def nearest_restricted(page: dict[str, Any], by_title: dict[str, dict[str, Any]]) -> list[str]:
    """The ids of the restricted pages on the way from the space root down to ``page`` (itself included)."""
    chain = [a["title"] for a in page.get("ancestors", [])] + [page["title"]]
    return [by_title[t]["id"] for t in chain if t in RESTRICTED]


def write_dump(pages: list[dict[str, Any]]) -> Path:
    DATA.mkdir(parents=True, exist_ok=True)
    out = DATA / "pages.jsonl.gz"
    with gzip.open(out, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps(_space_record()) + "\n")
        for page in pages:
            page = dict(page)
            page["_links"] = {**page.get("_links", {}), "base": f"https://{SITE}"}
            page["restrictions"] = _read_restriction(RESTRICTED.get(page["title"], []))
            if not (page.get("version") or {}).get("when"):
                # The two pages the build made up (the space home, "Release Notes") have no file history: dated at
                # the source commit, as every page of a Confluence export has a version date.
                page["version"] = {**page.get("version", {}), "number": 1, "when": BUILT_AT}
                page.setdefault("history", {"createdDate": BUILT_AT})
            handle.write(json.dumps(page, ensure_ascii=False) + "\n")
    return out


def build(build_out: Path) -> dict[str, int]:
    pages = [json.loads(line) for line in (build_out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
    by_id = {p["id"]: p for p in pages}
    by_title = {p["title"]: p for p in pages}
    write_dump(pages)

    relevant: dict[str, dict[str, int]] = {}
    with (build_out / "qrels.tsv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            relevant.setdefault(row["query-id"], {})[document_id(row["corpus-id"])] = int(row["score"])
    queries = []
    for line in (build_out / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        queries.append(EvalQuery(id=q["_id"], query=f"{q['title']}\n{q['text']}".strip(), relevant=relevant[q["_id"]],
                                 tags=["confluence", "api-reference"]))  # fmt: skip
    write_eval_set(
        EVAL,
        EvalSetMeta(
            name="confluence_titanium",
            description="Appcelerator Jira issues that link a Titanium API reference page (summary + description, "
            "links removed) -> that page, in a Confluence space of 475 pages.",
            source="tools/confluence_titanium_sets.py from tools/build_confluence_corpus.py",
            license=LICENSE,
            attribution=ATTRIBUTION,
            queries=len(queries),
            sources=["confluence"],
        ),
        queries,
    )

    space = space_group(SITE, SPACE)
    media, video, android = (by_title[t]["id"] for t in RESTRICTED)
    principals = {
        "space-viewer": (space,),
        "media-team": (space, restricted_group(SITE, media)),
        "media-lead": (space, restricted_group(SITE, media), restricted_group(SITE, video)),
        "android-team": (space, restricted_group(SITE, android)),
        "outsider": (),
    }

    def readable(doc_id: str, groups: tuple[str, ...]) -> bool:
        page = by_id[doc_id.rsplit(":", 1)[1]]
        chain = nearest_restricted(page, by_title)
        # The directory grants restricted:<nearest> to whoever passes every level down to it.
        return space in groups and (not chain or restricted_group(SITE, chain[-1]) in groups)

    acl = [
        EvalQuery(
            id=f"{name}:{q.id}",
            query=q.query,
            relevant={d: g for d, g in q.relevant.items() if readable(d, groups)},
            principal=Principal(user_id=f"acc-{name}", groups=groups),
            tags=[*q.tags, "acl", name],
        )
        for name, groups in principals.items()
        for q in queries
    ]
    write_eval_set(
        EVAL,
        EvalSetMeta(
            name="acl_confluence_titanium",
            description="The Titanium questions as five principals (space viewer, media team, media lead, android "
            "team, outsider) over a synthetic restriction overlay (Titanium.Media and, below it, "
            "Titanium.Media.VideoPlayer; Titanium.Android); relevance keeps what each may read, and any other "
            "returned page is a leak.",
            source="eval_sets/confluence_titanium/confluence_titanium.jsonl",
            license=LICENSE,
            attribution=ATTRIBUTION,
            queries=len(acl),
            tags=["acl"],
        ),
        acl,
    )
    restricted_pages = sum(1 for p in pages if nearest_restricted(p, by_title))
    return {"pages": len(pages), "restricted_pages": restricted_pages, "queries": len(queries), "acl_queries": len(acl)}


if __name__ == "__main__":
    print(json.dumps(build(Path(sys.argv[1])), indent=1))
