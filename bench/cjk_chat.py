"""Korean and Chinese chat threads: every arm under each language setting, against plain bm25s anchors.

For each chat set (a Slack export whose thread roots are deleted, and its known-item queries: the opening
question finds its thread from the replies, see tools/build_dialogue_eval_sets.py) and each ``--language``
(english, cjk, korean, auto), the real CLI indexes the export into a fresh data folder and ``rag-pipeline bench``
scores vector / bm25 / hybrid / reranked / prf (nDCG@10 with 95 % bootstrap CIs). ``auto`` is indexed too (its
choice is recorded); its arms are scored again only when it chose a setting not run here, since the same choice
builds the same index. Beside them, plain bm25s anchors over the same thread texts, with no chunking, fielding or
tuning (k1=1.5, b=0.75): character bigrams, unigrams and, for Korean, mecab-ko content morphemes (and Kiwi's,
when ``kiwipiepy`` is installed; it is not a dependency).

    .venv/bin/python -m bench.cjk_chat                                  # the Korean help-desk set
    .venv/bin/python -m bench.cjk_chat --kdconv /path/to/KdConv/data    # plus Chinese KdConv (not shipped)

KdConv (Apache-2.0) is not committed; pass a checkout's ``data/`` folder (``film/dev.json`` ...) and its
``LICENSE`` beside it, and the set is built into the work folder. Results: bench/results/cjk_chat.json and a
markdown table on stdout.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

from bench import common
from rag_pipeline.connectors.slack.export import SlackExportReader
from rag_pipeline.evaluation.metrics import per_query_metrics
from rag_pipeline.evaluation.statistics import bootstrap_ci
from rag_pipeline.text.korean import content_morphemes
from rag_pipeline.vectors.sparse import _CJK_RUN, cjk_bigrams
from tools.build_dialogue_eval_sets import SOURCES, build

LANGUAGES = ("english", "cjk", "korean", "auto")
ARMS = ("vector", "bm25", "hybrid", "reranked", "prf")
_WORD = re.compile(r"\w+")


def _bigrams(text: str) -> list[str]:
    return _WORD.findall(cjk_bigrams(text).lower())


def _unigrams(text: str) -> list[str]:
    return _WORD.findall(_CJK_RUN.sub(lambda m: " " + " ".join(m.group(0)) + " ", text).lower())


def _kiwi() -> Callable[[str], list[str]] | None:
    try:
        from kiwipiepy import Kiwi  # optional: measured for the notes, not a dependency
    except ImportError:
        return None
    kiwi = Kiwi(num_workers=1)
    keep = ("NNG", "NNP", "NR", "XR", "VV", "VA", "SL", "SN", "SH")
    return lambda text: [t.form.lower() for t in kiwi.tokenize(text) if t.tag.startswith(keep)]


def anchors(export: Path, team: str, queries: list[dict[str, Any]], korean: bool) -> dict[str, Any]:
    """nDCG@10 (mean and CI) of plain bm25s over whole threads, per tokenization."""
    documents = SlackExportReader(export, team).read().documents
    ids = [d.id for d in documents]
    tokenizers: dict[str, Callable[[str], list[str]]] = {"bigrams": _bigrams, "unigrams": _unigrams}
    if korean:
        tokenizers["morphemes (mecab-ko)"] = content_morphemes
        kiwi = _kiwi()
        if kiwi is not None:
            tokenizers["morphemes (kiwi)"] = kiwi
    qrels = {q["id"]: q["relevant"] for q in queries}
    out = {}
    for name, tokenize in tokenizers.items():
        engine = bm25s.BM25(k1=1.5, b=0.75)
        engine.index([tokenize(d.text) for d in documents], show_progress=False)
        found, scores = engine.retrieve([tokenize(q["query"]) for q in queries], k=100, show_progress=False)
        run = {
            q["id"]: {ids[int(d)]: float(s) for d, s in zip(found[i], scores[i], strict=True)}
            for i, q in enumerate(queries)
        }
        values = per_query_metrics(qrels, run)["ndcg@10"].to_numpy()
        low, high = bootstrap_ci(values)
        out[name] = {"ndcg@10": round(float(np.mean(values)), 4), "ci95": [round(low, 4), round(high, 4)]}
    return out


def index_and_score(
    export: Path, team: str, eval_set: Path, language: str, folder: Path, scored: set[str]
) -> dict[str, Any]:
    """Index ``export`` with ``--language`` into a fresh ``folder``; the recorded choice and, unless that choice's
    arms were scored already (in ``scored``: the same models build the same index), the figures of every arm."""
    shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    common.rag_pipeline("index", "--data-dir", str(folder), "--slack-export", str(export), "--slack-team", team,
                        "--source", "slack", "--language", language)  # fmt: skip
    result: dict[str, Any] = {"index_seconds": round(time.perf_counter() - started, 1)}
    result["choice"] = json.loads((folder / "language.json").read_text(encoding="utf-8"))
    if result["choice"]["language"] in scored:
        result["same_index_as"] = result["choice"]["language"]
    else:
        started = time.perf_counter()
        done = common.rag_pipeline(
            "bench", "--data-dir", str(folder), "--eval-set", str(eval_set), "--arms", *ARMS, "--json"
        )
        figures = json.loads(done.stdout)
        result["bench_seconds"] = round(time.perf_counter() - started, 1)
        result["arms"] = {
            arm: {"ndcg@10": round(v["ndcg@10"], 4), "ci95": [round(x, 4) for x in v["ci95"]["ndcg@10"]]}
            for arm, v in figures["arms"].items()
        }
        result["queries"] = figures["queries"]
        result["machine"] = figures.get("machine")
    return result


def run_set(name: str, folder: Path, team: str, work: Path, languages: list[str]) -> dict[str, Any]:
    export, eval_set = folder / "export.zip", folder / f"{name}.jsonl"
    queries = [json.loads(line) for line in eval_set.read_text(encoding="utf-8").splitlines() if line.strip()]
    print(f"{name}: anchors …", file=sys.stderr, flush=True)
    result: dict[str, Any] = {"anchors": anchors(export, team, queries, korean=name.startswith("ko")), "settings": {}}
    for language in languages:
        scored = {s["choice"]["language"] for s in result["settings"].values() if "arms" in s}
        print(f"{name}: --language {language} …", file=sys.stderr, flush=True)
        figures = index_and_score(export, team, eval_set, language, work / f"{name}-{language}", scored)
        result["settings"][language] = figures
    return result


def table(results: dict[str, Any]) -> str:
    lines = ["| set | setting (chosen) | " + " | ".join(ARMS) + " |", "|---|---|" + "---:|" * len(ARMS)]
    for name, result in results.items():
        if name == "run":
            continue
        for language, figures in result["settings"].items():
            chosen = figures["choice"]["language"]
            arms = figures.get("arms") or result["settings"].get(chosen, {}).get("arms", {})
            cells = [f"{arms[a]['ndcg@10']:.3f}" for a in ARMS if a in arms]
            lines.append(f"| {name} | {language} ({chosen}) | " + " | ".join(cells) + " |")
        for anchor, figures in result["anchors"].items():
            ci = figures["ci95"]
            lines.append(f"| {name} | bm25s {anchor} | {figures['ndcg@10']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] |")
    return "\n".join(lines)


def main() -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--kdconv", type=Path, help="KdConv's data/ folder (with LICENSE copied into it)")
    parser.add_argument("--languages", nargs="+", choices=LANGUAGES, default=list(LANGUAGES))
    parser.add_argument("--work", type=Path, default=Path("/tmp/rag-cjk-chat"), help="data folders (rebuilt)")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "cjk_chat.json")
    args = parser.parse_args()
    sets = {"ko_helpdesk": (common.EVAL_SETS / "ko_helpdesk", SOURCES["ko-helpdesk"].team)}
    if args.kdconv:
        built = build("zh-kdconv", args.kdconv, args.work / "sets")
        sets["zh_kdconv"] = (built, SOURCES["zh-kdconv"].team)
    results: dict[str, Any] = {"run": common.run_record()}
    for name, (folder, team) in sets.items():
        results[name] = run_set(name, folder, team, args.work, args.languages)
        common.write_json(args.out, results)
    print(table(results))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
