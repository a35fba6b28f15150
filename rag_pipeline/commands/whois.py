"""``rag-pipeline whois PERSON``: one person's accounts, groups and private channels across sources, from the
principal directory, and when each source was last synced."""

from __future__ import annotations

import argparse
import json

from rag_pipeline.commands.arguments import add_data_dir
from rag_pipeline.commands.errors import CommandError
from rag_pipeline.settings import Settings


def add_parser(sub: argparse._SubParsersAction) -> None:
    whois = sub.add_parser(
        "whois",
        help="show a person's accounts, groups and channels from the directory",
        description="Looks PERSON up in the principal directory (an email, matched case-insensitively, or any "
        "source's account id, optionally as slack:U123 / jira:ACCOUNT) and joins their accounts across sources by "
        "email and by the links file (RAG_IDENTITY_LINKS, default <data dir>/identity_links.txt). Shows each "
        "account's status (member, guest, external, deleted...), the ACL groups they hold and the grant behind "
        "each, their private-channel memberships, and when each source's directory was synced.",
    )
    whois.add_argument("person", help="email or account id (slack:U123, jira:5b10...)")
    add_data_dir(whois)
    whois.add_argument("--json", action="store_true", help="print the person as JSON")
    whois.set_defaults(func=run, reads_data_folder=True)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.composition import access_queries
    from rag_pipeline.serving.access import OPERATOR, AccessRefused

    try:
        described = access_queries(settings).whois(OPERATOR, args.person)
    except AccessRefused as exc:
        raise CommandError(str(exc)) from None
    if args.json:
        print(json.dumps(described, indent=2))
        return 0
    emails: list[str] = described["emails"]  # type: ignore[assignment]
    print(f"{described['person']}  {', '.join(emails) or '(no email)'}")
    for account in described["accounts"]:  # type: ignore[attr-defined]
        name = f" {account['name']}" if account["name"] else ""
        print(f"  {account['source']} {account['scope']} {account['id']}{name}: {account['status']}")
    print("groups:" if described["groups"] else "groups: none (public documents and those naming an account only)")
    for grant in described["grants"]:  # type: ignore[attr-defined]
        print(f"  {grant['group']}  ({grant['because']})")
    if described["channels"]:
        print("channels:")
        for channel in described["channels"]:  # type: ignore[attr-defined]
            kind = "private" if channel["private"] else "shared"
            print(f"  #{channel['name']} ({channel['id']}, {kind})")
    for source, instant in described["synced"].items():  # type: ignore[attr-defined]
        print(f"{source} directory synced {instant}")
    return 0
