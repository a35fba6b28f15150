"""Evaluation assets: ``reranker_model``, ``retrieval_eval`` (a partition per arm) and ``retrieval_eval_report``."""

import base64
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import dagster as dg

from rag_pipeline.defs.automation import daily_eval_condition
from rag_pipeline.defs.chain.assets import QDRANT_POOL
from rag_pipeline.defs.chain.resources import Bm25Resource, DenseEmbedderResource, QdrantResource
from rag_pipeline.defs.evaluation.jobs import build_eval_jobs
from rag_pipeline.defs.evaluation.resources import EvaluationResource
from rag_pipeline.defs.executors import QDRANT_QUEUE, step_tags
from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, load_eval_set_meta
from rag_pipeline.evaluation.evaluate import headline_figures, summarize_outcomes
from rag_pipeline.evaluation.feedback_set import FEEDBACK_SET, GateResult, feedback_gate
from rag_pipeline.evaluation.parallel import EvalUnit, describe_shares, evaluate_sets, evaluation_workers
from rag_pipeline.evaluation.progress import eval_set_progress
from rag_pipeline.evaluation.report import markdown_table, write_report
from rag_pipeline.evaluation.report_store import ReportChecks, ReportStore
from rag_pipeline.evaluation.run_files import (
    eval_set_fingerprint,
    load_arm_outcome,
    run_fingerprint,
    run_path,
    save_arm_outcome,
)
from rag_pipeline.evaluation.runner import (
    REWRITTEN_ARM,
    TEMPORAL_ARM,
    ArmOutcome,
    rerank_examples,
    run_arm,
    run_rewritten_arm,
)
from rag_pipeline.evaluation.summary import EvalSummary
from rag_pipeline.index.store import VectorStore, describe_fusion
from rag_pipeline.retrieval.calibration import CALIBRATION_FILE, Calibration, calibration_pairs, fit_calibration
from rag_pipeline.retrieval.entry import SearchModels, build_retriever
from rag_pipeline.retrieval.rerank.learned import train_reranker
from rag_pipeline.retrieval.results import MODES, SEARCH_MODES
from rag_pipeline.retrieval.retriever import Retriever
from rag_pipeline.vectors.dense.base import DenseEncoder
from rag_pipeline.vectors.dense.load import load_or_defer

LLM_ARM = "llm_reranked"
# Arms some eval sets have and others not (the reranked arm trained on earlier weeks: mined sets only): reported where
# a current run exists, never missing.
OPTIONAL_ARMS = (TEMPORAL_ARM,)
_COMMON: dict[str, Any] = dict(group_name="evaluation", owners=["team:rag-platform"])


def eval_arm_names(llm_rerank_model: str | None, rewrite_model: str | None = None) -> list[str]:
    """The evaluated arms; the LLM-graded one and the rewritten one exist where their chat model is configured
    (they cost API calls per query, and per candidate for the grades)."""
    return [*MODES, *([LLM_ARM] if llm_rerank_model else []), *([REWRITTEN_ARM] if rewrite_model else [])]


def _retriever(
    store: VectorStore,
    dense: DenseEncoder | Callable[[], DenseEncoder],
    dense_embedder: DenseEmbedderResource,
    bm25: Bm25Resource,
    evaluation: EvaluationResource,
) -> Retriever:
    models = SearchModels(dense_embedder.model_name(), bm25.encoder(), dense=dense, cache=dense_embedder.cache())
    return build_retriever(store, models, evaluation.retriever_config(models))


REPORT_CHECKS = [
    dg.AssetCheckSpec(
        "quality_floor", asset="retrieval_eval_report", description="Every arm's nDCG@10 ≥ its eval set's floor"
    ),
    dg.AssetCheckSpec(
        "no_regression",
        asset="retrieval_eval_report",
        description="No arm's nDCG@10 dropped more than the tolerance since the previous report",
    ),
    dg.AssetCheckSpec(
        "acl_no_leaks",
        asset="retrieval_eval_report",
        description="No query returned a document its principal may not read",
    ),
]


def _image_md(path: Path, alt: str) -> str:
    # The UI cannot read the report folder, so plots travel inside the metadata as data URIs.
    return f"![{alt}](data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()})"


