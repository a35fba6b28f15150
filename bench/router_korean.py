"""The search router on Korean questions (issue 65, item 3): ``routed`` against ``hybrid`` on a routed set built
from the bundled Korean help-desk threads, where the date, channel and product words of a question are true.

    .venv/bin/python -m bench.router_korean            # ~10 min on 2 cores: re-dates, indexes, scores

What it builds (deterministic but for "today"): the bundled export (``eval_sets/ko_helpdesk/export.zip``, 499
threads over 63 days in two channels) moved whole days forward so its last day is today, so each thread has an
age a question can name; then every eval question in five forms, each judged relevant for its one thread:

- ``plain``: the question as it is (the control: routed must equal hybrid, no hint applies);
- ``date``: the question after the date words true of its thread: 오늘 (today), 어제, 그저께, the weekday's name
  for 3–6 days back (금요일에 …), 지난주 for 7–13 days, 지난달 for older threads (a window that covers the corpus,
  so it narrows nothing: those queries measure the date words' own cost);
- ``narrowing``: the ``date`` queries whose hint leaves a window shorter than the corpus (≤ 13 days back);
- ``channel``: the question after its thread's channel (``갤럭시-문의 채널에서 …``, ``#아이폰-문의 …``);
- ``source``: the question after "슬랙에서" (the only source indexed here: routed must equal hybrid).

Each form goes through ``rag-pipeline bench --arms hybrid routed --baseline hybrid``: nDCG@10 with bootstrap 95 %
CIs and a paired randomization test (p). Results: bench/results/router_korean.json.
"""

from __future__ import annotations

import io
import json
import random
import re
import sys
import zipfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd

from bench import common
from bench.common import RESULTS, ROOT, parser, run_record, write_json
from bench.router import bench_set
from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, load_eval_set, load_eval_set_meta, write_eval_set

KO_HELPDESK = ROOT / "eval_sets" / "ko_helpdesk"
TEAM = "T0KOHELPDK"
SLACK_TS = re.compile(r"\b(1[0-9]{9})\.([0-9]{6})\b")
DAY_FILE = re.compile(r"^(?P<channel>[^/]+)/(?P<day>\d{4}-\d{2}-\d{2})\.json$")
WEEKDAY_WORDS = ("월요일에", "화요일에", "수요일에", "목요일에", "금요일에", "토요일에", "일요일에")
CHANNEL_FORMS = ("{name} 채널에서", "#{name}", "{name} 채널에 올라온")


def redate_export(source: Path, target: Path, today: date) -> tuple[int, dict[str, str]]:
    """Copy the export moved forward by whole days so that its last day is ``today``; the days moved and the old
    thread timestamp → new one (document ids carry it)."""
    with zipfile.ZipFile(source) as archive:
        days = [date.fromisoformat(m["day"]) for n in archive.namelist() if (m := DAY_FILE.match(n))]
        shift = (today - max(days)).days
        seconds = shift * 86400
        moved: dict[str, str] = {}

        def move(match: re.Match[str]) -> str:
            new = f"{int(match.group(1)) + seconds}.{match.group(2)}"
            moved[match.group(0)] = new
            return new

        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as out:
            for name in archive.namelist():
                data = archive.read(name)
                found = DAY_FILE.match(name)
                if found:
                    day = date.fromisoformat(found["day"]) + timedelta(days=shift)
                    name = f"{found['channel']}/{day.isoformat()}.json"
                    data = SLACK_TS.sub(move, data.decode("utf-8")).encode("utf-8")
                out.writestr(name, data)
    target.write_bytes(buffer.getvalue())
    return shift, moved


def _channels(export: Path) -> dict[str, str]:
    with zipfile.ZipFile(export) as archive:
        return {c["id"]: c["name"] for c in json.loads(archive.read("channels.json"))}


def date_words(thread_day: date, today: date) -> tuple[str, bool]:
    """The date words true of a thread posted on ``thread_day`` and whether their window is shorter than the
    corpus (63 days)."""
    age = (today - thread_day).days
    if age == 0:
        return "오늘", True
    if age == 1:
        return "어제", True
    if age == 2:
        return "그저께", True
    if age <= 6:
        return WEEKDAY_WORDS[thread_day.weekday()], True
    if age <= 13:
        return "지난주에", True
    return "지난달에", False


