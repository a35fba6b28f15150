"""Slack workspace export reader (directory or .zip): one document per thread."""

from __future__ import annotations

import json
import re
import zipfile
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_pipeline.sources.document import Acl, Document, content_hash, epoch_to_datetime
from rag_pipeline.sources.problems import RecordProblem, SourceError
from rag_pipeline.text.clean import clean_text
from rag_pipeline.text.slack_markup import slack_to_text

SOURCE = "slack"
# Messages that carry what people wrote. Everything else (joins, leaves, topic/purpose/name
# changes, pins, bot messages, ...) is system noise and dropped.
CONTENT_SUBTYPES = frozenset({None, "thread_broadcast", "me_message", "file_share", "tombstone"})
_DAY_FILE = re.compile(r"^\d{4}-\d{2}-\d{2}\.json$")


def workspace_group(team_id: str) -> str:
    """ACL group of everyone in the workspace (readers of public channels)."""
    return f"slack:{team_id}:members"


def thread_document_id(team_id: str, channel_id: str, thread_ts: str) -> str:
    return f"slack:{team_id}:{channel_id}:{thread_ts}"


@dataclass(frozen=True)
class SlackChannel:
    """A channel from the export manifest."""

    id: str
    name: str
    is_private: bool = False
    is_archived: bool = False
    members: tuple[str, ...] = ()


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
        self.channels = self._read_channels()
        self.user_names = self._read_users()

    def _read_channels(self) -> dict[str, SlackChannel]:
        channels: dict[str, SlackChannel] = {}
        for manifest, private in (("channels.json", False), ("groups.json", True)):
            if not self._files.exists(manifest):
                continue
            for raw in self._files.read_json(manifest):
                channels[raw["id"]] = SlackChannel(
                    id=raw["id"],
                    name=raw.get("name", raw["id"]),
                    is_private=private or bool(raw.get("is_private")),
                    is_archived=bool(raw.get("is_archived")),
                    members=tuple(raw.get("members") or ()),
                )
        return channels

    def _read_users(self) -> dict[str, str]:
        if not self._files.exists("users.json"):
            return {}
        names = {}
        for user in self._files.read_json("users.json"):
            profile = user.get("profile") or {}
            names[user["id"]] = (
                profile.get("display_name")
                or user.get("real_name")
                or profile.get("real_name")
                or user.get("name")
                or user["id"]
            )
        return names

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
                if not isinstance(msg, dict) or not _valid_ts(msg.get("ts")):
                    problems.append(RecordProblem(f"{self.path}/{rel}[{i}]", "message without a valid 'ts'"))
                    continue
                yield msg

    def _threads(
        self, channel: SlackChannel, messages: list[dict[str, Any]], problems: list[RecordProblem]
    ) -> Iterator[Document]:
        threads: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        for msg in messages:
            if msg.get("subtype") not in CONTENT_SUBTYPES:
                continue
            thread_ts = msg.get("thread_ts") or msg["ts"]
            # Dedupe by ts: a broadcast reply shows up in the channel and in its thread.
            previous = threads[thread_ts].get(msg["ts"])
            if previous is None or _edited_ts(msg) > _edited_ts(previous):
                threads[thread_ts][msg["ts"]] = msg
        for thread_ts, by_ts in threads.items():
            try:
                doc = self._thread_document(channel, thread_ts, by_ts)
            except (KeyError, TypeError, ValueError) as exc:
                problems.append(
                    RecordProblem(f"{self.path}/{channel.name} thread {thread_ts}", f"{type(exc).__name__}: {exc}")
                )
                continue
            if doc is not None:
                yield doc

    def _thread_document(
        self, channel: SlackChannel, thread_ts: str, by_ts: dict[str, dict[str, Any]]
    ) -> Document | None:
        ordered = [by_ts[ts] for ts in sorted(by_ts, key=float)]
        root = by_ts.get(thread_ts)
        root_deleted = root is not None and root.get("subtype") == "tombstone"
        lines: list[str] = []
        authors: list[str] = []
        for msg in ordered:
            if msg.get("subtype") == "tombstone":
                continue
            author = self._author(msg)
            text = clean_text(slack_to_text(msg.get("text") or "", self.user_names.get, self._channel_name))
            if not text:
                continue
            lines.append(f"{author}: {text}")
            if author not in authors:
                authors.append(author)
        if not lines:
            return None  # a deleted message with no replies: nothing left to index
        version = max(max(float(m["ts"]), float(m.get("latest_reply") or 0), _edited_ts(m)) for m in ordered)
        body = "\n".join(lines)
        title_source = lines[0].split(": ", 1)[-1]
        title = f"#{channel.name}: {title_source[:100]}"
        acl = Acl(users=channel.members) if channel.is_private else Acl(groups=(workspace_group(self.team_id),))
        return Document(
            id=thread_document_id(self.team_id, channel.id, thread_ts),
            source=SOURCE,
            container=channel.id,
            title=title,
            text=body,
            url=self._permalink(channel.id, thread_ts),
            authors=tuple(authors),
            created=epoch_to_datetime(float(thread_ts)),
            updated=epoch_to_datetime(version),
            version=version,
            content_hash=content_hash(body),
            acl=acl,
            metadata={
                "channel_name": channel.name,
                "thread_ts": thread_ts,
                "message_count": len(lines),
                "root_deleted": root_deleted,
                "private": channel.is_private,
            },
        )

    def _author(self, msg: dict[str, Any]) -> str:
        uid = msg.get("user") or msg.get("bot_id") or "unknown"
        return (
            self.user_names.get(uid)
            or msg.get("user_name")
            or (msg.get("user_profile") or {}).get("display_name")
            or uid
        )

    def _channel_name(self, channel_id: str) -> str | None:
        channel = self.channels.get(channel_id)
        return channel.name if channel else None

    def _permalink(self, channel_id: str, thread_ts: str) -> str | None:
        if not self.workspace_domain:
            return None
        return f"https://{self.workspace_domain}/archives/{channel_id}/p{thread_ts.replace('.', '')}"


def _valid_ts(ts: Any) -> bool:
    try:
        float(ts)
    except (TypeError, ValueError):
        return False
    return True


def _edited_ts(msg: dict[str, Any]) -> float:
    edited = msg.get("edited") or {}
    try:
        return float(edited.get("ts") or 0)
    except (TypeError, ValueError):
        return 0.0
