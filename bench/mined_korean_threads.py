"""Does the thread miner reproduce a human-built Korean known-item set? The bundled Korean help-desk export
(``eval_sets/ko_helpdesk``) deletes each thread's opening question, and ``ko_helpdesk.jsonl`` asks it: the set was
built so the thread must be found by its replies. This bench puts the questions back as the threads' roots (a
company's export, as it would look), indexes both exports, and compares the bundled set on the deleted-root index
with the ``threads`` miner's set on the rooted index, where the mask (not the data) hides each question.

    .venv/bin/python -m bench.mined_korean_threads [--work /tmp/rag_ko_threads]

Both sets run as everyone, as the bundled set does (no principal). Reports per arm nDCG@10 with 95 % CIs on both,
whether the mined figure lies inside the bundled CI, and Kendall's tau between the arm orders; then the same mined
queries after every sampled thread's original is deleted from the scratch index (``mined_on_bundled_corpus``: the
copies compete question-less, as the bundled export's threads do), which isolates the construction from the corpus.
Results: ``bench/results/mined_korean_threads.json``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

from scipy import stats

from bench.common import EVAL_SETS, RESULTS, ROOT, parser, run_record, write_json
from rag_pipeline.composition import open_index
from rag_pipeline.evaluation.eval_set import load_eval_set, write_eval_set
from rag_pipeline.retrieval.results import MODES
from rag_pipeline.runs.evaluation import run_evaluation
from rag_pipeline.runs.mining import mine_data_folder
from rag_pipeline.settings import Settings

BUNDLED = EVAL_SETS / "ko_helpdesk"
METRIC = "ndcg@10"
TEAM = "T0KOHELPDK"  # the bundled export's workspace (its users carry no team id)


def rooted_export(target: Path) -> int:
    """The bundled export with each deleted root replaced by the question ``ko_helpdesk.jsonl`` asks of it."""
    questions = {}
    for query in load_eval_set(BUNDLED / "ko_helpdesk.jsonl"):
        (thread,) = query.relevant
        questions[thread.rsplit(":", 1)[1]] = query.query
    with zipfile.ZipFile(BUNDLED / "export.zip") as archive:
        archive.extractall(target)
    restored = 0
    for day in sorted(target.glob("*/*.json")):
        messages = json.loads(day.read_text(encoding="utf-8"))
        askers = {m.get("thread_ts"): m.get("parent_user_id") for m in messages if m.get("parent_user_id")}
        for i, message in enumerate(messages):
            question = questions.get(str(message.get("ts")))
            if message.get("subtype") == "tombstone" and question:
                messages[i] = {"type": "message", "user": askers.get(message["ts"]) or "U0KA0000", "text": question,
                               "ts": message["ts"], "thread_ts": message["ts"],
                               "reply_count": message.get("reply_count", 0)}  # fmt: skip
                restored += 1
        day.write_text(json.dumps(messages, ensure_ascii=False), encoding="utf-8")
    return restored


def index(export: Path, data: Path) -> float:
    started = time.perf_counter()
    command = [sys.executable, "-m", "rag_pipeline.cli", "index", "--slack-export", str(export), "--slack-team",
               TEAM, "--data-dir", str(data), "--json"]  # fmt: skip
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def figures(summary: Any) -> dict[str, dict[str, Any]]:
    return {
        arm: {"ndcg@10": round(summary.arms[arm].means[METRIC], 4),
              "ci95": [round(v, 4) for v in summary.arms[arm].ci95[METRIC]]}
        for arm in [*MODES, *(a for a in summary.arms if a not in MODES)]
        if arm in summary.arms
    }  # fmt: skip


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--work", type=Path, default=Path("/tmp/rag_ko_threads"), help="scratch folder (replaced)")
    options = args.parse_args()
    shutil.rmtree(options.work, ignore_errors=True)
    options.work.mkdir(parents=True)
    restored = rooted_export(options.work / "rooted_export")
    seconds = {
        "index_deleted_roots": index(BUNDLED / "export.zip", options.work / "deleted"),
        "index_rooted": index(options.work / "rooted_export", options.work / "rooted"),
    }
    bundled_dir = options.work / "bundled_set"
    bundled_dir.mkdir()
    for name in ("ko_helpdesk.jsonl", "ko_helpdesk.meta.json"):
        shutil.copy(BUNDLED / name, bundled_dir / name)
    deleted = Settings.from_env().with_data_dir(options.work / "deleted")
    t0 = time.perf_counter()
    human = run_evaluation(deleted.model_copy(update={"eval_dir": bundled_dir}), force=True).summaries["ko_helpdesk"]
    seconds["evaluate_bundled"] = time.perf_counter() - t0
    rooted = Settings.from_env().with_data_dir(options.work / "rooted")
    t0 = time.perf_counter()
    report, sets = mine_data_folder(rooted, miners=["threads"], run_as="everyone")
    seconds["mine"] = time.perf_counter() - t0
    human_f = figures(human)
    out: dict[str, Any] = {
        **run_record(),
        "restored_roots": restored,
        "mining": report.summary(),
        "bundled": human_f,
    }
    if "mined_threads" not in report.eval_sets:
        # Every question shares its thread's only BM25 vector (a CJK index scores threads whole): nothing to compare.
        out.update(mined=None, seconds={k: round(v, 1) for k, v in seconds.items()})
        write_json(RESULTS / "mined_korean_threads.json", out)
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return
    t0 = time.perf_counter()
    mined = run_evaluation(rooted.model_copy(update={"eval_dir": sets.sets_dir}), force=True).summaries["mined_threads"]
    seconds["evaluate_mined"] = time.perf_counter() - t0
    mined_f = figures(mined)
    # The same queries on the bundled set's corpus: every sampled thread's original (question included) deleted from
    # this scratch index, so the copies compete as the bundled export's root-deleted threads do. (Leaving the
    # originals out of the results instead is no substitute: the hybrid arms fuse the lists in the engine before
    # anything is left out, so the left-out originals still move every rank.) What is left to differ is the
    # construction itself.
    alike_dir = options.work / "like_bundled"
    meta, queries = report.eval_sets["mined_threads"]
    originals = sorted({d for q in queries for d in q.exclude if not d.endswith("#masked-question")})
    with open_index(rooted) as store:
        for collection in (store.names.children, store.names.parents):
            store.delete_documents(collection, originals)
    alike = [q.model_copy(update={"exclude": []}) for q in queries]
    write_eval_set(alike_dir, meta.model_copy(update={"name": "mined_threads_like_bundled"}), alike)
    t0 = time.perf_counter()
    like = run_evaluation(rooted.model_copy(update={"eval_dir": alike_dir}), force=True).summaries[
        "mined_threads_like_bundled"
    ]
    seconds["evaluate_like_bundled"] = time.perf_counter() - t0
    like_f = figures(like)
    like_tau = stats.kendalltau([human_f[a]["ndcg@10"] for a in MODES], [like_f[a]["ndcg@10"] for a in MODES])
    tau = stats.kendalltau([human_f[a]["ndcg@10"] for a in MODES], [mined_f[a]["ndcg@10"] for a in MODES])
    within = {a: human_f[a]["ci95"][0] <= mined_f[a]["ndcg@10"] <= human_f[a]["ci95"][1] for a in MODES}
    out |= {
        "queries": {"bundled": human.queries, "mined": mined.queries},
        "mined": mined_f,
        "mined_on_bundled_corpus": like_f,
        "like_bundled_within_bundled_ci": {
            a: human_f[a]["ci95"][0] <= like_f[a]["ndcg@10"] <= human_f[a]["ci95"][1] for a in MODES
        },
        "like_bundled_kendall_tau": round(float(like_tau.statistic), 3),
        "mined_within_bundled_ci": within,
        "kendall_tau": round(float(tau.statistic), 3),
        "order": {"bundled": sorted(MODES, key=lambda a: -human_f[a]["ndcg@10"]),
                  "mined": sorted(MODES, key=lambda a: -mined_f[a]["ndcg@10"])},
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
    }  # fmt: skip
    write_json(RESULTS / "mined_korean_threads.json", out)
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
