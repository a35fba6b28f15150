"""Whose Slack export this is: the team id on users and messages, the workspace host in permalinks."""

from __future__ import annotations

import json
import re
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline.sources.identity import IdentityError, one_value, settle

_SLACK_HOST = re.compile(r"https?://([a-z0-9][a-z0-9-]*(?:\.enterprise)?\.slack\.com)/", re.IGNORECASE)
# Slack's own service hosts, never a workspace.
_SERVICE_HOSTS = frozenset({"files.slack.com", "app.slack.com", "api.slack.com", "hooks.slack.com", "www.slack.com"})
_TEAM_ID = re.compile(r"^[TE][A-Z0-9]{2,}$")
# Enough messages to find the workspace's team and host in any real export, few enough to stay instant.
_MESSAGE_FILES_SCANNED = 200


@dataclass(frozen=True)
class SlackIdentity:
    """A Slack workspace: its team id (ids, ACL group) and host (permalinks)."""

    team_id: str
    domain: str | None  # None: the export links nowhere and no host was given, so threads get no links

    @property
    def key(self) -> str:
        return self.team_id

    def describe(self) -> str:
        return f"workspace {self.team_id}" + (f" ({self.domain})" if self.domain else "")


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


def resolve_slack_identity(path: str | Path, team_id: str | None = None, domain: str | None = None) -> SlackIdentity:
    """The export's workspace: from its data, else from ``team_id``/``domain`` (the flags); an error names the
    flag when the data says nothing or something else."""
    where = f"Slack export {path}"
    clues = slack_clues(path)
    found_team = one_value(clues.teams, "workspace team id", where, "--slack-team (SLACK_TEAM_ID)")
    found_domain = one_value(clues.hosts, "workspace host", where, "--slack-domain (SLACK_WORKSPACE_DOMAIN)")
    team = settle(found_team, team_id, where, "team id", "--slack-team", "SLACK_TEAM_ID", "T0123ABCD")
    if found_domain and domain and found_domain != domain.lower():
        raise IdentityError(
            f"{where} links to {found_domain}, but --slack-domain/SLACK_WORKSPACE_DOMAIN says {domain}; drop the "
            "setting or fix it"
        )
    # Without a host the threads get no links (never a wrong one); the command says so.
    host = found_domain or (domain.lower() if domain else None)
    return SlackIdentity(team, host)