def _report_metadata(name: str, summary: EvalSummary, files: dict[str, Path]) -> dict[str, Any]:
    """One eval set's part of the report's metadata: table and plots, per-arm figures, the CLI's JSON."""
    out: dict[str, Any] = {}
    table = markdown_table(summary)
    out[f"{name}/report"] = dg.MetadataValue.md(
        f"### {name}\n\n{table}\n\n{_image_md(files['ndcg_plot'], 'nDCG@10 per arm')}\n\n"
        f"{_image_md(files['recall_plot'], 'Recall@k per arm')}"
    )
    out[f"{name}/arms"] = dg.MetadataValue.table(
        [
            dg.TableRecord(
                {
                    "arm": arm,
                    "ndcg@10": round(s.means["ndcg@10"], 4),
                    "ci95_low": round(s.ci95["ndcg@10"][0], 4),
                    "ci95_high": round(s.ci95["ndcg@10"][1], 4),
                    "recall@10": round(s.means["recall@10"], 4),
                    "recall@100": round(s.means["recall@100"], 4),
                    "mrr@10": round(s.means["mrr@10"], 4),
                    "map@100": round(s.means["map@100"], 4),
                    "p_vs_baseline": s.p_vs_baseline.get("ndcg@10"),
                    "p50_ms": round(s.p50_ms, 2),
                    "p95_ms": round(s.p95_ms, 2),
                    "leaks": s.leaks,
                }
            )
            for arm, s in summary.arms.items()
        ]
    )
    out[f"{name}/json"] = dg.MetadataValue.json(summary.cli_json())
    return out


@dataclass(frozen=True)
class EvaluationDefinitions:
    """The evaluation's assets, their arms partitions and jobs."""

    arms: dg.StaticPartitionsDefinition
    reranker_model: dg.AssetsDefinition
    retrieval_eval: dg.AssetsDefinition
    retrieval_eval_report: dg.AssetsDefinition
    jobs: list[Any]

    @property
    def assets(self) -> list[dg.AssetsDefinition]:
        return [self.reranker_model, self.retrieval_eval, self.retrieval_eval_report]


def build_evaluation(
    index_assets: Sequence[str], llm_rerank_model: str | None, eval_cron: str, rewrite_model: str | None = None
) -> EvaluationDefinitions:
    """The evaluation over the sources' Qdrant points assets (``index_assets``)."""
    arm_names = eval_arm_names(llm_rerank_model, rewrite_model)
    arms = dg.StaticPartitionsDefinition(arm_names)
    index_deps = [dg.AssetDep(key, partition_mapping=dg.AllPartitionMapping()) for key in index_assets]
    retrieval_eval = retrieval_eval_asset(arms, index_deps, eval_cron)
    report = retrieval_eval_report_asset(retrieval_eval, arm_names)
    return EvaluationDefinitions(
        arms,
        reranker_model_asset(index_deps),
        retrieval_eval,
        report,
        build_eval_jobs(retrieval_eval, report, arms),
    )


def reranker_model_asset(index_deps: list[dg.AssetDep]) -> dg.AssetsDefinition:
    """The learned reranker, trained on the eval sets' labels."""

    @dg.asset(
        deps=index_deps,
        pool=QDRANT_POOL,
        op_tags=step_tags(QDRANT_QUEUE),
        kinds={"lightgbm"},
        description="The learned multi-signal reranker (LightGBM LambdaRank over BM25, dense, fusion, field, recency "
        "and source features) trained on every labelled query of the eval sets; `rag-pipeline search --mode reranked` "
        "uses it: five boosters with different sampling seeds, averaged, with the L2 weight chosen by an inner "
        "cross-validation over the training queries. Versioned by a hash of features, parameters and training labels.",
        **_COMMON,
    )
    def reranker_model(
        context: dg.AssetExecutionContext,
        qdrant: QdrantResource,
        dense_embedder: DenseEmbedderResource,
        bm25: Bm25Resource,
        evaluation: EvaluationResource,
    ) -> dg.MaterializeResult:
        examples = []
        feedback: list[EvalQuery] = []
        gate: GateResult | None = None
        dense = load_or_defer(dense_embedder.encoder)
        with qdrant.open() as store:
            retriever = _retriever(store, dense, dense_embedder, bm25, evaluation)
            for path in evaluation.eval_set_paths():
                meta = load_eval_set_meta(path)
                if "acl" in meta.tags:
                    continue  # the same queries again, restricted: adds no new labels
                queries = [q for q in evaluation.load(path) if q.judged]
                if meta.name == FEEDBACK_SET:
                    feedback = queries  # used only if the gate below says it helps
                    continue
                progress = eval_set_progress(meta.name, lambda update: context.log.info(update.line()))
                examples += rerank_examples(retriever, queries, sources=meta.sources, progress=progress)
                context.log.info(f"{meta.name}: {len(queries)} labelled queries")
            if feedback:
                gate = feedback_gate(retriever, examples, feedback)
                context.log.info(f"readers' feedback: {gate.reason}")
                if gate.used:
                    examples += rerank_examples(retriever, feedback)
        model = train_reranker(
            examples, trained_on=", ".join(p.stem for p in evaluation.eval_set_paths()), encoder=retriever.bm25
        )
        folder = model.save(evaluation.reranker_dir / model.version)
        (evaluation.reranker_dir / "CURRENT").write_text(model.version + "\n")
        importance = model.metadata.get("feature_importance_gain", {})
        top = sorted(importance.items(), key=lambda kv: -kv[1])
        return dg.MaterializeResult(
            metadata={
                "version": model.version,
                "training_queries": model.metadata["training_queries"],
                "skipped_queries": model.metadata["skipped_queries_without_relevant_candidates"],
                "bag": model.metadata["bag"],
                "term_tokenizer": model.metadata["bm25_tokenizer"],  # what the term-overlap features count
                # LightGBM's default (0) when too few labelled queries to choose one by inner cross-validation
                "reg_lambda": float(model.metadata["params"].get("reg_lambda", 0.0)),
                "reg_lambda_inner_ndcg10": dg.MetadataValue.json(
                    {k: round(float(v), 4) for k, v in model.metadata["reg_lambda_inner_ndcg10"].items()}
                ),
                "path": dg.MetadataValue.path(str(folder)),
                # Readers' judgements train the model only when a paired test on later weeks says they help.
                "feedback_gate": dg.MetadataValue.json(gate.as_json() if gate else {"used": False, "reason": "none"}),
                "feature_importance": dg.MetadataValue.md(
                    "| feature | gain |\n|---|---|\n" + "\n".join(f"| {k} | {v:.1f} |" for k, v in top)
                ),
            },
            data_version=dg.DataVersion(model.version),
        )

    return reranker_model


