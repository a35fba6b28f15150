"""The code location's pieces as tests use them, built from settings like the real entry points build them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.defs.evaluation.assets import EvaluationDefinitions
from rag_pipeline.defs.parts import build_resources, evaluation_definitions, source_specs
from rag_pipeline.pipeline.keys import week_key
from rag_pipeline.settings import Settings


def settings_for(data_dir: str | Path | None = None) -> Settings:
    """The environment's settings (tests set variables with monkeypatch first), on ``data_dir``."""
    return Settings.from_env().with_data_dir(data_dir)


def spec(source: str, settings: Settings | None = None) -> SourceSpec:
    return source_specs(settings or settings_for())[source]


def chain(source: str, settings: Settings | None = None) -> list[dg.AssetsDefinition]:
    """A source's raw asset and its chain down to the Qdrant points."""
    return list(spec(source, settings).assets)


def evaluation(settings: Settings | None = None) -> EvaluationDefinitions:
    settings = settings or settings_for()
    return evaluation_definitions(settings, source_specs(settings))


def resources(data_dir: str | Path, live: bool | None = None) -> dict[str, object]:
    """Every resource on ``data_dir``; ``live=False`` reads the offline files even where an API is configured."""
    return build_resources(settings_for(data_dir), live=live)


def cell(raw_asset: str, container: str, first_day: str, last_day: str | None = None) -> dict[str, Any]:
    """``dg.materialize`` arguments for one container's days (what one (day, container) partition was before
    weekly partitions): the week of ``first_day``, and a plan that reads only that container over those days."""
    plan = {container: {"first_day": first_day, "last_day": last_day or first_day}}
    return {"partition_key": week_key(first_day), "run_config": {"ops": {raw_asset: {"config": {"plan": plan}}}}}
