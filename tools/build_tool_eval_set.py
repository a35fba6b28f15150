"""Build the tool-search eval set from MetaTool (ToolE): 199 tools and single-tool queries labelled with the tool
that answers them.

Tool search (rag_pipeline/retrieval/tool_search.py) finds the few tool definitions a request needs; this set
scores it. Each tool of ``dataset/plugin_des.json`` (name → one-line description) becomes a catalog entry, each
query of ``dataset/data/all_clean_data.csv`` (columns ``Query,Tool``) a labelled query whose one relevant
document is ``tools:catalog:<Tool>``, the id the ``tools`` source gives a catalog tool.

    .venv/bin/python -m tools.build_tool_eval_set /path/to/MetaTool eval_sets/tools_metatool

writes into the out folder:

- ``catalog.json``: ``{"tools": [{"name", "description", "tags": []}, ...]}``, for ``rag-pipeline index
  --tools-catalog``. MetaTool has no argument schemas, so the tools have none;
- ``tools_metatool_test.jsonl`` (+ ``.meta.json``): the test queries in the project's eval-set format;
- ``train.ndjson``: ``{"query", "tool"}`` per line, the training split (not ``.jsonl``: the Dagster evaluation
  scores every ``*.jsonl`` of its folder as an eval set). It is never scored: the tool-search
  benchmark simulates usage and success from it (a usage prior learned on the test queries would leak);
- ``README.md`` (source, licence, attribution, caveats, counts) and ``LICENSE`` (MetaTool's, verbatim).

Rules, in order: whitespace in a query is collapsed; a query text labelled with more than one tool is dropped
(label noise: "What's the weather like today?" is both WeatherTool and word_sneak); repeats of a (query, tool)
pair are kept once. A query is a test query when ``int(sha1(query), 16) % 5 == 0``, else a training query, so
the split depends on nothing but the text. To keep the committed files small, the test split keeps the
``TEST_LIMIT`` queries of smallest sha1, and the training split, when its compact JSONL would pass
``TRAIN_MAX_BYTES``, the ``TRAIN_LIMIT`` of smallest sha1.

The folder may be a MetaTool checkout (``dataset/...``) or a flat copy of the two files.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import shutil
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rag_pipeline.connectors.tools.catalog import CATALOG_CONTAINER, SOURCE_NAME
from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, write_eval_set

NAME = "tools_metatool_test"
TEST_LIMIT = 1000
TRAIN_MAX_BYTES = 2_500_000
TRAIN_LIMIT = 8000
REPOSITORY = "github.com/HowieHwong/MetaTool"
COMMIT = "35e81bb7576826e980c80fed8f8c0a2b4a1e6fbb"
CATALOG_PATH = "dataset/plugin_des.json"
QUERIES_PATH = "dataset/data/all_clean_data.csv"
LICENSE_TEXT = "MIT"
ATTRIBUTION = (
    "Contains the ToolE dataset of the MetaTool benchmark (Huang et al., 2023, arXiv:2310.03128), "
    "Copyright (c) 2023 Yue Huang (github.com/HowieHwong/MetaTool), MIT License"
)


@dataclass
class Built:
    """What a build kept and dropped, for the README and the caller."""

    tools: int
    rows: int  # labelled rows in the CSV
    distinct: int  # distinct query texts
    dropped: Counter[str]
    test_all: int  # test queries before the subsample
    train_all: int
    test: list[tuple[str, str]] = field(default_factory=list)
    train: list[tuple[str, str]] = field(default_factory=list)
    train_sampled: bool = False


def normalize(query: str) -> str:
    """The query as it is stored and hashed: whitespace collapsed (766 CSV rows have stray spaces at an end)."""
    return " ".join(query.split())


def digest(query: str) -> int:
    """sha1 of the query's UTF-8 text as an integer: what the split and the subsamples order by."""
    return int(hashlib.sha1(query.encode("utf-8")).hexdigest(), 16)


def is_test(query: str) -> bool:
    return digest(query) % 5 == 0


def query_id(query: str) -> str:
    return f"metatool-{hashlib.sha1(query.encode('utf-8')).hexdigest()[:12]}"


def document_id(tool: str) -> str:
    """The id the ``tools`` source gives a catalog tool (rag_pipeline.connectors.tools.catalog.tool_documents)."""
    return f"{SOURCE_NAME}:{CATALOG_CONTAINER}:{tool}"


