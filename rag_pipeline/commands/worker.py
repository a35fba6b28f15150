"""``rag-pipeline worker``: a Celery worker that runs pipeline steps (``dagster-celery worker start``, configured
from the project's settings so the workers and the executor always agree on the broker and the Celery settings)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from rag_pipeline.commands.arguments import at_least
from rag_pipeline.commands.errors import CommandError
from rag_pipeline.settings import Settings
from rag_pipeline.sources.registry import source_names


def all_queues() -> list[str]:
    """Every queue a step can be routed to: each source's API, embedding, the index, and dagster-celery's default
    (where a step without a queue tag would go; every asset of the project has one)."""
    from rag_pipeline.defs.executors import DEFAULT_QUEUE, EMBED_QUEUE, QDRANT_QUEUE, source_api_queue

    return [*(source_api_queue(s) for s in source_names()), EMBED_QUEUE, QDRANT_QUEUE, DEFAULT_QUEUE]


def add_parser(sub: argparse._SubParsersAction) -> None:
    worker = sub.add_parser(
        "worker",
        help="run pipeline steps for runs that use RAG_EXECUTOR=celery (a Celery worker on RAG_CELERY_BROKER_URL)",
        description="Starts a Celery worker (dagster-celery) that executes the steps the Celery executor routes to its "
        "queues: <source>_api (reading a source, bounded by its API's rate limit), embed (chunks and vectors) and "
        "qdrant (everything that opens the index). With the embedded index folder, only workers on the machine that "
        "holds the folder may listen on qdrant; with QDRANT_URL any worker may. Every worker and the run's "
        "orchestrator must see the same DAGSTER_HOME instance (PostgreSQL in a deployment) and the same data "
        "folder (RAG_DATA_DIR, on shared storage across machines). A step whose worker dies is run again by "
        "another worker: at once when a worker process dies, after RAG_CELERY_VISIBILITY_TIMEOUT seconds "
        "(default 7200, keep it above the longest step) when the whole worker is lost. See docs/guides/scaling.md.",
    )
    worker.add_argument(
        "-q",
        "--queue",
        action="append",
        choices=all_queues(),
        help="a queue to take steps from (repeatable; default: every queue)",
    )
    worker.add_argument("-n", "--name", default=None, help="the worker's name, before @<host> (default: rag-<pid>)")
    worker.add_argument(
        "-c", "--concurrency", type=at_least(1), default=1, help="steps run at once by this worker (default 1)"
    )
    worker.add_argument("--loglevel", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    worker.add_argument(
        "--print-command", action="store_true", help="print the dagster-celery command instead of running it"
    )
    worker.set_defaults(func=run)


def worker_config(settings: Settings) -> dict[str, object]:
    """The worker's config file: the same ``celery_executor`` config the code location's jobs run with."""
    from rag_pipeline.defs.executors import celery_executor_config

    return {"execution": {"config": celery_executor_config(settings)}}


def worker_queues(args: argparse.Namespace) -> list[str]:
    """The queues asked for (default: every queue)."""
    return list(dict.fromkeys(args.queue or all_queues()))


def worker_command(args: argparse.Namespace, queues: list[str], config_file: Path) -> list[str]:
    """The ``dagster-celery worker start`` command line."""
    name = args.name or f"rag-{os.getpid()}"  # dagster-celery appends @<host>
    executable = shutil.which("dagster-celery", path=str(Path(sys.executable).parent)) or "dagster-celery"
    command = [executable, "worker", "start", "-A", "dagster_celery.app", "-y", str(config_file), "-n", name]
    command += ["--loglevel", args.loglevel]
    # One comma-separated -q: dagster-celery turns each -q into a -Q of its own, and Celery 5 keeps only the
    # last -Q (a worker started with four -q listened on one queue); Celery splits the list itself.
    command += ["-q", ",".join(queues)]
    # After "--", Celery's own options: steps per worker, and no remote control of the pool size.
    return [*command, "--", f"--concurrency={args.concurrency}", "--without-mingle", "--without-gossip"]


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.defs.executors import CELERY_BROKER_ENV
    from rag_pipeline.runs.instance import ensure_dagster_home

    if not settings.execution.celery_broker_set:
        raise CommandError(
            f"{CELERY_BROKER_ENV} is not set: the broker this worker listens on (e.g. redis://127.0.0.1:6379/0)"
        )
    home = ensure_dagster_home(settings)
    # The file names the variables, not their values: dagster-celery resolves them when the worker starts.
    # JSON is YAML, which is what dagster-celery reads.
    config_file = home / "celery_worker.yaml"
    config_file.write_text(json.dumps(worker_config(settings), indent=2), encoding="utf-8")
    queues = worker_queues(args)
    command = worker_command(args, queues, config_file)
    if settings.execution.executor != "celery":
        # Workers only get steps from runs whose code location hands them over; a common first mistake.
        print(
            f"note: RAG_EXECUTOR is {settings.execution.executor} here; runs send their steps to workers only where "
            "the code location that launches them has RAG_EXECUTOR=celery",
            file=sys.stderr,
        )
    if args.print_command:
        print(" ".join(command))
        return 0
    print(f"worker: queues {', '.join(queues)}; DAGSTER_HOME {home}; data {settings.data_dir}", file=sys.stderr)
    sys.stderr.flush()
    # dagster-celery starts `celery` from PATH: the one installed beside this Python, also where the
    # environment was not activated.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), *os.get_exec_path()])
    os.execv(command[0], command)