def retrieval_eval_asset(
    arms: dg.StaticPartitionsDefinition, index_deps: list[dg.AssetDep], eval_cron: str
) -> dg.AssetsDefinition:
    """The selected arms (partitions) over every eval set: one arm per run, or every arm in one run (one partition
    range, as the demo and the daily evaluation run them), where the arms of an eval set share their searches."""

    @dg.asset(
        partitions_def=arms,
        deps=index_deps,
        pool=QDRANT_POOL,
        op_tags=step_tags(QDRANT_QUEUE),
        automation_condition=daily_eval_condition(eval_cron),
        backfill_policy=dg.BackfillPolicy.single_run(),
        kinds={"python"},
        description="Retrieval arms run over every eval set: per-query ranked documents, latency and ACL leaks "
        "(parquet under the reports folder). The reranked arm is scored by rerankers cross-fitted on the eval set "
        "(never a model that trained on the query). Several arms in one run share each eval set's searches "
        "(the reranked arm reuses the hybrid arm's lists).",
        **_COMMON,
    )
    def retrieval_eval(
        context: dg.AssetExecutionContext,
        qdrant: QdrantResource,
        dense_embedder: DenseEmbedderResource,
        bm25: Bm25Resource,
        evaluation: EvaluationResource,
    ) -> dg.MaterializeResult:
        selected = list(context.partition_keys)
        metadata: dict[str, Any] = {"arm": ", ".join(selected)}
        llm = evaluation.llm_reranker() if LLM_ARM in selected else None
        rows: list[dg.TableRecord] = []
        failed: list[str] = []
        dense = load_or_defer(dense_embedder.encoder)
        with qdrant.open(exact=evaluation.exact_dense or None) as store:
            metadata["dense_search"] = store.dense_search.describe()
            retriever = _retriever(store, dense, dense_embedder, bm25, evaluation)
            if any(arm != "vector" for arm in selected):
                metadata["sparse_query"] = retriever.config.sparse_query.describe()
            if "prf" in selected:
                metadata["prf"] = retriever.config.prf.describe()
            sets: dict[str, tuple[EvalSetMeta, list[EvalQuery], Path]] = {}
            for path in evaluation.eval_set_paths():
                meta = load_eval_set_meta(path)
                sets[meta.name] = (meta, evaluation.load(path), path)
                if any(arm not in ("vector", "bm25") and (arm != "prf" or retriever.config.prf.hybrid)
                       for arm in selected):  # fmt: skip
                    metadata[f"{meta.name}/fusion"] = describe_fusion(retriever.config.fusion_for(meta.sources))
            # Done/total, rate and ETA at least every 10 s in the step log (and to an in-process command).
            progress = {name: eval_set_progress(name, lambda update: context.log.info(update.line())) for name in sets}
            workers = evaluation_workers(evaluation.workers)

            def planned(shares: list[list[EvalUnit]]) -> None:
                # What each process runs: the step's own first, each other on its copy of the index.
                metadata["eval_workers"] = len(shares)
                metadata["eval_shares"] = dg.MetadataValue.json(describe_shares(shares))
                if len(shares) > 1:
                    context.log.info(
                        f"search arms over {len(shares)} processes (RAG_EVAL_WORKERS {evaluation.workers or 'auto'}); "
                        + " | ".join(describe_shares(shares))
                    )

            arms_run = _arm_results(selected, retriever, sets, evaluation, llm, progress, workers, planned)
            for name, arm, outcome in arms_run:
                meta, queries, path = sets[name]
                if isinstance(outcome, Exception):  # one arm's failure leaves the others' runs (the report names it)
                    context.log.error(f"{name}: arm {arm} failed: {type(outcome).__name__}: {outcome}")
                    failed.append(f"{name}/{arm}")
                    continue
                save_arm_outcome(evaluation.runs_dir, name, outcome, eval_set_fingerprint(path))
                figures = headline_figures(queries, outcome)
                degraded = len(outcome.warnings)
                if degraded:
                    context.log.warning(
                        f"{name} {arm}: {degraded} queries degraded, e.g. {next(iter(outcome.warnings.values()))}"
                    )
                rows.append(
                    dg.TableRecord(
                        {"eval_set": name, "arm": arm, "queries": len(queries), **figures, "degraded_queries": degraded}
                    )
                )
                key = name if len(selected) == 1 else f"{name}/{arm}"
                metadata[f"{key}/ndcg@10"] = figures["ndcg@10"]
        if failed:
            raise dg.Failure(
                f"{len(failed)} arm runs failed ({', '.join(failed)}); the others were saved",
                metadata={"failed": dg.MetadataValue.json(failed)},
            )
        metadata["eval_sets"] = dg.MetadataValue.table(
            rows,
            schema=dg.TableSchema(
                columns=[
                    dg.TableColumn("eval_set", "string"),
                    dg.TableColumn("arm", "string"),
                    dg.TableColumn("queries", "int"),
                    dg.TableColumn("ndcg@10", "float"),
                    dg.TableColumn("recall@100", "float"),
                    dg.TableColumn("p50_ms", "float"),
                    dg.TableColumn("leaks", "int"),
                    dg.TableColumn("degraded_queries", "int"),
                ]
            ),
        )
        if llm is not None:
            metadata.update({f"llm_{k}": v for k, v in vars(llm.usage).items()})
        runs_dir = evaluation.runs_dir / selected[0] if len(selected) == 1 else evaluation.runs_dir
        metadata["runs_dir"] = dg.MetadataValue.path(str(runs_dir))
        return dg.MaterializeResult(metadata=metadata)

    return retrieval_eval