def _find(folder: Path, path: str) -> Path:
    """``path`` inside a MetaTool checkout, or its file name in a flat copy."""
    for candidate in (folder / path, folder / Path(path).name):
        if candidate.is_file():
            return candidate
    raise SystemExit(f"error: neither {folder / path} nor {folder / Path(path).name} exists")


def read_tools(folder: Path) -> dict[str, str]:
    """Tool name → description, in the file's order."""
    data = json.loads(_find(folder, CATALOG_PATH).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise SystemExit(f"error: {CATALOG_PATH} is not a JSON object of name → description")
    return {str(name).strip(): " ".join(str(text).split()) for name, text in data.items()}


def read_rows(folder: Path) -> list[tuple[str, str]]:
    """(query, tool) per CSV row, queries normalized; the csv module, since queries hold quoted commas."""
    with _find(folder, QUERIES_PATH).open(encoding="utf-8", newline="") as handle:
        return [(normalize(row["Query"]), row["Tool"].strip()) for row in csv.DictReader(handle)]


def clean(rows: Iterable[tuple[str, str]], tools: Iterable[str]) -> tuple[dict[str, str], Counter[str]]:
    """Query → its one tool, and why the other rows were dropped."""
    known = set(tools)
    dropped: Counter[str] = Counter()
    labels: dict[str, set[str]] = defaultdict(set)
    counts: Counter[str] = Counter()
    for query, tool in rows:
        if not query:
            dropped["empty query"] += 1
        elif tool not in known:
            dropped["tool not in the catalog"] += 1
        else:
            labels[query].add(tool)
            counts[query] += 1
    kept: dict[str, str] = {}
    for query, found in labels.items():
        if len(found) > 1:
            dropped["rows of a query labelled with several tools"] += counts[query]
        else:
            kept[query] = next(iter(found))
            if counts[query] > 1:
                dropped["repeated (query, tool) rows"] += counts[query] - 1
    return kept, dropped


def split(kept: dict[str, str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(test, train), each ordered by sha1, smallest first (so a subsample is a prefix)."""
    ordered = sorted(kept.items(), key=lambda item: digest(item[0]))
    return [p for p in ordered if is_test(p[0])], [p for p in ordered if not is_test(p[0])]


def train_line(query: str, tool: str) -> str:
    return json.dumps({"query": query, "tool": tool}, ensure_ascii=False, separators=(",", ":")) + "\n"


def build(
    data: Path,
    out: Path,
    *,
    test_limit: int = TEST_LIMIT,
    test_from: int = 0,
    train_max_bytes: int = TRAIN_MAX_BYTES,
    train_limit: int = TRAIN_LIMIT,
) -> Built:
    """Convert the MetaTool folder ``data`` into ``out``; what was kept."""
    _find(data, "LICENSE")  # checked first: a build without the licence must not leave half a folder
    tools = read_tools(data)
    rows = read_rows(data)
    kept, dropped = clean(rows, tools)
    test_all, train_all = split(kept)
    ids = [query_id(q) for q, _ in test_all]
    if len(set(ids)) != len(ids):  # 48 bits of sha1 for ~20,000 queries: never expected, but never silent
        raise SystemExit("error: two test queries share an id prefix; lengthen query_id")
    built = Built(len(tools), len(rows), len(kept), dropped, len(test_all), len(train_all),
                  test_all[test_from : test_from + test_limit])  # fmt: skip
    train = train_all
    if sum(len(train_line(q, t).encode("utf-8")) for q, t in train) > train_max_bytes:
        train, built.train_sampled = train[:train_limit], True
    built.train = train

    out.mkdir(parents=True, exist_ok=True)
    catalog = {"tools": [{"name": name, "description": text, "tags": []} for name, text in tools.items()]}
    (out / "catalog.json").write_text(json.dumps(catalog, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    with (out / "train.ndjson").open("w", encoding="utf-8") as handle:
        handle.writelines(train_line(q, t) for q, t in train)
    queries = [EvalQuery(id=query_id(q), query=q, relevant={document_id(t): 1}, tags=["tools"]) for q, t in built.test]
    meta = EvalSetMeta(
        name=NAME,
        description="Tool search: which of MetaTool's 199 tools (catalog.json) a request needs; one relevant "
        "tool per query (the test split, train.ndjson is the training split).",
        source=f"{REPOSITORY} at {COMMIT}, `{QUERIES_PATH}` and `{CATALOG_PATH}`; "
        "converted by tools/build_tool_eval_set.py",
        license=LICENSE_TEXT,
        attribution=ATTRIBUTION,
        queries=len(queries),
        sources=[SOURCE_NAME],
        tags=["tools"],
    )
    write_eval_set(out, meta, queries)
    # MIT asks for the notice in every copy: the licence travels with the data.
    shutil.copyfile(_find(data, "LICENSE"), out / "LICENSE")
    notice = next(
        (
            line.strip()
            for line in (out / "LICENSE").read_text(encoding="utf-8").splitlines()
            if line.strip().startswith("Copyright")
        ),
        "no copyright line",
    )
    (out / "README.md").write_text(_readme(built, notice), encoding="utf-8")
    return built


def _per_tool(pairs: Sequence[tuple[str, str]]) -> str:
    counts = sorted(Counter(t for _, t in pairs).values())
    if not counts:
        return "none"
    return f"{len(counts)} tools, queries per tool min {counts[0]}, median {counts[len(counts) // 2]}, max {counts[-1]}"


def _readme(built: Built, notice: str) -> str:
    drops = "; ".join(f"{n:,} {why}" for why, n in sorted(built.dropped.items())) or "none"
    train_rule = (
        f"the {len(built.train):,} of smallest sha1 (the whole split's compact JSONL would pass "
        f"{TRAIN_MAX_BYTES / 1e6:g} MB)"
        if built.train_sampled
        else "all of them"
    )
    return f"""# tools_metatool

Tool-search eval set: which of {built.tools} tools a request needs, from MetaTool's ToolE single-tool queries.
Built by `tools/build_tool_eval_set.py` (its docstring has the rules); do not edit by hand.

| file | what |
|---|---|
| `catalog.json` | the {built.tools} tools as a tool catalog (name, description, no tags) |
| `{NAME}.jsonl`, `{NAME}.meta.json` | {len(built.test):,} test queries, each with one relevant tool \
`tools:catalog:<name>` |
| `train.ndjson` | {len(built.train):,} training queries, `{{"query", "tool"}}` per line: only for simulating usage \
and success (`bench/tool_search.py`), never scored |
| `LICENSE` | MetaTool's licence, verbatim |

- Source: {REPOSITORY} at `{COMMIT}`: `{CATALOG_PATH}` (tool name → description) and `{QUERIES_PATH}`
  (columns `Query,Tool`).
- Licence: MIT, "{notice}" (`LICENSE`). Attribution: "{ATTRIBUTION}".
  Cite: Huang et al., "MetaTool Benchmark: Deciding Whether to Use Tools and Which to Use", arXiv:2310.03128.
- Caveats: the tool descriptions are one-liners taken from the OpenAI plugin store (third-party text); the
  queries were generated by ChatGPT and GPT-4, not written by users; MetaTool has **no argument schemas**, so
  every tool's input schema is empty and search sees only its name and description. Many queries paraphrase
  their tool's description closely, and near-duplicate queries can fall on both sides of the split.
- Split: whitespace collapsed; a query text labelled with several tools dropped; repeated (query, tool) rows kept
  once; test when `int(sha1(query), 16) % 5 == 0`, else train.
- Counts: {built.rows:,} CSV rows, {built.distinct:,} distinct single-label queries (dropped: {drops}).
  Test split {built.test_all:,} queries, of which the {len(built.test):,} of smallest sha1 are kept
  ({_per_tool(built.test)}). Training split {built.train_all:,} queries, of which {train_rule} are kept
  ({_per_tool(built.train)}).

Index and score it:

    .venv/bin/rag-pipeline index --data-dir /tmp/tools_metatool --tools-catalog eval_sets/tools_metatool/catalog.json \\
        --source tools --language english
    .venv/bin/python -m bench.tool_search     # every tool-search mode, usage and success simulated from train.ndjson
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", type=Path, help="a MetaTool checkout (or a flat copy of its two data files)")
    parser.add_argument("out", type=Path, help="the eval set's folder, e.g. eval_sets/tools_metatool")
    parser.add_argument(
        "--held-out",
        action="store_true",
        help=f"write the test queries after the first {TEST_LIMIT} instead (by sha1, ~3,100): the independent check "
        "of choices made looking at the committed set; not committed",
    )
    args = parser.parse_args(argv)
    built = (
        build(args.data, args.out, test_from=TEST_LIMIT, test_limit=10**9)
        if args.held_out
        else build(args.data, args.out)
    )
    print(
        f"wrote {args.out}: {built.tools} tools, {len(built.test)} test and {len(built.train)} training queries",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
