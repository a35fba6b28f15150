#!/usr/bin/env python3
"""Cast the Titanium SDK API reference (apidoc YAML, Apache-2.0) into Confluence REST content objects, and build a
Jira-issue -> API-page question set (BEIR layout): step one of the bundled Confluence corpus.

The corpus: 430 API type pages (271 ``.yml`` files) and 43 release-note pages of ``tidev/titanium_mobile`` at
6aeeb353 (2017-07-28), one space ``TIAPI`` whose page tree follows the namespaces (home > Titanium > Titanium.UI >
Titanium.UI.View); bodies in storage format (summary, description, examples as code macros, members as tables);
labels from platforms, ``deprecated`` and ``since``; versions and authors from each file's git history. The
questions: Appcelerator Jira issues (the bundled ``rag_pipeline/data/jira_appcelerator/issues.jsonl.gz``, from
github.com/tidev/jira-archive, Apache-2.0; ``--issues`` for another copy) whose description or comments link an
API page; the issue's summary and description with links removed is the question, the linked type's page the
answer. Upstream is over the mirror's size cap, so the history comes from a fork that holds the same commit.

Needs ``markdown pyyaml lxml`` (not project dependencies: install them into a scratch venv)::

    git clone https://github.com/todorikiminoru/titanium_mobile /tmp/titanium_mobile   # a fork holding 6aeeb353
    REPO=/tmp/titanium_mobile/.git
    mkdir src && git -C $REPO archive 6aeeb353afc3bec0a96f86f39d6ebc9dca815cb7 -- apidoc LICENSE | tar -x -C src
    venv/bin/python tools/build_confluence_corpus.py src $REPO out   # ~30 s: out/pages.jsonl, queries.jsonl, qrels.tsv
    .venv/bin/python -m tools.confluence_titanium_sets out           # step two: what the project ships
"""

import argparse
import collections
import glob
import gzip
import hashlib
import html
import json
import os
import re
import subprocess
from pathlib import Path

import markdown
import yaml

BUNDLED_ISSUES = Path(__file__).resolve().parents[1] / "rag_pipeline" / "data" / "jira_appcelerator" / "issues.jsonl.gz"
_parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
_parser.add_argument("src", help="the folder holding apidoc/ and LICENSE of titanium_mobile at 6aeeb353 (git archive)")
_parser.add_argument("repo", help="the titanium_mobile .git folder (the pages' versions and authors come from its log)")
_parser.add_argument("out", help="the folder to write pages.jsonl, queries.jsonl and qrels.tsv to")
_parser.add_argument(
    "--issues",
    default=str(BUNDLED_ISSUES),
    help="the Appcelerator Jira issues (gzip JSON lines, one REST issue object each; default: the bundled copy, "
    "rag_pipeline/data/jira_appcelerator/issues.jsonl.gz from github.com/tidev/jira-archive)",
)
_args = _parser.parse_args()
SRC, REPO, OUT, ISSUES = _args.src, _args.repo, _args.out, _args.issues
COMMIT = "6aeeb353afc3bec0a96f86f39d6ebc9dca815cb7"
SPACE = {"key": "TIAPI", "name": "Titanium SDK API Reference"}
os.makedirs(OUT, exist_ok=True)


def pid(name):  # stable numeric Confluence-like id
    return str(int(hashlib.sha1(name.encode()).hexdigest()[:10], 16) % 10**9 + 10**8)


def md(text):
    if not text:
        return ""
    # apidoc uses <Titanium.UI.View> style type links; keep them readable
    text = re.sub(r"<((?:Titanium|Modules|Global)\.[A-Za-z0-9_.]+)>", r"\1", str(text))
    h = markdown.markdown(text, extensions=["fenced_code", "tables"], output_format="xhtml")
    return tidy(h)


def tidy(h):  # raw HTML inside markdown is not always well-formed: re-serialize as XHTML
    from lxml import etree
    from lxml import html as lh

    try:
        etree.fromstring(f"<r>{h}</r>")
        return h
    except etree.XMLSyntaxError:
        frags = lh.fragments_fromstring(h)
        return "".join(f if isinstance(f, str) else etree.tostring(f, method="xml", encoding="unicode") for f in frags)


