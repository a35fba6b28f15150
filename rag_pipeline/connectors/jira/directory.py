"""Who is on a Jira site and what they may browse: from the REST API, or from a dump plus a directory file.

Groups follow the ACLs the Jira readers write: an issue without a security level is readable by
``jira:<site>:project:<KEY>`` (and, where the live reader resolved the permission scheme, by the concrete
``jira:<site>:group:<name>`` groups and role users holding Browse projects); an issue with a security level
by ``jira:<site>:security:<id>``. The directory gives each account the concrete groups it is in *and* the
project and security-level groups those grant, with the grant spelled out ("Browse projects on TIMOB via
group jira-devs"), so a reader resolved here matches both kinds of payload.

Live: every group (``group/bulk`` on Cloud, ``groups/picker`` on Server) and its members (``group/member``,
inactive accounts included so `whois` can say so), the Browse projects grants of each project (the live
reader's permission-scheme resolution) and the members of each security level. Offline: the people a dump
names (reporters, assignees, comment authors; no membership) and an optional directory file.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rag_pipeline.connectors.jira.dump import (
    JiraDumpReader,
    jira_group,
    project_group,
    role_actors,
    role_group,
    security_level_group,
)
from rag_pipeline.directory.accounts import Account, DirectorySnapshot, checked_account_id, checked_email
from rag_pipeline.directory.directory_file import DirectoryFileFormat
from rag_pipeline.directory.directory_file import read_directory_file as read_file
from rag_pipeline.sources.problems import RecordProblem, describe, shown

SOURCE = "jira"
FILE_FORMAT = DirectoryFileFormat(
    "Jira directory file",
    "--jira-directory, RAG_JIRA_DIRECTORY",
    "a group name, project:KEY or security:LEVEL_ID, role:KEY:NAME",
)
# Server's group picker answers at most this many groups in one call.
_GROUP_PICKER_LIMIT = 1000


def directory_file_group(site: str, entry: str) -> tuple[str, str]:
    """An entry of a directory file's ``groups`` column as (ACL group, grant): ``project:KEY`` (Browse projects
    on KEY), ``security:ID`` (an issue security level), ``role:KEY:NAME`` (project role NAME in KEY) or a Jira
    group name."""
    kind, _, name = entry.partition(":")
    if kind == "project" and name:
        return project_group(site, name), f"Browse projects on {name} (directory file)"
    project, _, role = name.partition(":")
    if kind == "role" and project and role:
        return role_group(site, project, role), f"project role {role} in {project} (directory file)"
    if kind == "security" and name:
        return security_level_group(site, name), f"security level {name} (directory file)"
    return jira_group(site, entry), f"member of Jira group {entry} (directory file)"


def read_directory_file(path: str | Path, site: str, snapshot: DirectorySnapshot) -> None:
    """Add a CSV directory file (``account_id,email,groups``; groups separated by ``;``) to ``snapshot``: for
    sites whose dump holds no membership. A row without an id is reported, the rest kept."""
    read_file(path, snapshot, lambda entry: directory_file_group(site, entry), FILE_FORMAT)


def _person_fields(person: object) -> tuple[object, object, object] | None:
    if not isinstance(person, Mapping):
        return None
    account_id = person.get("accountId") or person.get("name") or person.get("key")
    return account_id, person.get("emailAddress"), person.get("displayName")


def read_dump_directory(
    dump: str | Path, site: str, directory_file: str | Path | None = None, now: float | None = None
) -> DirectorySnapshot:
    """The directory of an offline Jira site: the people its dump names, and a directory file's memberships."""
    snapshot = DirectorySnapshot(SOURCE, site, time.time() if now is None else now)
    if directory_file is not None:
        read_directory_file(directory_file, site, snapshot)
    scan_problems: list[RecordProblem] = []  # the dump's own bad lines are the index run's to report
    for location, issue in JiraDumpReader(dump, site).issues(scan_problems):
        fields = issue.get("fields")
        if not isinstance(fields, Mapping):
            continue
        people: list[object] = [fields.get(k) for k in ("reporter", "assignee", "creator")]
        comments = (fields.get("comment") or {}).get("comments") if isinstance(fields.get("comment"), Mapping) else None
        people.extend(c.get("author") for c in comments or () if isinstance(c, Mapping))
        for person in people:
            found = _person_fields(person)
            if found is None or not found[0]:
                continue
            account_id = checked_account_id(found[0], location, snapshot.problems)
            if account_id is None or account_id in snapshot.accounts:
                continue
            name = found[2] if isinstance(found[2], str) else None
            snapshot.add(
                Account(SOURCE, site, account_id, name, checked_email(found[1], location, snapshot.problems), "named")
            )
    return snapshot


