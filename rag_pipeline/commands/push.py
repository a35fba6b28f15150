"""``rag-pipeline push FILE --source NAME``: write documents of a system without a connector, one JSON object per
line (a document, or ``{"id": …, "deleted": true}``), checked whole as ``POST /v1/ingest/documents`` checks them
(that route's jobs run this command). The source must be named in ``RAG_PUSH_SOURCES``. A written file is appended to
the source's raw record (``<data dir>/pushed_sources/``); ``rag-pipeline push --replay`` writes every recorded pushed
source back into an index rebuilt without them (``index`` and ``demo`` do it themselves)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rag_pipeline.commands.arguments import add_data_dir, existing_file
from rag_pipeline.commands.errors import USAGE, CommandError
from rag_pipeline.settings import Settings


def add_parser(sub: argparse._SubParsersAction) -> None:
    push = sub.add_parser(
        "push",
        help="write pushed documents (JSON lines) of a registered pushed source (RAG_PUSH_SOURCES)",
        description="Checks every line (the shape of POST /v1/ingest/documents' documents: id, container, title, "
        'text, updated, acl, …; a line {"id": …, "deleted": true} deletes), refuses the whole file naming each '
        "problem, then chunks, embeds and writes the documents through the pipeline's own stages. A re-pushed id "
        "replaces its document. Exit 2 for a refused file, 1 for a failed write.",
    )
    push.add_argument("file", type=existing_file, nargs="?", help="JSON lines: one document (or deletion) per line")
    # Its own dest: the command line fills an absent ``source`` with every connector's name.
    push.add_argument("--source", dest="pushed_source", help="the pushed source (named in RAG_PUSH_SOURCES)")
    push.add_argument(
        "--replay",
        action="store_true",
        help="instead of a FILE: write every pushed source's raw record (<data dir>/pushed_sources/) into the index, "
        "as after a rebuild from raw data that did not (index and demo replay by themselves)",
    )
    push.add_argument("--remove-when-written", action="store_true", help="remove FILE once it is written")
    add_data_dir(push)
    push.add_argument("--json", action="store_true", help="print what was written as JSON")
    push.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.runs.push import write_pushed
    from rag_pipeline.serving.pushed_documents import connectors, push_limits
    from rag_pipeline.sources.pushed_documents import PushInvalid, batch_from_lines, checked_batch

    if args.replay:
        if args.file is not None or args.pushed_source is not None:
            raise CommandError("--replay takes neither FILE nor --source: it writes every recorded pushed source")
        return _replay(args, settings)
    if args.file is None or args.pushed_source is None:
        raise CommandError("give FILE and --source NAME (or --replay)")
    path: Path = args.file
    try:
        registered = push_limits(settings).sources
        request = batch_from_lines(path.read_text(encoding="utf-8"), args.pushed_source)
        batch = checked_batch(request, registered, connectors(), max_documents=sys.maxsize)
    except PushInvalid as refused:
        for problem in refused.problems[:20]:
            print(f"error: {path}: {problem.field}: {problem.message}", file=sys.stderr)
        return USAGE
    report = write_pushed(settings, batch)
    if args.remove_when_written:
        path.unlink(missing_ok=True)
    if args.json:
        print(json.dumps(report.as_dict()))
    else:
        print(f"{report.source}: {report.documents_written} written, {report.documents_skipped_older} older than "
              f"the index's (skipped), {report.deleted} deleted; {report.child_chunks} chunks")  # fmt: skip
    return 0


def _replay(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.runs.push import replay_pushed

    reports = replay_pushed(settings)
    if args.json:
        print(json.dumps([r.as_dict() for r in reports]))
    for report in [] if args.json else reports:
        print(replay_line(report.as_dict()))
    if not reports and not args.json:
        print("no pushed source is recorded in this data folder")
    return 0


def replay_line(report: dict[str, object]) -> str:
    """``hr_wiki: replayed 2 written, 0 already indexed, 1 deleted``: one line per replayed source."""
    line = (f"{report['source']}: replayed {report['documents_written']} written, {report['already_indexed']} "
            f"already indexed, {report['deleted']} deleted")  # fmt: skip
    if report.get("unreadable_records"):
        line += f" ({report['unreadable_records']} unreadable record lines skipped)"
    return line