def code_macro(code, lang="javascript"):
    code = str(code).replace("]]>", "]]]]><![CDATA[>")
    return (
        f'<ac:structured-macro ac:name="code"><ac:parameter ac:name="language">{lang}</ac:parameter>'
        f"<ac:plain-text-body><![CDATA[{code}]]></ac:plain-text-body></ac:structured-macro>"
    )


def examples_xhtml(exs):
    out = []
    for ex in exs or []:
        if not isinstance(ex, dict):
            continue
        out.append("<h3>{}</h3>".format(html.escape(str(ex.get("title", "Example")))))
        body = str(ex.get("example", ""))
        # split markdown prose vs indented/fenced code the simple way
        parts = re.split(r"\n(?=    |\t)", body, maxsplit=1)
        out.append(md(parts[0]))
        if len(parts) > 1:
            out.append(code_macro(re.sub(r"^(    |\t)", "", parts[1], flags=re.M)))
    return "".join(out)


def members_xhtml(kind, items):
    if not items:
        return ""
    rows = []
    for it in items:
        if not isinstance(it, dict):
            continue
        t = it.get("type", "")
        if isinstance(t, list):
            t = " | ".join(map(str, t))
        rows.append(
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>".format(
                html.escape(str(it.get("name"))),
                html.escape(str(t or "")),
                md(it.get("summary", "")) + md(it.get("description", "")),
            )
        )
    return "<h2>{}</h2><table><tbody><tr><th>Name</th><th>Type</th><th>Description</th></tr>{}</tbody></table>".format(
        kind, "".join(rows)
    )


def platforms(d):
    p = d.get("platforms")
    if isinstance(p, list):
        return [str(x).lower() for x in p]
    return []


def git_hist(path):
    log = (
        subprocess.run(
            ["git", "-C", REPO, "log", "--format=%aI|%an", COMMIT, "--", path], capture_output=True, text=True
        )
        .stdout.strip()
        .splitlines()
    )
    return log  # newest first


# ---- load types ----
types, first_in_file = {}, {}
for f in sorted(glob.glob(os.path.join(SRC, "apidoc/**/*.yml"), recursive=True)):
    if "/templates/" in f or f.endswith("template.yml"):
        continue
    for _i, d in enumerate(yaml.safe_load_all(Path(f).read_text(encoding="utf-8"))):
        if isinstance(d, dict) and "name" in d:
            d["_file"] = os.path.relpath(f, SRC)
            types[d["name"]] = d
            first_in_file.setdefault(d["_file"], d["name"])

HOME = "Titanium SDK API Reference"
RELNOTES = "Release Notes"


def parent_of(name):
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        cand = ".".join(parts[:i])
        if cand in types:
            return cand
    owner = first_in_file.get(types[name]["_file"]) if name in types else None
    if owner and owner != name:
        return owner
    return HOME


pages = {}


def page(title, body, parent, labels, hist, extra=None):
    p = {
        "id": pid(title),
        "type": "page",
        "status": "current",
        "title": title,
        "space": SPACE,
        "_parent": parent,
        "body": {"storage": {"value": body, "representation": "storage"}},
        "metadata": {"labels": {"results": [{"prefix": "global", "name": label} for label in sorted(set(labels))]}},
        "_links": {"webui": "/display/{}/{}".format(SPACE["key"], title.replace(" ", "+"))},
    }
    if hist:
        when, by = hist[0].split("|", 1)
        cwhen, cby = hist[-1].split("|", 1)
        p["version"] = {"number": len(hist), "when": when, "by": {"displayName": by}}
        p["history"] = {"createdDate": cwhen, "createdBy": {"displayName": cby}}
    else:
        p["version"] = {"number": 1}
    p.update(extra or {})
    pages[title] = p