def build_routed_set(export: Path, moved: dict[str, str], today: date, folder: Path) -> dict[str, Path]:
    """The five forms of every bundled Korean question, each its own eval set (one folder each)."""
    rng = random.Random(65)
    channels = _channels(export)
    base = load_eval_set(KO_HELPDESK / "ko_helpdesk.jsonl")
    base_meta = load_eval_set_meta(KO_HELPDESK / "ko_helpdesk.jsonl")
    forms: dict[str, list[EvalQuery]] = {name: [] for name in ("plain", "date", "narrowing", "channel", "source")}
    for query in base:
        ((old_id, grade),) = query.relevant.items()
        _, team, channel, old_ts = old_id.split(":")
        new_ts = moved[old_ts]
        thread_id = f"slack:{team}:{channel}:{new_ts}"
        thread_day = datetime.fromtimestamp(float(new_ts), UTC).date()
        words, narrows = date_words(thread_day, today)
        channel_words = rng.choice(CHANNEL_FORMS).format(name=channels[channel])
        texts = {
            "plain": query.query,
            "date": f"{words} {query.query}",
            "channel": f"{channel_words} {query.query}",
            "source": f"슬랙에서 {query.query}",
        }
        if narrows:
            texts["narrowing"] = texts["date"]
        for form, text in texts.items():
            forms[form].append(EvalQuery(id=f"{form}-{query.id}", query=text, relevant={thread_id: grade}))
    paths = {}
    for form, queries in forms.items():
        meta = EvalSetMeta(
            name=f"ko_routed_{form}",
            description=f"Korean help-desk questions ({form} form, bench/router_korean.py), re-dated to {today}.",
            source=base_meta.source,
            license=base_meta.license,
            attribution=base_meta.attribution,
            queries=len(queries),
        )
        paths[form] = write_eval_set(folder / form, meta, queries)
    return paths


def score(path: Path, data_dir: Path, out: Path) -> dict[str, Any]:
    """bench.router's figures for one form, and how many questions routed ranks better or worse than hybrid."""
    figures = bench_set(path, data_dir, out)
    per_query = pd.concat(pd.read_parquet(p) for p in out.rglob("per_query.parquet"))
    wide = per_query.pivot_table(index="query_id", columns="arm", values="ndcg@10")
    figures["routed_better"] = int((wide["routed"] > wide["hybrid"] + 1e-9).sum())
    figures["routed_worse"] = int((wide["routed"] < wide["hybrid"] - 1e-9).sum())
    return figures


def main() -> int:
    args = _parser().parse_args()
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    today = datetime.now(UTC).date()
    export = work / "export.zip"
    shift, moved = redate_export(KO_HELPDESK / "export.zip", export, today)
    sets = build_routed_set(export, moved, today, work / "sets")
    data_dir = work / "data"
    if not (data_dir / "qdrant").exists():
        print(f"indexing the re-dated export (+{shift} days) into {data_dir} …", file=sys.stderr, flush=True)
        common.rag_pipeline("index", "--data-dir", str(data_dir), "--slack-export", str(export), "--slack-team",
                            TEAM, "--source", "slack", "--language", "korean")  # fmt: skip
    results = {}
    for form, path in sets.items():
        results[form] = score(path, data_dir, work / "out" / form)
        arms = results[form]["arms"]
        n = results[form]["queries"]
        print(f"{form:>9} ({n}): hybrid {arms['hybrid']['ndcg@10']} {arms['hybrid']['ci95']}"
              f"  routed {arms['routed']['ndcg@10']} {arms['routed']['ci95']} p={arms['routed']['p_vs_hybrid']}"
              f"  better {results[form]['routed_better']} worse {results[form]['routed_worse']}",
              flush=True)  # fmt: skip
    write_json(args.output, {**run_record(), "today": today.isoformat(), "days_moved": shift, "forms": results})
    return 0


def _parser() -> Any:
    p = parser(__doc__)
    p.add_argument("--work", type=Path, default=Path("/tmp/rag_router_korean"), help="folder for the export, "
                   "the eval sets and the index (an index already there is reused)")  # fmt: skip
    p.add_argument("--output", type=Path, default=RESULTS / "router_korean.json")
    return p


if __name__ == "__main__":
    raise SystemExit(main())
