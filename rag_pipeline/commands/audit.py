"""``rag-pipeline audit [--since 7d|DATE]``: who gained or lost access to what at the directory syncs, and how many
documents each grant admits (the ``access_audit`` asset's rows, from the directory file)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime

from rag_pipeline.commands.arguments import add_data_dir
from rag_pipeline.commands.errors import CommandError
from rag_pipeline.settings import Settings


def add_parser(sub: argparse._SubParsersAction) -> None:
    audit = sub.add_parser(
        "audit",
        help="show who gained or lost access at the directory syncs",
        description="Every directory sync records each account that gained or lost an ACL group (workspace "
        "membership, a Jira project, group or security level) or a place among a channel's readers. This prints "
        "them, oldest first, with the documents each grant admits in the index (counted now where the access_audit "
        "asset has not yet). A first sync is a baseline and records nothing. Exit 0; 2 for a bad --since.",
    )
    audit.add_argument(
        "--since", default="7d", help="how far back: days or hours (7d, 12h) or an ISO date/time (default: 7d)"
    )
    audit.add_argument("--no-count", action="store_true", help="do not open the index to count documents")
    add_data_dir(audit)
    audit.add_argument("--json", action="store_true", help="print the changes as a JSON list")
    audit.set_defaults(func=run, reads_data_folder=True)


def parse_since(text: str, now: datetime | None = None) -> float:
    """``7d``, ``12h`` or an ISO date/time (UTC unless it says otherwise) as a Unix time."""
    from rag_pipeline.serving.tokens import parse_duration

    now = now or datetime.now(UTC)
    try:
        return (now - parse_duration(text)).timestamp()
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise CommandError(f"--since {text!r}: give days or hours (7d, 12h) or an ISO date (2026-11-01)") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.directory.audit import AccessAudit, count_documents
    from rag_pipeline.directory.store import DirectoryStore

    since = parse_since(args.since)
    store = DirectoryStore(settings.paths.directory)
    if not store.exists():
        raise CommandError(f"no directory at {settings.paths.directory}: run `rag-pipeline index` (or `directory`)")
    rows = store.access_changes(since=since)
    uncounted = sum(r.documents is None for r in rows)
    if uncounted and not args.no_count and (settings.qdrant.url or settings.has_embedded_index()):
        from rag_pipeline.composition import open_index

        with open_index(settings) as index:
            store.count_access_documents(count_documents(index, rows))
        rows = store.access_changes(since=since)
    elif uncounted:
        why = "--no-count" if args.no_count else f"no index at {settings.paths.qdrant}"
        print(f"note: {uncounted:,} change(s) without a document count ({why})", file=sys.stderr)
    audit = AccessAudit(tuple(rows))
    if args.json:
        print(json.dumps(audit.as_json(store), indent=2, ensure_ascii=False))
        return 0
    for line in audit.lines(store):
        print(line)
    print(
        f"{len(rows):,} change(s): {audit.accounts('gained'):,} account(s) gained access "
        f"({audit.documents('gained'):,} document grants), {audit.accounts('lost'):,} lost "
        f"({audit.documents('lost'):,})"
    )
    return 0