page(HOME, "<p>Titanium SDK API reference (apidoc), cast into Confluence pages.</p>", None, ["home"], None)
hist_cache = {}
for name, d in types.items():
    f = d["_file"]
    if f not in hist_cache:
        hist_cache[f] = git_hist(f)
    body = "".join(
        [
            "<p><strong>{}</strong></p>".format(html.escape(str(d.get("summary", "")).strip())),
            md(d.get("description")),
            examples_xhtml(d.get("examples")),
            members_xhtml("Properties", d.get("properties")),
            members_xhtml("Methods", d.get("methods")),
            members_xhtml("Events", d.get("events")),
        ]
    )
    labels = (
        platforms(d)
        + (["deprecated"] if d.get("deprecated") else [])
        + (
            ["since-{}".format(str(d["since"]).replace(".", "-"))]
            if isinstance(d.get("since"), (str, int, float))
            else []
        )
    )
    page(name, body, parent_of(name), labels, hist_cache[f], {"_source": f})

# release notes (CHANGELOG/*.mdoc) as a second subtree
page(RELNOTES, "<p>Titanium SDK release notes.</p>", HOME, ["release-notes"], None)
for f in sorted(glob.glob(os.path.join(SRC, "apidoc/Titanium/CHANGELOG/*.mdoc"))):
    rel = os.path.relpath(f, SRC)
    title = f"Titanium SDK {os.path.basename(f)[:-5]} Release Notes"
    page(title, md(Path(f).read_text(encoding="utf-8")), RELNOTES, ["release-notes"], git_hist(rel), {"_source": rel})

# resolve ancestors (root first, as Confluence returns them)
parent = {t: p.pop("_parent") for t, p in pages.items()}
for t, p in pages.items():
    anc, cur = [], parent[t]
    while cur:
        anc.append({"id": pages[cur]["id"], "type": "page", "title": cur})
        cur = parent[cur]
    p["ancestors"] = list(reversed(anc))

with open(os.path.join(OUT, "pages.jsonl"), "w") as fh:
    for p in pages.values():
        fh.write(json.dumps(p, ensure_ascii=False) + "\n")

# ---- eval set: Jira issues whose description/comments link a docs API page ----
lower = {k.lower(): k for k in pages}
link = re.compile(r"https?://(?:docs|developer)\.appcelerator\.com/[^\s\]|]*#!/api/([A-Za-z0-9_.]+)")
jira_link = re.compile(r"\[([^\]|]*)\|(https?://[^\]]*)\]")
queries, qrels = {}, collections.defaultdict(dict)
for line in gzip.decompress(Path(ISSUES).read_bytes()).decode("utf-8").splitlines():
    d = json.loads(line)
    f = d["fields"]
    texts = [("description", f.get("description") or "")] + [
        ("comment", c.get("body") or "") for c in (f.get("comment") or {}).get("comments", [])
    ]
    hits = set()
    for _where, t in texts:
        for m in link.finditer(t):
            name = m.group(1).split("-")[0].rstrip(".")
            if name.lower() in lower:
                hits.add(lower[name.lower()])
    if not hits:
        continue
    desc = jira_link.sub(lambda m: m.group(1), f.get("description") or "")
    desc = re.sub(r"https?://\S+", "", desc)
    queries[d["key"]] = {"_id": d["key"], "title": f["summary"], "text": desc.strip()}
    for h in hits:
        qrels[d["key"]][pages[h]["id"]] = 1

with open(os.path.join(OUT, "queries.jsonl"), "w") as fh:
    for q in queries.values():
        fh.write(json.dumps(q, ensure_ascii=False) + "\n")
with open(os.path.join(OUT, "qrels.tsv"), "w") as fh:
    fh.write("query-id\tcorpus-id\tscore\n")
    for q, rel in qrels.items():
        for c, s in rel.items():
            fh.write(f"{q}\t{c}\t{s}\n")

sizes = [len(p["body"]["storage"]["value"]) for p in pages.values()]
print(
    json.dumps(
        {
            "pages": len(pages),
            "api_type_pages": len(types),
            "body_chars_total": sum(sizes),
            "body_chars_median": sorted(sizes)[len(sizes) // 2],
            "max_depth": max(len(p["ancestors"]) for p in pages.values()),
            "queries": len(queries),
            "qrels": sum(len(v) for v in qrels.values()),
            "single_page_queries": sum(1 for v in qrels.values() if len(v) == 1),
            "relevant_pages": len({c for v in qrels.values() for c in v}),
        },
        indent=1,
    )
)
