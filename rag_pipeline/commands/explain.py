"""``rag-pipeline explain --user PERSON DOCUMENT_ID``: may this person read this document, and why.

It reads the document's indexed ACL and the person's reader from the directory, the two things a search
filters on, so it agrees with what ``search`` returns. Exit 0 whether visible or not; 2 for an unknown
person or document."""

from __future__ import annotations

import argparse
import json

from rag_pipeline.commands.arguments import add_data_dir
from rag_pipeline.commands.errors import CommandError
from rag_pipeline.settings import Settings


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "explain",
        help="say whether a person may read a document, and why",
        description="Resolves PERSON through the principal directory (as searches do) and reads DOCUMENT_ID's ACL "
        "from the index; prints visible or hidden with the grant that admits it (public, member of workspace T, "
        "member of private channel #x, Browse projects via group g, security level via group g) or the restriction "
        "that hides it, and how old the directory's knowledge is. Exit 0 either way; 2 for an unknown person or "
        "document.",
    )
    parser.add_argument("document_id", help="document id as results show it (slack:T:C:ts, jira:site:id)")
    parser.add_argument("--user", required=True, help="the person: email or account id (slack:U123, jira:...)")
    add_data_dir(parser)
    parser.add_argument("--json", action="store_true", help='print {"visible", "because", "synced"} as JSON')
    parser.set_defaults(func=run, reads_data_folder=True)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.composition import access_queries
    from rag_pipeline.serving.access import OPERATOR, AccessRefused

    try:
        answer = access_queries(settings).explain(args.document_id, OPERATOR, args.user)
    except AccessRefused as exc:
        if exc.field == "document_id":
            raise CommandError(
                f"no document {args.document_id!r} in the index (ids look like slack:T:C:ts, jira:site:id)"
            ) from None
        raise CommandError(str(exc)) from None
    if args.json:
        print(json.dumps(answer, indent=2))
        return 0
    print(f"{'visible' if answer['visible'] else 'hidden'}: {args.document_id} for {answer['person']}")
    because: list[str] = answer["because"]  # type: ignore[assignment]
    for reason in because:
        print(f"  because {reason}")
    return 0
