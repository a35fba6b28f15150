"""Whose data an offline source is: the Slack workspace or Jira site that scopes document ids, URLs and ACL groups.

Identity comes from the data where it holds one (Slack: ``team_id`` on users and ``team``/``user_team`` on
messages, the workspace host in permalinks; Jira: the host of the issues' ``self`` URLs) and from the user's
setting otherwise (a Slack host only builds links: without one, threads get none). A setting that contradicts
the data, data that names two identities, or an identity found
nowhere is an :class:`IdentityError` that says which flag (or variable) to give: indexing a team's export under
someone else's workspace would give its documents wrong links and, worse, a wrong ACL group.

A data folder holds one identity per source (:func:`claim_identities`): its ids and ACL groups would otherwise
mix two workspaces in one collection without anyone having said so.
"""

from __future__ import annotations

import gzip
import json
import re
import zipfile
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rag_pipeline.sources.jira_dump import check_compression
from rag_pipeline.sources.problems import SourceError

_SLACK_HOST = re.compile(r"https?://([a-z0-9][a-z0-9-]*(?:\.enterprise)?\.slack\.com)/", re.IGNORECASE)
# Slack's own service hosts, never a workspace.
_SERVICE_HOSTS = frozenset({"files.slack.com", "app.slack.com", "api.slack.com", "hooks.slack.com", "www.slack.com"})
_TEAM_ID = re.compile(r"^[TE][A-Z0-9]{2,}$")
# Enough messages to find the workspace's team and host in any real export, few enough to stay instant.
_MESSAGE_FILES_SCANNED = 200
_JIRA_ISSUES_SCANNED = 5_000


class IdentityError(SourceError):
    """The identity of an offline source could not be settled; the message names the flag to give."""


@dataclass(frozen=True)
class SlackIdentity:
    """A Slack workspace: its team id (ids, ACL group) and host (permalinks)."""

    team_id: str
    domain: str | None  # None: the export links nowhere and no host was given, so threads get no links

    def describe(self) -> str:
        return f"workspace {self.team_id}" + (f" ({self.domain})" if self.domain else "")


@dataclass(frozen=True)
class JiraIdentity:
    """A Jira site: its host (ids, ACL groups, issue URLs)."""

    site: str

    def describe(self) -> str:
        return f"site {self.site}"


@dataclass(frozen=True)
class SlackClues:
    """What an export says about its workspace: team ids (of its users, of its messages' posters) and hosts,
    with how often each was seen."""

    user_teams: Counter[str]
    message_teams: Counter[str]
    hosts: Counter[str]

    @property
    def teams(self) -> Counter[str]:
        """``users.json`` lists the workspace's own members; posters include shared-channel guests, so they
        only count where the users say nothing."""
        return self.user_teams or self.message_teams


def slack_clues(path: str | Path) -> SlackClues:
    """Team ids from ``users.json`` and messages, hosts from permalinks (folder or zip export)."""
    user_teams: Counter[str] = Counter()
    message_teams: Counter[str] = Counter()
    hosts: Counter[str] = Counter()
    for name, text in _export_json_files(Path(path)):
        try:
            data = json.loads(text)
        except Exception:  # not JSON, nested too deep (RecursionError...): the reader reports the file
            continue  # identity only looks for clues
        if not isinstance(data, list):
            continue
        for entry in data:
            if not isinstance(entry, dict):
                continue
            is_users = name == "users.json"
            for key in ("team_id", "team") if is_users else ("user_team", "team"):
                value = entry.get(key)
                if isinstance(value, str) and _TEAM_ID.match(value):
                    (user_teams if is_users else message_teams)[value] += 1
                    break
        hosts.update(h for h in (m.lower() for m in _SLACK_HOST.findall(text)) if h not in _SERVICE_HOSTS)
    return SlackClues(user_teams, message_teams, hosts)


def _export_json_files(path: Path) -> Iterator[tuple[str, str]]:
    """(file name, text) of ``users.json`` then up to ``_MESSAGE_FILES_SCANNED`` day files."""
    if path.is_dir():
        users = path / "users.json"
        if users.is_file():
            yield "users.json", users.read_text(encoding="utf-8-sig", errors="replace")
        days = sorted(p for p in path.glob("*/*.json") if p.is_file())
        for day in days[:_MESSAGE_FILES_SCANNED]:
            yield day.name, day.read_text(encoding="utf-8-sig", errors="replace")
        return
    if not zipfile.is_zipfile(path):
        return
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if n.endswith(".json")]
        for name in sorted(names, key=lambda n: (not n.endswith("users.json"), n))[: _MESSAGE_FILES_SCANNED + 1]:
            yield name.rsplit("/", 1)[-1], archive.read(name).decode("utf-8-sig", errors="replace")


