"""Who may read a Confluence page: ACL group names, read restrictions along the page tree, space grants.

Confluence's rule (its permissions documentation): a person sees a page when they may *view the space* (a space
permission given to them, to one of their groups, or to anonymous users) **and** they pass *every view
restriction* on the page and on each of its ancestors: a restricted ancestor hides all its descendants, and a
restriction admits the users it lists and the members of the groups it lists. Edit restrictions do not hide.

As ACL groups (the strings the index payload and the directory share, like Jira's):

* ``confluence:<site>:space:<KEY>``: may view space KEY;
* ``confluence:<site>:group:<name>``: a member of Confluence group ``name``;
* ``confluence:<site>:restricted:<pageId>``: passes every view restriction from the space root down to page
  ``pageId`` (the nearest restricted page of a chain). The directory grants it to the *intersection* over every
  restricted level of the chain of (users listed ∪ members of the groups listed).

A document's ACL (:func:`document_acl`): unrestricted chain → the space group (``public`` for a space anonymous
users may view); restricted chain → ``groups=(restricted:<nearest>,)`` with ``restricted_to=(space group,)``, so
a reader needs both (in an anonymous space, the restriction alone). A chain whose restrictions cannot all be read
fails closed: ``Acl()``, which nobody holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rag_pipeline.connectors.atlassian.groups import describe_site_group, site_group_builder
from rag_pipeline.sources.document import Acl

PREFIX = "confluence"


# ACL group of everyone who may view a space (its key the name).
space_group = site_group_builder(PREFIX, "space")
# ACL group of the members of one Confluence group.
confluence_group = site_group_builder(PREFIX, "group")
# ACL group of those who pass every view restriction down to a page (its id the name): its restricted chain.
restricted_group = site_group_builder(PREFIX, "restricted")
_DESCRIBED = {
    "space": "people who may view Confluence space {name} on {site}",
    "group": "Confluence group {name} on {site}",
    "restricted": "people who pass every view restriction down to Confluence page {name} on {site}",
}


def describe_group(parts: Sequence[str]) -> str | None:
    """A Confluence ACL group (split on ``:``) in words, for ``explain``; None when it is not one."""
    return describe_site_group(parts, PREFIX, _DESCRIBED)
    site, kind, name = parts[1], parts[2], ":".join(parts[3:])
    if kind == "space":
        return f"people who may view Confluence space {name} on {site}"
    if kind == "group":
        return f"Confluence group {name} on {site}"
    if kind == "restricted":
        return f"people who pass every view restriction down to Confluence page {name} on {site}"
    return None


# The grants a directory writes next to each group (what ``whois`` and ``explain`` show as "which grant decides").
def space_grant(space_key: str, group: str | None = None) -> str:
    return f"View space {space_key} via group {group}" if group else f"View space {space_key} as a named user"


def group_grant(name: str) -> str:
    return f"member of Confluence group {name}"


def restricted_grant(chain: Sequence[ReadRestriction]) -> str:
    levels = ", ".join(f"page {r.content_id}" for r in chain)
    return f"passes the view restrictions of {levels}"


def person_id(person: object) -> str | None:
    """The id a directory and a restriction share: Cloud ``accountId``, else Data Center ``username`` (then
    ``userKey``)."""
    if not isinstance(person, Mapping):
        return None
    for key in ("accountId", "username", "userKey"):
        value = person.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


@dataclass(frozen=True)
class ReadRestriction:
    """The view restriction of one page or blog post: the users and groups it admits (none: unrestricted)."""

    content_id: str
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()

    @property
    def restricted(self) -> bool:
        return bool(self.users or self.groups)


def _results(listing: Any, what: str) -> list[Any]:
    """The ``results`` of a (possibly paged) expansion; ValueError when it says more exist than it holds, which
    would make a restriction look narrower or wider than it is."""
    if listing is None:
        return []
    if not isinstance(listing, Mapping):
        raise ValueError(f"{what} is not an object")
    results = listing.get("results") or []
    if not isinstance(results, list):
        raise ValueError(f"{what} results are not a list")
    total = listing.get("totalSize")
    links = listing.get("_links")
    if (isinstance(total, int) and total > len(results)) or (isinstance(links, Mapping) and links.get("next")):
        raise ValueError(f"{what} lists {len(results)} of more entries (truncated)")
    return results


def read_restriction(content_id: str, read: Any) -> ReadRestriction:
    """A ``restrictions.read`` object (``{"operation": "read", "restrictions": {"user": {"results": [...]},
    "group": {"results": [...]}}}``) as a :class:`ReadRestriction`. ValueError when it is not one, or when a list
    is truncated: the caller then asks the restriction endpoint, or fails closed."""
    if not isinstance(read, Mapping) or not isinstance(read.get("restrictions"), Mapping):
        raise ValueError(f"the read restrictions of {content_id} are missing or not an object")
    restrictions = read["restrictions"]
    users = []
    for user in _results(restrictions.get("user"), f"the read restriction users of {content_id}"):
        found = person_id(user)
        if found is None:
            raise ValueError(f"a read restriction user of {content_id} has no id")
        users.append(found)
    groups = []
    for group in _results(restrictions.get("group"), f"the read restriction groups of {content_id}"):
        name = group.get("name") if isinstance(group, Mapping) else None
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a read restriction group of {content_id} has no name")
        groups.append(name.strip())
    return ReadRestriction(content_id, tuple(dict.fromkeys(users)), tuple(dict.fromkeys(groups)))


def restricted_levels(chain: Sequence[ReadRestriction]) -> list[ReadRestriction]:
    """The levels of a root-to-page chain that restrict viewing."""
    return [level for level in chain if level.restricted]


def document_acl(site: str, space_key: str, anonymous: bool, chain: Sequence[ReadRestriction] | None) -> Acl:
    """A page's ACL from its space and its chain's restrictions (root first, the page last); ``chain`` None
    (a restriction that could not be read) fails closed."""
    if chain is None:
        return Acl()
    restricted = restricted_levels(chain)
    if not restricted:
        return Acl(public=True) if anonymous else Acl(groups=(space_group(site, space_key),))
    nearest = restricted_group(site, restricted[-1].content_id)
    if anonymous:
        return Acl(groups=(nearest,))
    return Acl(groups=(nearest,), restricted_to=(space_group(site, space_key),))


def chain_members(chain: Sequence[ReadRestriction], members_of: Mapping[str, Iterable[str]]) -> set[str]:
    """Who passes every restricted level of ``chain``: the intersection over the levels of (users listed ∪
    members of the groups listed). Empty when no level restricts (nobody needs the group then)."""
    passing: set[str] | None = None
    for level in restricted_levels(chain):
        admitted = set(level.users)
        for group in level.groups:
            admitted.update(members_of.get(group, ()))
        passing = admitted if passing is None else passing & admitted
    return passing or set()


@dataclass(frozen=True)
class SpaceGrants:
    """Who may view a space: users and groups holding its ``read`` permission, and whether anonymous users do."""

    key: str
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    anonymous: bool = False
    # What the permission says of each named user: (account id, display name, email). A user granted the space
    # by name alone is in no group listing, so this is where the directory learns their email (to join people).
    people: tuple[tuple[str, str | None, str | None], ...] = ()


def space_grants(key: str, permissions: Any, anonymous: bool = False) -> SpaceGrants:
    """A space's ``permissions`` (REST v1 ``space?expand=permissions``: ``{"operation": {"operation": "read",
    "targetType": "space"}, "subjects": {"user": {"results": [...]}, "group": {"results": [...]}},
    "anonymousAccess": bool}``) as the view grants; other operations (create, administer...) are ignored.
    ValueError when ``permissions`` is not a list."""
    if permissions is None:
        permissions = []
    if not isinstance(permissions, list):
        raise ValueError(f"the permissions of space {key} are not a list")
    users: list[str] = []
    groups: list[str] = []
    people: dict[str, tuple[str, str | None, str | None]] = {}
    for grant in permissions:
        if not isinstance(grant, Mapping):
            continue
        operation = grant.get("operation") or {}
        if not isinstance(operation, Mapping) or operation.get("operation") != "read":
            continue
        if operation.get("targetType") not in (None, "space"):
            continue
        if grant.get("anonymousAccess") is True:
            anonymous = True
        subjects = grant.get("subjects") or {}
        if not isinstance(subjects, Mapping):
            continue
        for user in _results(subjects.get("user"), f"the users of space {key}'s view permission"):
            found = person_id(user)
            if found:
                users.append(found)
                name, email = user.get("displayName"), user.get("email")
                people[found] = (
                    found,
                    name if isinstance(name, str) else None,
                    email if isinstance(email, str) else None,
                )
        for group in _results(subjects.get("group"), f"the groups of space {key}'s view permission"):
            name = group.get("name") if isinstance(group, Mapping) else None
            if isinstance(name, str) and name.strip():
                groups.append(name.strip())
    return SpaceGrants(
        key, tuple(dict.fromkeys(users)), tuple(dict.fromkeys(groups)), anonymous, tuple(people.values())
    )
