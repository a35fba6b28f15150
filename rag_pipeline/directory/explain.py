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
from rag_pipeline.sources.registry import AccessFacts, Source, registered_sources
from rag_pipeline.sources.registry import describe_group as registered_describe_group


def instant(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def describe_group(group: str) -> str:
    """An ACL group in words (the words of the registered source that owns it)."""
    return registered_describe_group(group) or f"group {group}"


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


def _document_container(source: Source | None, document_id: str) -> str | None:
    finder = source.access.document_container if source is not None else None
    return finder(document_id) if finder is not None else None


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
    registered = registered_sources().get(source)
    synced_at = person.synced.get(source)
    as_of = f"as of the directory sync of {instant(synced_at)}" if synced_at else "the directory has no sync of it"
    channel_id = _document_container(registered, document_id)
    channel = store.channel(source, channel_id) if channel_id else None
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
            part = registered.access.restricted_part if registered is not None else AccessFacts().restricted_part
            named = " or ".join(describe_group(g) for g in restriction)
            because.append(
                f"{part}: only {named} may read it, and {person.name} holds none of {', '.join(restriction)} ({as_of})"
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
            note = registered.access.guest_note if registered is not None and account.source == source else None
            said = (
                note(account.account_id, sorted(acl.groups)) if note is not None and account.status == "guest" else None
            )
            if said:
                because.append(said)
        if not acl.groups and not acl.users:
            because.append("the document admits nobody (an empty ACL)")
    return Explanation(document_id, visible, tuple(because), instant(synced_at) if synced_at else None)
