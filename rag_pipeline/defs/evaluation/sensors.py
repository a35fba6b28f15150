"""The evaluation's own sensor: every arm runs again when an eval-set file is added, removed or edited."""

import hashlib
import json
from pathlib import Path

import dagster as dg

from rag_pipeline.pipeline.tags import RANGE_END_TAG, RANGE_START_TAG


def eval_set_hashes(folder: Path) -> dict[str, str]:
    """Content hash of every file under the eval-sets folder, by relative path."""
    if not folder.is_dir():
        return {}
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def build_eval_sets_changed_sensor(arms: list[str], asset_keys: list[str], eval_dir: Path) -> dg.SensorDefinition:
    """A sensor requesting every evaluation arm when an eval-set file is added, removed or edited."""

    @dg.sensor(
        name="eval_sets_changed_sensor",
        minimum_interval_seconds=60,
        asset_selection=asset_keys,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Hashes every file under eval_sets/ (RAG_EVAL_DIR); when one is added, removed or edited, "
        "requests every arm of retrieval_eval in one run (the report follows eagerly). The cursor holds the hashes.",
    )
    def eval_sets_changed_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        current = eval_set_hashes(eval_dir)
        if context.cursor is None:
            # First look: today's sets are covered by the daily evaluation.
            context.update_cursor(json.dumps(current, sort_keys=True))
            return dg.SkipReason(f"recorded {len(current)} eval-set files")
        previous: dict[str, str] = json.loads(context.cursor)
        if current == previous:
            return dg.SkipReason("eval sets unchanged")
        changed = sorted(k for k in set(current) | set(previous) if current.get(k) != previous.get(k))
        fingerprint = hashlib.sha256(json.dumps(current, sort_keys=True).encode()).hexdigest()[:16]
        # Every arm in one run (a partition range), so each eval set's arms share their searches.
        tags = {RANGE_START_TAG: arms[0], RANGE_END_TAG: arms[-1], "rag/eval_sets_changed": ",".join(changed)[:200]}
        return dg.SensorResult(
            run_requests=[dg.RunRequest(run_key=f"eval-sets:{fingerprint}", tags=tags)],
            cursor=json.dumps(current, sort_keys=True),
        )

    return eval_sets_changed_sensor


def mined_query_ids(folder: Path) -> set[str]:
    """The ids of every query in the current mined sets (``<set>/<query id>``)."""
    if not folder.is_dir():
        return set()
    ids = set()
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").split("\n"):
            if line.strip():
                ids.add(f"{path.stem}/{json.loads(line)['id']}")
    return ids


def build_mined_queries_sensor(
    arms: list[str], asset_keys: list[str], mined_dir: Path, min_new: int
) -> dg.SensorDefinition:
    """A sensor requesting every evaluation arm once the mined sets hold ``min_new`` queries not yet evaluated."""

    @dg.sensor(
        name="mined_queries_sensor",
        minimum_interval_seconds=300,
        asset_selection=asset_keys,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"After a sync mined new questions (mined_eval_sets), evaluates every arm again once at least "
        f"{min_new} mined queries (RAG_MINED_MIN_NEW_QUERIES) were not in the last evaluation. The cursor holds a "
        "digest and the count of the queries evaluated.",
    )
    def mined_queries_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        current = mined_query_ids(mined_dir)
        previous = set(json.loads(context.cursor)) if context.cursor else set()
        new = current - previous
        if len(new) < min_new:
            return dg.SkipReason(f"{len(new)} new mined queries (an evaluation runs at {min_new})")
        digest = hashlib.sha256("\n".join(sorted(current)).encode()).hexdigest()[:16]
        tags = {RANGE_START_TAG: arms[0], RANGE_END_TAG: arms[-1], "rag/mined_new_queries": str(len(new))}
        return dg.SensorResult(
            run_requests=[dg.RunRequest(run_key=f"mined:{digest}", tags=tags)],
            cursor=json.dumps(sorted(current)),
        )

    return mined_queries_sensor
