"""``rag-pipeline token create|list|revoke``: personal, scoped service tokens for agents (serving/tokens.py).

A token is tied to a person the principal directory knows, reads as that person (never wider), carries scopes
(``search``, ``answer``, ``admin``), expires and can be revoked; only its hash is stored, so it is printed once.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from rag_pipeline.commands.arguments import add_data_dir
from rag_pipeline.commands.errors import CommandError
from rag_pipeline.commands.tables import first_fitting, key_value_blocks
from rag_pipeline.directory.people import UnknownPerson
from rag_pipeline.serving.tokens import SCOPES, TokenInfo, TokenStore, check_scopes, parse_duration
from rag_pipeline.settings import Settings


def add_parser(sub: argparse._SubParsersAction) -> None:
    token = sub.add_parser(
        "token",
        help="create, list and revoke personal service tokens for agents",
        description="Personal tokens let an agent call `rag-pipeline serve` (HTTP, MCP, the OpenAI-compatible "
        "routes) as one person: `Authorization: Bearer rag_…`. The service resolves the person through the "
        "principal directory on every request, so a token never reads wider than its person does now. Scopes: "
        "search (search, documents, whois/explain about oneself, MCP), answer (chat completions, answers) and admin "
        "(whois/explain about other people). Stored hashed in "
        "<data dir>/tokens.sqlite.",
    )
    actions = token.add_subparsers(dest="action", required=True, metavar="{create,list,revoke}")
    create = actions.add_parser("create", help="a new token for a person (printed once)")
    create.add_argument("--user", required=True, help="the person: an email or account id the directory knows")
    create.add_argument(
        "--scope", default="search", help=f"comma-separated scopes from {', '.join(SCOPES)} (default: search)"
    )
    create.add_argument("--expires", default="30d", help="lifetime: days or hours, e.g. 30d, 12h (default: 30d)")
    create.add_argument("--note", default="", help="what the token is for (shown by list)")
    actions.add_parser("list", help="every token: id, person, scopes, state, last use (never the secret)")
    revoke = actions.add_parser("revoke", help="revoke a token by its id (from list)")
    revoke.add_argument("id", help="the token's id (the 8 characters after rag_)")
    for action in (create, *(actions.choices[n] for n in ("list", "revoke"))):
        add_data_dir(action)
        action.add_argument("--json", action="store_true", help="print JSON")
    token.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    store = TokenStore(settings.paths.tokens)
    if args.action == "create":
        return _create(args, settings, store)
    if args.action == "revoke":
        try:
            info = store.revoke(args.id)
        except KeyError as exc:
            raise CommandError(str(exc.args[0])) from None
        _show([info], args.json)
        return 0
    _show(store.list(), args.json)
    return 0


def _create(args: argparse.Namespace, settings: Settings, store: TokenStore) -> int:
    from rag_pipeline.runs.directory import person_of

    try:
        scopes = check_scopes([s.strip() for s in args.scope.split(",") if s.strip()])
        lifetime = parse_duration(args.expires)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    try:
        person = person_of(settings, args.user)
    except UnknownPerson as exc:
        raise CommandError(f"--user {args.user!r}: {exc}") from None
    # The identifier the service resolves on every request: the person's email where the directory has one.
    identity = person.emails[0] if person.emails else args.user
    token, info = store.create(identity, scopes, lifetime, args.note)
    if args.json:
        print(json.dumps({"token": token, **_row(info)}, indent=2))
    else:
        print(token)
        print(f"token {info.id} for {info.person}: scopes {', '.join(info.scopes)}, expires {info.expires_at}. "
              "It is shown once; only its hash is stored.")  # fmt: skip
    return 0


def _row(info: TokenInfo) -> dict[str, object]:
    return {
        "id": info.id,
        "person": info.person,
        "scopes": list(info.scopes),
        "state": info.state(datetime.now(UTC)),
        "created_at": info.created_at,
        "expires_at": info.expires_at,
        "revoked_at": info.revoked_at,
        "last_used_at": info.last_used_at,
        "note": info.note,
    }


def _show(infos: list[TokenInfo], as_json: bool, console: Console | None = None) -> None:
    """JSON; a table on a terminal, in the layout its width allows; one line per token in a log or a pipe."""
    if as_json:
        print(json.dumps([_row(i) for i in infos], indent=2))
        return
    if not infos:
        print("no tokens")
        return
    console = console or Console()
    if console.is_terminal:
        console.print(first_fitting(console, token_layouts(infos)))
        return
    for info in infos:
        row = _row(info)
        print(f"{info.id}  {info.person}  {','.join(info.scopes)}  {row['state']}  expires {info.expires_at}  "
              f"last used {info.last_used_at or 'never'}{'  ' + info.note if info.note else ''}")  # fmt: skip


def token_layouts(infos: list[TokenInfo]) -> list[RenderableType]:
    """The tokens as a table, one row per token (a wide terminal), else a ``key  value`` block per token."""
    rows = [
        {
            "id": info.id,
            "person": info.person,
            "scopes": ", ".join(info.scopes),
            "state": str(_row(info)["state"]),
            "expires": info.expires_at,
            "last used": info.last_used_at or "never",
            "note": info.note or "-",
        }
        for info in infos
    ]
    table = Table()
    for column in rows[0]:
        table.add_column(column, overflow="fold", no_wrap=column in ("id", "state"))
    for row in rows:
        table.add_row(*(Text(value) for value in row.values()))
    return [table, key_value_blocks({f"token {row['id']}": list(row.items())[1:] for row in rows})]
