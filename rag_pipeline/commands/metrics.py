"""``rag-pipeline metrics``: the pipeline's ingestion figures for Prometheus, over HTTP or printed once.

The figures (``rag_ingest_*``) are computed by :class:`~rag_pipeline.runs.ingest_metrics.IngestMetrics` from the
Dagster instance and the data folder each time Prometheus scrapes (kept for ``--cache-seconds``). This module only
opens the instance and serves them: prometheus_client's own threaded HTTP server, on loopback unless ``--host``
says otherwise. It has no token: what it serves holds no secret and no text (source names, channel/project ids,
counts and times), and deploy/compose.yaml publishes no port for it (only Prometheus, on the stack's network,
reaches it). Design: docs/notes/ingest_metrics.md.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from datetime import timedelta
from types import FrameType
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from rag_pipeline.commands.arguments import add_data_dir, at_least
from rag_pipeline.commands.errors import CommandError
from rag_pipeline.commands.serve import is_loopback
from rag_pipeline.settings import Settings

# Defaults of the options; ExporterOptions (runs/ingest_metrics.py) has the same ones (a test holds them equal).
# They are written here rather than imported: building the CLI's parser must not import Dagster's definitions
# (docs/notes/cli_startup.md). 9464 is clear of the stack's other ports (3000, 3001, 4000, 8000, 9090).
DEFAULT_PORT = 9464
DEFAULT_CACHE_SECONDS = 10.0
DEFAULT_WINDOW_HOURS = 24
DEFAULT_MAX_CONTAINERS = 20


def _seconds(value: str | float) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {value!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {number:g}")
    return number


def add_parser(sub: argparse._SubParsersAction) -> None:
    metrics = sub.add_parser(
        "metrics",
        help="export the ingestion figures (sync lag, failed runs, documents written, skipped records) to Prometheus",
        description="Serves GET /metrics for Prometheus: per live source, the channels/projects behind the lag bound "
        "of the containers_within_lag check, failing or in flight, the lag and the last successful sync; the sync "
        "and index runs of the last --window-hours by status; the documents they wrote and the records they turned "
        "away; the skipped-records reports; when the index was last written. Read from the Dagster instance "
        "(DAGSTER_HOME, else <data dir>/dagster_home) and the data folder on each scrape, kept --cache-seconds; "
        "nothing is contacted but the instance's database (and the Qdrant server with QDRANT_URL). No source "
        "token is needed. The metric list: docs/notes/ingest_metrics.md.",
    )
    metrics.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    metrics.add_argument(
        "--port",
        type=at_least(0),
        default=DEFAULT_PORT,
        help="port to listen on; 0 picks a free one (default: %(default)s)",
    )
    metrics.add_argument(
        "--once", action="store_true", help="print the figures once in Prometheus's text format and exit (cron, a "
        "node_exporter textfile collector, a quick look)",
    )  # fmt: skip
    add_data_dir(metrics)
    metrics.add_argument(
        "--cache-seconds",
        type=_seconds,
        default=DEFAULT_CACHE_SECONDS,
        help="serve a computation this long before reading the instance again (default: %(default)s)",
    )
    metrics.add_argument(
        "--window-hours",
        type=at_least(1),
        default=DEFAULT_WINDOW_HOURS,
        help="the window of the run, document and skipped-record counts (default: %(default)s)",
    )
    metrics.add_argument(
        "--max-containers",
        type=at_least(0),
        default=DEFAULT_MAX_CONTAINERS,
        help="per-container series per source, only for channels/projects behind or failing, worst first; 0 "
        "exports none (default: %(default)s)",
    )
    metrics.set_defaults(func=run)


def start_server(registry: CollectorRegistry, host: str, port: int) -> tuple[WSGIServer, threading.Thread]:
    """prometheus_client's HTTP server for ``registry`` on ``host:port`` (every path answers with the figures;
    gzip when asked), in a daemon thread. A port already taken is one ``error:`` line."""
    try:
        return start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise CommandError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port or --host"
        ) from None


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.runs.ingest_metrics import ExporterOptions, IngestMetrics, exposition, ingest_registry
    from rag_pipeline.runs.instance import ensure_dagster_home, open_instance

    options = ExporterOptions(
        cache_seconds=args.cache_seconds,
        window=timedelta(hours=args.window_hours),
        max_containers=args.max_containers,
    )
    ensure_dagster_home(settings)
    # Opened once for the exporter's life, without the runners' recovery (runner_instance): an exporter only
    # reads, and must never mark another process's runs failed.
    with open_instance() as instance:
        collector = IngestMetrics(instance, settings, options)
        try:
            if args.once:
                sys.stdout.write(exposition(collector))
                return 0
            server, thread = start_server(ingest_registry(collector), args.host, args.port)
            print(
                f"exporting the ingestion metrics of {settings.data_dir} on "
                f"http://{args.host}:{server.server_port}/metrics (computed at most every {options.cache_seconds:g} s)",
                file=sys.stderr,
                flush=True,
            )
            if not is_loopback(args.host):
                print(
                    f"note: {args.host} is beyond loopback and /metrics has no token: keep port {server.server_port} "
                    "to the network Prometheus scrapes from (compose publishes none)",
                    file=sys.stderr,
                    flush=True,
                )
            _serve_until_stopped(server, thread)
        finally:
            collector.close()
    return 0


def _serve_until_stopped(server: WSGIServer, thread: threading.Thread) -> None:
    """Wait until SIGTERM (docker stop) or Ctrl-C, then stop the server: both end the exporter with status 0."""
    stop = threading.Event()

    def stopping(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, stopping) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not stop.wait(1.0):
            if not thread.is_alive():
                raise CommandError("the metrics server stopped unexpectedly")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.shutdown()
        server.server_close()