def _group_names(reader: Any, problems: list[RecordProblem]) -> list[str]:
    if reader.settings.cloud:
        return [g["name"] for g in reader.paged("list groups", None, "group/bulk") if isinstance(g, Mapping)]
    found = reader.get("list groups", None, "groups/picker", maxResults=_GROUP_PICKER_LIMIT) or {}
    names = [g["name"] for g in found.get("groups") or () if isinstance(g, Mapping) and g.get("name")]
    total = found.get("total")
    if isinstance(total, int) and not isinstance(total, bool) and total > len(names):
        # The picker answers one page; the groups past it are unknown, so their members hold none of the grants
        # that go through them (narrower, never wider) until the site has fewer groups than the picker shows.
        problems.append(
            RecordProblem(
                "jira groups/picker",
                f"{total} groups, {len(names)} listed (the picker's limit is {_GROUP_PICKER_LIMIT}); the members of "
                "the others get no grant through them",
            )
        )
    return names


def read_api_directory(
    reader: Any, projects: Iterable[str] | None = None, now: float | None = None
) -> DirectorySnapshot:
    """The directory through the REST API (``reader``: a :class:`~rag_pipeline.connectors.jira.api.JiraApiReader`).
    ``projects``: whose Browse grants to resolve (default: every project the reader discovers)."""
    site = reader.site
    snapshot = DirectorySnapshot(SOURCE, site, time.time() if now is None else now)
    calls_before = reader.stats.api_calls
    members_of: dict[str, list[str]] = {}
    for group in _group_names(reader, snapshot.problems):
        members_of[group] = []
        values = reader.paged(
            "list group members", f"group {group}", "group/member", groupname=group, includeInactiveUsers="true"
        )
        for number, user in enumerate(values, start=1):
            where = f"jira group {group} member {number}"
            fields = _person_fields(user)
            account_id = checked_account_id(fields[0] if fields else None, where, snapshot.problems)
            if account_id is None or not isinstance(user, Mapping):
                continue
            active = user.get("active", True) is not False
            name = user.get("displayName") if isinstance(user.get("displayName"), str) else None
            email = checked_email(user.get("emailAddress"), where, snapshot.problems)
            if account_id not in snapshot.accounts:
                snapshot.add(Account(SOURCE, site, account_id, name, email, "member" if active else "inactive"))
            snapshot.grant(account_id, jira_group(site, group), f"member of Jira group {group}")
            members_of[group].append(account_id)
    keys = list(projects) if projects is not None else [p.key for p in reader.discover_projects()]
    for key in keys:
        acl = reader.project_acl(key)
        if acl is None:
            snapshot.problems.append(
                RecordProblem(f"jira project {key}", "permission scheme unreadable; nobody gets its project group")
            )
            continue
        # Grants the resolution left out (anyone, application roles, the reporter...): reported, never widened.
        snapshot.problems.extend(getattr(reader, "acl_problems", {}).get(key, ()))
        target = project_group(site, key)
        for group in acl.groups:
            name = group.removeprefix(f"jira:{site}:group:")
            if name == group:
                continue
            for account_id in members_of.get(name, ()):
                snapshot.grant(account_id, target, f"Browse projects on {key} via group {name}")
        for account_id in acl.users:
            if account_id not in snapshot.accounts:
                snapshot.add(Account(SOURCE, site, account_id, status="named"))
            snapshot.grant(account_id, target, f"Browse projects on {key} as a project role member")
    for key in keys:
        _project_roles(reader, snapshot, key, members_of)
    _security_levels(reader, snapshot, members_of)
    snapshot.api_calls = reader.stats.api_calls - calls_before
    return snapshot


