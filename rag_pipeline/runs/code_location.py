"""The one runners' module that loads the code location's Dagster definitions: the runners execute the very assets
the UI shows, in this process, so they need the source specs (their assets), the resources, the evaluation's and
the directory's assets from ``rag_pipeline.defs``.

Every other module of ``rag_pipeline.runs`` imports nothing of ``rag_pipeline.defs`` (``rag_pipeline_tests/unit/
test_layers.py`` checks it): the names both sides speak of (asset keys, run tags, the sync policy, the parquet
writer) are in the Dagster-free :mod:`rag_pipeline.pipeline`. This module takes the parts from
:mod:`rag_pipeline.defs.parts` and the asset builders, never the whole ``Definitions`` (``defs/builders.py``): that
imports the retention job's wiring, which imports the runners' retention, which reads the specs from here.
"""

from __future__ import annotations

from rag_pipeline.defs.chain.resources import qdrant_resource
from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.defs.directory import ACCESS_AUDIT, directory_resource, refresh_directory, run_access_audit
from rag_pipeline.defs.evaluation.mining import build_mined_eval_sets, whole_thread_sources, workspace_corpus
from rag_pipeline.defs.evaluation.quality import build_quality_over_time
from rag_pipeline.defs.evaluation.resources import EvaluationResource
from rag_pipeline.defs.parts import build_resources, evaluation_definitions, source_specs

__all__ = [
    "ACCESS_AUDIT",
    "EvaluationResource",
    "SourceSpec",
    "build_mined_eval_sets",
    "build_quality_over_time",
    "build_resources",
    "directory_resource",
    "evaluation_definitions",
    "qdrant_resource",
    "refresh_directory",
    "run_access_audit",
    "source_specs",
    "whole_thread_sources",
    "workspace_corpus",
]
