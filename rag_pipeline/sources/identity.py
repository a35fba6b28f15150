"""Whose data an offline source is: the workspace or site that scopes its document ids, URLs and ACL groups.

Identity comes from the data where it holds one and from the user's setting otherwise (each source's
``identity`` module says where it looks). A setting that contradicts the data, data that names two identities,
or an identity found nowhere is an :class:`IdentityError` that says which flag (or variable) to give: indexing
a team's export under someone else's workspace would give its documents wrong links and, worse, a wrong ACL
group.

A data folder holds one identity per source (:func:`claim_identities`): its ids and ACL groups would otherwise
mix two workspaces in one collection without anyone having said so.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rag_pipeline.sources.problems import SourceError


class IdentityError(SourceError):
    """The identity of an offline source could not be settled; the message names the flag to give."""


class SourceIdentity(Protocol):
    """Whose data a source holds: ``key`` is what must not change within one data folder (a Slack team id, a
    Jira site); ``describe`` says it in words. Implementations are frozen dataclasses (``vars`` is recorded)."""

    @property
    def key(self) -> str: ...

    def describe(self) -> str: ...


@dataclass(frozen=True)
class SiteIdentity:
    """A site named by its host (an Atlassian site: document ids, ACL groups, URLs); ``key`` is the host."""

    site: str

    @property
    def key(self) -> str:
        return self.site

    def describe(self) -> str:
        return f"site {self.site}"


def one_value(found: Counter[str], what: str, where: str, flag: str) -> str | None:
    """The single value the data names, None when it names none; a majority counts as one (the workspace's
    own team outnumbers guests of other teams, its own host the links to other workspaces)."""
    if not found:
        return None
    (top, count), total = found.most_common(1)[0], sum(found.values())
    if count * 2 > total:
        return top
    listed = ", ".join(f"{value} ({n})" for value, n in found.most_common(5))
    raise IdentityError(f"{where} names several {what}s ({listed}); pass {flag} to say which one it is")


def settle(found: str | None, given: str | None, where: str, what: str, flag: str, variable: str, example: str) -> str:
    if found and given and found.lower() != given.lower():
        raise IdentityError(
            f"{where} belongs to {what} {found}, but {flag}/{variable} says {given}; drop the setting or fix it"
        )
    value = found or given
    if not value:
        raise IdentityError(
            f"{where} does not say which {what} it is from; pass {flag} (e.g. {flag} {example}) or set {variable}"
        )
    return value


def claim_identities(record: Path, identities: Mapping[str, SourceIdentity]) -> None:
    """Record each source's identity in the data folder's ``record`` file, or refuse one whose team or site
    differs from what the folder already holds (its index would mix two workspaces or sites). A Slack host
    may change: it only builds links."""
    held: dict[str, dict[str, str | None]] = {}
    if record.is_file():
        try:
            held = json.loads(record.read_text())
        except ValueError:
            held = {}
    for source, identity in identities.items():
        before = held.get(source)
        key = identity.key
        if not key:  # a source with nothing configured (no dump) claims nothing
            continue
        if before and before.get("key") != key:
            raise IdentityError(
                f"the data folder {record.parent} holds {source} from {before.get('described')}, not "
                f"{identity.describe()}; index each workspace/site into its own data folder (--data-dir / "
                "RAG_DATA_DIR)"
            )
        held[source] = {"key": key, "described": identity.describe(), **vars(identity)}
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(held, indent=2, sort_keys=True) + "\n")
