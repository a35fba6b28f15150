"""Slack workspace export reader (directory or .zip): one document per thread."""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_pipeline.sources.document import Document
from rag_pipeline.sources.problems import RecordProblem, SourceError
from rag_pipeline.sources.slack_threads import (
    SlackChannel,
    ThreadDocumentBuilder,
    group_threads,
    user_display_name,
    valid_ts,
)

_DAY_FILE = re.compile(r"^\d{4}-\d{2}-\d{2}\.json$")


@dataclass
class SlackRead:
    """Documents read from an export plus the records that could not be read."""

    documents: list[Document] = field(default_factory=list)
    problems: list[RecordProblem] = field(default_factory=list)


class _ExportFiles:
    """Uniform access to an export folder or zip (whose root may be one folder deep)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._zip: zipfile.ZipFile | None = None
        self._names: set[str] = set()
        self._prefix = ""
        if path.is_dir():
            return
        if not zipfile.is_zipfile(path):
            raise SourceError(f"Slack export {path} is neither a directory nor a zip file")
        self._zip = zipfile.ZipFile(path)
        self._names = {n for n in self._zip.namelist() if not n.endswith("/")}
        manifest = min(
            (n for n in self._names if n.rsplit("/", 1)[-1] in ("channels.json", "groups.json")), key=len, default=""
        )
        self._prefix = manifest.rsplit("/", 1)[0] + "/" if "/" in manifest else ""

    def exists(self, rel: str) -> bool:
        if self._zip is None:
            return (self.path / rel).exists()
        return self._prefix + rel in self._names

    def read_json(self, rel: str) -> Any:
        if self._zip is None:
            return json.loads((self.path / rel).read_text(encoding="utf-8"))
        return json.loads(self._zip.read(self._prefix + rel).decode("utf-8"))

    def day_files(self, folder: str) -> list[str]:
        if self._zip is None:
            base = self.path / folder
            return (
                sorted(f"{folder}/{p.name}" for p in base.glob("*.json") if _DAY_FILE.match(p.name))
                if base.is_dir()
                else []
            )
        start = f"{self._prefix}{folder}/"
        return sorted(
            n[len(self._prefix) :] for n in self._names if n.startswith(start) and _DAY_FILE.match(n[len(start) :])
        )


class SlackExportReader:
    """Reads a Slack export (``channels.json``, ``groups.json``, ``users.json``, ``<channel>/<day>.json``).

    ``team_id`` scopes document ids and the workspace ACL group; ``workspace_domain`` builds
    permalinks.
    """

    def __init__(self, path: str | Path, team_id: str, workspace_domain: str | None = None) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise SourceError(f"Slack export not found: {self.path}")
        self.team_id = team_id
        self.workspace_domain = workspace_domain
        self._files = _ExportFiles(self.path)
        if not self._files.exists("channels.json") and not self._files.exists("groups.json"):
            raise SourceError(f"Slack export {self.path} has no channels.json or groups.json")
        users = self._files.read_json("users.json") if self._files.exists("users.json") else []
        self.user_names = {u["id"]: user_display_name(u) for u in users}
        external = {u["id"] for u in users if u.get("team_id") not in (None, team_id)}
        self.channels = self._read_channels(external)
        self._builder = ThreadDocumentBuilder(team_id, workspace_domain, self.user_names.get, self._channel_name)

    def _read_channels(self, external_users: set[str]) -> dict[str, SlackChannel]:
        channels: dict[str, SlackChannel] = {}
        for manifest, private in (("channels.json", False), ("groups.json", True)):
            if not self._files.exists(manifest):
                continue
            for raw in self._files.read_json(manifest):
                members = tuple(raw.get("members") or ())
                channels[raw["id"]] = SlackChannel(
                    id=raw["id"],
                    name=raw.get("name", raw["id"]),
                    is_private=private or bool(raw.get("is_private")),
                    is_archived=bool(raw.get("is_archived")),
                    members=members,
                    external_members=tuple(m for m in members if m in external_users)
                    if raw.get("is_ext_shared")
                    else (),
                )
        return channels

    def read(self, channel_ids: Iterable[str] | None = None) -> SlackRead:
        """Every thread of the given channels (all when None)."""
        out = SlackRead()
        wanted = set(channel_ids) if channel_ids is not None else None
        for channel in self.channels.values():
            if wanted is not None and channel.id not in wanted:
                continue
            folder = channel.name if self._files.day_files(channel.name) else channel.id
            messages = list(self._messages(folder, out.problems))
            out.documents.extend(self._threads(channel, messages, out.problems))
        return out

    def _messages(self, folder: str, problems: list[RecordProblem]) -> Iterator[dict[str, Any]]:
        for rel in self._files.day_files(folder):
            try:
                day = self._files.read_json(rel)
            except (ValueError, UnicodeDecodeError) as exc:
                problems.append(RecordProblem(f"{self.path}/{rel}", f"not valid JSON: {exc}"))
                continue
            if not isinstance(day, list):
                problems.append(RecordProblem(f"{self.path}/{rel}", "expected a JSON list of messages"))
                continue
            for i, msg in enumerate(day):
                if not isinstance(msg, dict) or not valid_ts(msg.get("ts")):
                    problems.append(RecordProblem(f"{self.path}/{rel}[{i}]", "message without a valid 'ts'"))
                    continue
                yield msg

    def _threads(
        self, channel: SlackChannel, messages: list[dict[str, Any]], problems: list[RecordProblem]
    ) -> Iterator[Document]:
        for thread_ts, by_ts in group_threads(messages).items():
            try:
                doc = self._builder.build(channel, thread_ts, by_ts)
            except (KeyError, TypeError, ValueError) as exc:
                problems.append(
                    RecordProblem(f"{self.path}/{channel.name} thread {thread_ts}", f"{type(exc).__name__}: {exc}")
                )
                continue
            if doc is not None:
                yield doc

    def _channel_name(self, channel_id: str) -> str | None:
        channel = self.channels.get(channel_id)
        return channel.name if channel else None