def _arm_results(
    selected: list[str],
    retriever: Retriever,
    sets: dict[str, tuple[EvalSetMeta, list[EvalQuery], Path]],
    evaluation: EvaluationResource,
    llm: Any,
    progress: dict[str, Callable[[str, int, int], None]],
    workers: int,
    on_plan: Callable[[list[list[EvalUnit]]], None],
) -> Iterator[tuple[str, str, ArmOutcome | Exception]]:
    """Every (eval set, arm) outcome or what it raised: the search arms through :func:`evaluate_sets` (over up to
    ``workers`` processes; an eval set's arms share their searches), then per set the rewritten arm with its plans
    and the LLM-graded one with its grades."""
    searched = [arm for arm in selected if arm in SEARCH_MODES]
    yield from evaluate_sets(
        retriever,
        [(name, meta.sources, queries) for name, (meta, queries, _path) in sets.items()],
        searched,
        workers=workers,
        folds=evaluation.folds,
        depth=evaluation.depth,
        model_cache=evaluation.reranker_fits_dir,
        progress_for=progress.get,
        on_plan=on_plan,
    )
    for name, (meta, queries, _path) in sets.items():
        for arm in selected:
            if arm in SEARCH_MODES:
                continue
            try:
                if arm == REWRITTEN_ARM:
                    outcome = run_rewritten_arm(
                        retriever, evaluation.rewriter(), queries, evaluation.depth, meta.sources, progress[name]
                    )
                else:
                    outcome = run_arm(
                        retriever, "reranked", queries, evaluation.depth, meta.sources, llm, LLM_ARM, progress[name]
                    )
            except Exception as exc:
                yield name, arm, exc
                continue
            yield name, arm, outcome