def _project_roles(reader: Any, snapshot: DirectorySnapshot, key: str, members_of: Mapping[str, list[str]]) -> None:
    """Members of every role of project ``key`` (user actors, and the members of group actors), for comments
    restricted to a role. A role that cannot be read grants nobody (its restricted comments stay hidden from all)
    and is reported."""
    site = snapshot.scope
    try:
        roles = reader.get("list project roles", f"project {key}", f"project/{key}/role") or {}
    except Exception as exc:
        snapshot.problems.append(RecordProblem(f"jira project {key} roles", f"unreadable: {describe(exc)}"))
        return
    for name, url in roles.items() if isinstance(roles, Mapping) else ():
        role_id = str(url).rstrip("/").rsplit("/", 1)[-1]
        try:
            role = reader.get("read a project role", f"project {key}", f"project/{key}/role/{role_id}") or {}
        except Exception as exc:
            snapshot.problems.append(
                RecordProblem(f"jira project {key} role {name}", f"unreadable: {describe(exc)}; it grants nobody")
            )
            continue
        target = role_group(site, key, str(name))
        groups, users = role_actors(role)
        for group in groups:
            for account_id in members_of.get(group, ()):
                snapshot.grant(account_id, target, f"project role {name} in {key} via group {group}")
        for account_id in users:
            if account_id not in snapshot.accounts:
                snapshot.add(Account(SOURCE, site, account_id, status="named"))
            snapshot.grant(account_id, target, f"project role {name} in {key}")


def _security_levels(reader: Any, snapshot: DirectorySnapshot, members_of: Mapping[str, list[str]]) -> None:
    """Members of every issue security level (a group or a user holder; other holders, such as the reporter,
    depend on the issue and are reported once)."""
    site = snapshot.scope
    try:
        schemes = (reader.get("list issue security schemes", None, "issuesecurityschemes") or {}).get(
            "issueSecuritySchemes"
        ) or []
    except Exception as exc:  # no permission to read schemes: issues with a level stay hidden to everyone
        snapshot.problems.append(RecordProblem("jira issue security schemes", f"unreadable: {describe(exc)}"))
        return
    for scheme in schemes:
        detail = reader.get("read an issue security scheme", None, f"issuesecurityschemes/{scheme.get('id')}") or {}
        for level in detail.get("levels") or ():
            level_id, level_name = str(level.get("id")), str(level.get("name") or level.get("id"))
            target = security_level_group(site, level_id)
            holders = reader.paged(
                "list security level members",
                f"security level {level_name}",
                "issuesecurityschemes/level/member",
                levelId=level_id,
            )
            for holder in holders:
                kind = (holder.get("holder") or {}).get("type") if isinstance(holder, Mapping) else None
                parameter = (holder.get("holder") or {}).get("parameter") if kind else None
                if kind == "group" and parameter:
                    for account_id in members_of.get(str(parameter), ()):
                        snapshot.grant(account_id, target, f'security level "{level_name}" via group {parameter}')
                elif kind == "user" and parameter:
                    if str(parameter) not in snapshot.accounts:
                        snapshot.add(Account(SOURCE, site, str(parameter), status="named"))
                    snapshot.grant(str(parameter), target, f'security level "{level_name}" as a named user')
                else:
                    snapshot.problems.append(
                        RecordProblem(
                            f"jira security level {level_name}",
                            f"holder {shown(holder)} depends on the issue; not resolved to people",
                        )
                    )