def _one(found: Counter[str], what: str, where: str, flag: str) -> str | None:
    """The single value the data names, None when it names none; a majority counts as one (the workspace's
    own team outnumbers guests of other teams, its own host the links to other workspaces)."""
    if not found:
        return None
    (top, count), total = found.most_common(1)[0], sum(found.values())
    if count * 2 > total:
        return top
    listed = ", ".join(f"{value} ({n})" for value, n in found.most_common(5))
    raise IdentityError(f"{where} names several {what}s ({listed}); pass {flag} to say which one it is")


def resolve_slack_identity(path: str | Path, team_id: str | None = None, domain: str | None = None) -> SlackIdentity:
    """The export's workspace: from its data, else from ``team_id``/``domain`` (the flags); an error names the
    flag when the data says nothing or something else."""
    where = f"Slack export {path}"
    clues = slack_clues(path)
    found_team = _one(clues.teams, "workspace team id", where, "--slack-team (SLACK_TEAM_ID)")
    found_domain = _one(clues.hosts, "workspace host", where, "--slack-domain (SLACK_WORKSPACE_DOMAIN)")
    team = _settle(found_team, team_id, where, "team id", "--slack-team", "SLACK_TEAM_ID", "T0123ABCD")
    if found_domain and domain and found_domain != domain.lower():
        raise IdentityError(
            f"{where} links to {found_domain}, but --slack-domain/SLACK_WORKSPACE_DOMAIN says {domain}; drop the "
            "setting or fix it"
        )
    # Without a host the threads get no links (never a wrong one); the command says so.
    host = found_domain or (domain.lower() if domain else None)
    return SlackIdentity(team, host)


def jira_sites(path: str | Path) -> Counter[str]:
    """Hosts of the ``self`` URLs of a JSON-lines dump's issues (gzipped or not)."""
    hosts: Counter[str] = Counter()
    target = Path(path)
    # A .gz that is not gzip would read as a dump naming no site, and the error would ask for --jira-site.
    opener = gzip.open if check_compression(target) else open
    try:
        with opener(target, "rt", encoding="utf-8-sig", errors="replace") as handle:
            for number, line in enumerate(handle):
                if number >= _JIRA_ISSUES_SCANNED:
                    break
                host = _self_host(line)
                if host:
                    hosts[host] += 1
    except (OSError, EOFError):
        pass  # the reader reports an unreadable dump
    return hosts


def _self_host(line: str) -> str | None:
    try:
        issue: Any = json.loads(line)
    except Exception:  # any line that does not decode (a RecursionError too) is the reader's to report
        return None
    url = issue.get("self") if isinstance(issue, dict) else None
    return urlparse(url).hostname if isinstance(url, str) and url.startswith("http") else None


def resolve_jira_identity(found: Counter[str], site: str | None, where: str) -> JiraIdentity:
    """The site of a dump or CSV export: from the hosts its data names (``found``), else from ``site``."""
    return JiraIdentity(
        _settle(
            _one(found, "site", where, "--jira-site (JIRA_SITE)"),
            site,
            where,
            "site",
            "--jira-site",
            "JIRA_SITE",
            "jira.acme.com",
        )
    )


def _settle(found: str | None, given: str | None, where: str, what: str, flag: str, variable: str, example: str) -> str:
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


def claim_identities(record: Path, identities: Mapping[str, SlackIdentity | JiraIdentity]) -> None:
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
        key = identity.team_id if isinstance(identity, SlackIdentity) else identity.site
        if before and before.get("key") != key:
            raise IdentityError(
                f"the data folder {record.parent} holds {source} from {before.get('described')}, not "
                f"{identity.describe()}; index each workspace/site into its own data folder (--data-dir / "
                "RAG_DATA_DIR)"
            )
        held[source] = {"key": key, "described": identity.describe(), **vars(identity)}
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(held, indent=2, sort_keys=True) + "\n")
