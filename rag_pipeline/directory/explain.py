"""Why a person may or may not read a document: the grant that admits it, or the restriction that hides it.

The verdict is :meth:`Principal.admits` over the document's indexed ``acl`` payload, with the principal the
directory resolves for the person: the same reader and the same payload a search filters on, so ``explain``
and ``search`` cannot disagree. The reasons only spell out which part of the payload matched.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from rag_pipeline.directory.people import INACTIVE, Person
from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.index.store import IndexedAcl


def instant(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def describe_group(group: str) -> str:
    """An ACL group in words."""
    parts = group.split(":")
    if parts[0] == "slack" and len(parts) == 3 and parts[2] == "members":
        return f"members of Slack workspace {parts[1]}"
    if parts[0] == "jira" and len(parts) >= 4:
        kind, name = parts[2], ":".join(parts[3:])
        if kind == "project":
            return f"people who may browse Jira project {name} on {parts[1]}"
        if kind == "security":
            return f"Jira security level {name} on {parts[1]}"
        if kind == "group":
            return f"Jira group {name} on {parts[1]}"
        if kind == "role" and len(parts) >= 5:
            return f"project role {':'.join(parts[4:])} in Jira project {parts[3]} on {parts[1]}"
    return f"group {group}"


@dataclass(frozen=True)
class Explanation:
    """``explain --json``: the verdict, the reasons and how old the directory's knowledge is."""

    document_id: str
    visible: bool
    because: tuple[str, ...]
    synced: str | None

    def as_json(self) -> dict[str, object]:
        return {
            "document": self.document_id,
            "visible": self.visible,
            "because": list(self.because),
            "synced": self.synced,
        }


def _slack_channel(document_id: str) -> str | None:
    parts = document_id.split(":")
    return parts[2] if parts[0] == "slack" and len(parts) >= 4 else None


def explain(person: Person, document_id: str, acl: IndexedAcl, store: DirectoryStore) -> Explanation:
    """Whether ``person`` may read the document whose indexed ACL is ``acl``, and why."""
    principal = person.principal()
    payload = acl.as_payload()
    visible = principal.admits(payload)
    # A restricted Jira comment is read by those the issue admits *and* its restriction admits: the two parts are
    # explained apart, so a hidden comment names the part the person fails.
    issue_part = {k: v for k, v in payload.items() if k != "restricted_to"}
    admitted_by_issue = principal.admits(issue_part)
    source = document_id.split(":", 1)[0]
    synced_at = person.synced.get(source)
    as_of = f"as of the directory sync of {instant(synced_at)}" if synced_at else "the directory has no sync of it"
    channel_id = _slack_channel(document_id)
    channel = store.channel("slack", channel_id) if channel_id else None
    channel_name = f"#{channel[0]} ({channel_id})" if channel else (channel_id or "")
    because: list[str] = []
    if acl.public:
        because.append("the document is public")
    active = person.active_accounts()
    for account in active:
        if account.account_id not in acl.users:
            continue
        membership = next((c for c in account.channels if c.id == channel_id), None)
        if membership is not None and membership.private:
            because.append(
                f"{account.source} account {account.account_id} is a member of private channel {channel_name}, {as_of}"
            )
        elif account.status == "external":
            because.append(
                f"{account.source} account {account.account_id} is an external member of shared "
                f"channel {channel_name}, {as_of}"
            )
        else:
            because.append(f"{account.source} account {account.account_id} is named among the document's readers")
    held = person.groups()
    for group in sorted(acl.groups & set(held)):
        because.append(f"{held[group]}, which admits {describe_group(group)} ({as_of})")
    restriction = sorted(acl.restricted_to)
    if restriction:
        passing = [g for g in restriction if g in held]
        for group in passing:
            because.append(
                f"{held[group]}, which admits {describe_group(group)}: the comment is restricted to it ({as_of})"
            )
        if not passing:
            named = " or ".join(describe_group(g) for g in restriction)
            because.append(
                f"a restricted Jira comment: only {named} may read it, and {person.name} holds none of "
                f"{', '.join(restriction)} ({as_of})"
            )
    if not visible and not admitted_by_issue:  # (hidden by the restriction alone: said above)
        for group in sorted(acl.groups):
            because.append(f"restricted to {describe_group(group)}: {person.name} does not hold {group} ({as_of})")
        if acl.users:
            mine = [a for a in person.accounts if a.source == source]
            where = f"private channel {channel_name}" if channel and channel[1] else "the document"
            if channel and channel[1]:
                because.append(
                    f"restricted to the {len(acl.users)} members of {where}: "
                    f"{', '.join(a.account_id for a in mine) or 'no ' + source + ' account of theirs'} "
                    f"{'is' if len(mine) == 1 else 'are'} not among them ({as_of})"
                )
            else:
                because.append(f"restricted to {len(acl.users)} named account(s), none of them {person.name}'s")
        for account in person.accounts:
            if account.status in INACTIVE and account.account_id in acl.users:
                because.append(
                    f"{account.source} account {account.account_id} is {account.status}: it no longer admits anyone"
                )
            if account.status == "guest" and source == "slack" and any(g.startswith("slack:") for g in acl.groups):
                because.append(
                    f"slack account {account.account_id} is a guest: guests read only the private "
                    "channels they are in; public channels admit full members of the workspace"
                )
        if not acl.groups and not acl.users:
            because.append("the document admits nobody (an empty ACL)")
    return Explanation(document_id, visible, tuple(because), instant(synced_at) if synced_at else None)
