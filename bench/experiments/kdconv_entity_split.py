"""Why the Chinese chat set (KdConv) caps every arm: the queries name an entity their thread often never names.

KdConv's opening questions are "do you know <film / singer / place>?"; the thread that follows talks about it
without naming it in 60 % of the dialogues, so finding it takes world knowledge (who directed which film), not
tokenization. This splits the queries by whether the entity the question names (between 《》/【】, else after
知道/看过/听过 …) appears in the relevant thread's indexed text, and prints each arm's nDCG@10 per group beside
the plain bm25s bigram anchor (k1 = 1.5, b = 0.75, whole threads), and, where it appears, by how many threads
name it.

    .venv/bin/python -m tools.build_dialogue_eval_sets zh-kdconv <KdConv>/data /tmp/zhsets
    .venv/bin/rag-pipeline index --data-dir /tmp/zh-cjk --slack-export /tmp/zhsets/zh_kdconv/export.zip \
        --slack-team T0ZHKDCONV --source slack --language cjk
    .venv/bin/rag-pipeline bench --data-dir /tmp/zh-cjk --eval-set /tmp/zhsets/zh_kdconv/zh_kdconv.jsonl \
        --arms vector bm25 hybrid reranked --out /tmp/zh-bench
    .venv/bin/python -m bench.experiments.kdconv_entity_split /tmp/zhsets/zh_kdconv /tmp/zh-bench/per_query.parquet
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import bm25s
import numpy as np
import pandas as pd

from bench.cjk_chat import _bigrams
from rag_pipeline.connectors.slack.export import SlackExportReader
from tools.build_dialogue_eval_sets import SOURCES

_QUOTED = re.compile(r"[《【“\"](.+?)[》】”\"]")
_AFTER_VERB = re.compile(
    r"(?:知道|看过|听过|听说过|去过|了解|喜欢|认识|玩过)(?:一下|过)?(.+?)(?:这|吗|么|嘛|那|的|？|\?|$)"
)


def named_entity(question: str) -> str | None:
    """The entity an opening question asks about, or None when no pattern finds one of 2+ characters."""
    found = _QUOTED.search(question) or _AFTER_VERB.search(question)
    name = found.group(1).strip("，, 。") if found else ""
    return name if len(name) >= 2 else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("set_folder", type=Path, help="the built zh_kdconv folder (export.zip, zh_kdconv.jsonl)")
    parser.add_argument("per_query", type=Path, help="per_query.parquet written by rag-pipeline bench --out")
    args = parser.parse_args()
    team = SOURCES["zh-kdconv"].team
    texts = {d.id: d.text for d in SlackExportReader(args.set_folder / "export.zip", team).read().documents}
    lines = (args.set_folder / "zh_kdconv.jsonl").read_text(encoding="utf-8").splitlines()
    queries = [json.loads(line) for line in lines if line.strip()]
    group, naming = {}, {}
    for query in queries:
        entity, relevant = named_entity(query["query"]), next(iter(query["relevant"]))
        if entity is None:
            group[query["id"]] = "no entity found"
        elif entity in texts[relevant]:
            group[query["id"]] = "entity in its thread"
            naming[query["id"]] = min(3, sum(entity in text for text in texts.values()))
        else:
            group[query["id"]] = "entity not in its thread"
    ids = list(texts)
    engine = bm25s.BM25(k1=1.5, b=0.75)
    engine.index([_bigrams(texts[i]) for i in ids], show_progress=False)
    anchor = {}
    for query in queries:
        top = np.argsort(-engine.get_scores(_bigrams(query["query"])))[:10]
        relevant = next(iter(query["relevant"]))
        anchor[query["id"]] = next((1 / np.log2(r + 2) for r, i in enumerate(top) if ids[i] == relevant), 0.0)
    frame = pd.read_parquet(args.per_query)
    frame["group"] = frame.query_id.map(group)
    table = frame.pivot_table(index="group", columns="arm", values="ndcg@10", aggfunc="mean")
    table["bm25s bigrams"] = pd.Series(anchor).groupby(pd.Series(group)).mean()
    table["queries"] = pd.Series(group).value_counts()
    print(table.round(3).to_string())
    in_thread = frame[frame.query_id.isin(naming)].assign(threads_naming_it=lambda f: f.query_id.map(naming))
    print("\nentity in its thread, by how many threads name it (3 = 3 or more):")
    by_count = in_thread.pivot_table(index="threads_naming_it", columns="arm", values="ndcg@10", aggfunc="mean")
    print(by_count.round(3).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