def retrieval_eval_report_asset(retrieval_eval: dg.AssetsDefinition, arm_names: list[str]) -> dg.AssetsDefinition:
    """The arms compared, with the report's checks."""

    @dg.asset(
        deps=[dg.AssetDep(retrieval_eval, partition_mapping=dg.AllPartitionMapping())],
        check_specs=REPORT_CHECKS,
        automation_condition=dg.AutomationCondition.eager(),
        kinds={"markdown"},
        op_tags=step_tags(QDRANT_QUEUE),
        description="The arms compared per eval set: nDCG@10 / Recall / MRR / MAP with bootstrap CIs, paired "
        "randomization tests vs the baseline (Holm-corrected), latency, leaks; markdown, JSON, per-query parquet, "
        "plots.",
        **_COMMON,
    )
    def retrieval_eval_report(context: dg.AssetExecutionContext, evaluation: EvaluationResource):
        store = ReportStore(evaluation.reports_dir)
        baseline = store.baseline()
        stamp = store.new_stamp()
        combined: dict[str, dict] = {}
        metadata: dict[str, Any] = {}
        verdicts = ReportChecks()
        pairs: dict[str, list[tuple[float, bool]]] = {}  # per served mode: (score, judged relevant), all eval sets
        calibrated_sets: list[str] = []
        for path in evaluation.eval_set_paths():
            meta = load_eval_set_meta(path)
            queries = evaluation.load(path)
            fingerprint = eval_set_fingerprint(path)
            current = [
                a
                for a in [*arm_names, *OPTIONAL_ARMS]
                if run_path(evaluation.runs_dir, a, meta.name).exists()
                and run_fingerprint(evaluation.runs_dir, a, meta.name) == fingerprint
            ]
            missing = [a for a in arm_names if a not in current]
            if missing:
                # A missing or stale arm (run on another version of the eval set) must not pass silently.
                verdicts.floor_failures.append(
                    f"{meta.name}: no current run for {', '.join(missing)}; materialize retrieval_eval"
                )
            if not current:
                continue
            outcomes = {a: load_arm_outcome(evaluation.runs_dir, a, meta.name) for a in current}
            judged = {q.id: q.relevant for q in queries}
            for served in (a for a in current if a in MODES):
                pairs.setdefault(served, []).extend(calibration_pairs(outcomes[served].run.rankings, judged))
            calibrated_sets.append(meta.name)
            result = summarize_outcomes(meta, queries, outcomes, baseline=evaluation.baseline)
            files = write_report(
                result.summary,
                result.per_query,
                store.report_dir(stamp, meta.name),
                title=f"Retrieval evaluation: {meta.name}",
            )
            store.publish_latest(stamp, meta.name)
            combined[meta.name] = json.loads(result.summary.model_dump_json())
            metadata.update(_report_metadata(meta.name, result.summary, files))
            for arm, s in result.summary.arms.items():
                verdicts.check_arm(
                    meta.name,
                    arm,
                    s.means["ndcg@10"],
                    s.leaks,
                    evaluation.floor(meta.name),
                    baseline,
                    evaluation.regression_tolerance,
                )
        store.record(stamp, combined, regressed=bool(verdicts.regressions))
        # What min_score means: each mode's score as P(relevant), for the service and the CLI (read on change).
        calibration = fit_calibration(pairs, calibrated_sets)
        path = Path(evaluation.reports_dir) / CALIBRATION_FILE
        previous = Calibration.load(path)
        if previous is not None:  # an evaluation of fewer arms keeps the others' fits
            calibration = replace(calibration, modes={**previous.modes, **calibration.modes})
        calibration.save(path)
        metadata["calibrated_modes"] = dg.MetadataValue.json(
            {m: {"pairs": c.pairs, "relevant": c.positives} for m, c in calibration.modes.items()}
        )
        metadata["report_dir"] = dg.MetadataValue.path(str(store.report_dir(stamp)))
        metadata["eval_sets"] = len(combined)
        yield dg.MaterializeResult(metadata=metadata)
        yield dg.AssetCheckResult(
            check_name="quality_floor",
            passed=not verdicts.floor_failures,
            metadata={
                "failures": dg.MetadataValue.json(verdicts.floor_failures),
                "floors": dg.MetadataValue.json(dict(evaluation.quality_floors)),
            },
        )
        yield dg.AssetCheckResult(
            check_name="no_regression",
            passed=not verdicts.regressions,
            metadata={
                "regressions": dg.MetadataValue.json(verdicts.regressions),
                "compared_arms": verdicts.compared,
                "tolerance": evaluation.regression_tolerance,
                "previous_report": "none" if not baseline else "the last report without regressions",
            },
        )
        yield dg.AssetCheckResult(
            check_name="acl_no_leaks",
            passed=verdicts.leaks == 0,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"leaks": verdicts.leaks},
        )

    return retrieval_eval_report
