"""A directory file: a CSV of one source's accounts (``account_id,email,groups``, optionally ``display_name``;
groups separated by ``;``) for offline data that holds no membership. Each connector says how an entry of the
``groups`` column becomes an ACL group of its own (``group_of``); a row without a usable id is a problem, the rest
are kept."""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline.directory.accounts import Account, DirectorySnapshot, checked_account_id, checked_email
from rag_pipeline.sources.problems import SourceError

DIRECTORY_FILE_COLUMNS = ("account_id", "email", "groups")


@dataclass(frozen=True)
class DirectoryFileFormat:
    """Whose file it is and what its ``groups`` entries may be, as errors name them."""

    what: str  # "Jira directory file"
    flags: str  # "--jira-directory, RAG_JIRA_DIRECTORY"
    entries: str  # "a group name, project:KEY or security:LEVEL_ID, role:KEY:NAME"


def read_directory_file(
    path: str | Path,
    snapshot: DirectorySnapshot,
    group_of: Callable[[str], tuple[str, str]],
    form: DirectoryFileFormat,
) -> None:
    """Add the file's accounts to ``snapshot`` (its source and scope), each with the groups ``group_of`` makes of
    its entries (ACL group, the grant behind it)."""
    path = Path(path)
    if not path.is_file():
        raise SourceError(f"{form.what} not found: {path} ({form.flags})")
    with open(path, newline="", encoding="utf-8-sig") as handle:
        rows = csv.DictReader(handle)
        missing = [c for c in DIRECTORY_FILE_COLUMNS if c not in (rows.fieldnames or ())]
        if missing:
            raise SourceError(
                f"{form.what} {path} has no column {', '.join(missing)}; its header must be "
                f"{','.join(DIRECTORY_FILE_COLUMNS)} (groups separated by ';': {form.entries})"
            )
        for number, row in enumerate(rows, start=2):
            where = f"{path}:{number}"
            account_id = checked_account_id((row.get("account_id") or "").strip(), where, snapshot.problems)
            if account_id is None:
                continue
            groups = dict(group_of(g.strip()) for g in (row.get("groups") or "").split(";") if g.strip())
            name = (row.get("display_name") or "").strip() or None
            email = checked_email(row.get("email"), where, snapshot.problems)
            snapshot.add(Account(snapshot.source, snapshot.scope, account_id, name, email, "member", groups))
