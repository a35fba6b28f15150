"""Where each step of a run executes: one process, Celery workers fed through a broker, or a Kubernetes Job.

Every asset's step carries the Celery queue it belongs on (``dagster-celery/queue``), so with
``RAG_EXECUTOR=celery`` routing does what the pools do on one machine:

- ``<source>_api``: reading a source (its API's rate limit; a worker there must reach the API or the export);
- ``embed``: chunking, dense and BM25 vectors (CPU/accelerator work, no index access);
- ``qdrant``: everything that opens the index (writes, reconciliation, evaluation, answers). With the embedded
  folder only workers on the machine that holds the folder may listen on it; with ``QDRANT_URL`` any may.

The pools (``qdrant``, ``slack_api``, ``jira_api``) still bound how many steps run at once: the Celery executor
claims a pool slot in the run's orchestrator before it hands a step to the broker.

The embedding step also carries ``dagster-k8s/config`` with its container resources, which ``k8s_job_executor``
applies to that step's Job (other executors ignore the tag).
"""

from __future__ import annotations

import json
from typing import Any

import dagster as dg

from rag_pipeline.settings import Settings

CELERY_QUEUE_TAG = "dagster-celery/queue"
K8S_CONFIG_TAG = "dagster-k8s/config"
EMBED_QUEUE = "embed"
# dagster-celery's own default queue: where a step without a queue tag goes.
DEFAULT_QUEUE = "dagster"
QDRANT_QUEUE = "qdrant"
# Variables the Celery executor and the workers read themselves (Dagster ``env`` config), so that a broker
# password never lands in the run config.
CELERY_BROKER_ENV = "RAG_CELERY_BROKER_URL"
CELERY_BACKEND_ENV = "RAG_CELERY_BACKEND_URL"

# The embedding step's container on Kubernetes: the encoder uses every core it gets; 4 GiB holds the model,
# a partition range's chunks and their vectors with room to spare (peak RSS of an index run: see bench/).
EMBED_STEP_K8S_CONFIG: dict[str, Any] = {
    "container_config": {
        "resources": {
            "requests": {"cpu": "2", "memory": "4Gi"},
            "limits": {"cpu": "4", "memory": "6Gi"},
        }
    }
}
# k8s_job_executor's defaults here: secrets reach every step's pod as environment variables.
K8S_EXECUTOR_CONFIG: dict[str, Any] = {
    "max_concurrent": 8,
    "env_secrets": ["rag-pipeline-secrets"],
    "step_k8s_config": {"container_config": {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}},
}


def source_api_queue(source: str) -> str:
    """The queue of the steps that read ``source`` (its API's rate limit is held by the pool of the same name)."""
    return f"{source}_api"


def step_tags(queue: str, *, embedding: bool = False) -> dict[str, str]:
    """A step's op tags: its Celery queue, and for the embedding step its Kubernetes resources."""
    tags = {CELERY_QUEUE_TAG: queue}
    if embedding:
        tags[K8S_CONFIG_TAG] = json.dumps(EMBED_STEP_K8S_CONFIG)
    return tags


def celery_config_source(settings: Settings) -> dict[str, Any]:
    """Celery settings shared by the executor and every worker (``rag-pipeline worker`` writes the same).

    A step is acknowledged only when it finished (``task_acks_late``), so a step whose worker dies is handed to
    another worker: at once when the worker's child process dies (``task_reject_on_worker_lost``), after the
    broker's visibility timeout when the whole worker or its machine is gone. One step per worker process at a
    time (prefetch 1): steps are long, and a prefetched step would wait behind the running one.
    """
    timeout = settings.execution.celery_visibility_timeout
    return {
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "broker_transport_options": {
            "visibility_timeout": timeout,
            # Look for the unacknowledged steps of dead workers every tenth of the timeout.
            "unacked_restore_interval": max(1, timeout // 10),
            "unacked_restore_throttle": 1,
        },
        "result_expires": 7 * 24 * 3600,
    }


def celery_executor_config(settings: Settings) -> dict[str, Any]:
    """The ``celery_executor`` config: broker and backend from the environment, the shared Celery settings."""
    backend_env = CELERY_BACKEND_ENV if settings.execution.celery_backend_set else CELERY_BROKER_ENV
    return {
        "broker": {"env": CELERY_BROKER_ENV},
        "backend": {"env": backend_env},
        "config_source": celery_config_source(settings),
    }


def build_executor(settings: Settings) -> dg.ExecutorDefinition:
    """The executor of every job of the code location (RAG_EXECUTOR)."""
    chosen = settings.execution.executor
    if chosen == "celery":
        from dagster_celery import celery_executor

        return celery_executor.configured(celery_executor_config(settings))
    if chosen == "k8s":
        from dagster_k8s import k8s_job_executor

        return k8s_job_executor.configured(K8S_EXECUTOR_CONFIG)
    if chosen == "multiprocess" or (chosen == "auto" and settings.qdrant.url):
        return dg.multiprocess_executor
    # The embedded engine locks its folder: one process opens it at a time.
    return dg.in_process_executor
