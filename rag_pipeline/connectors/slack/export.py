"""Slack workspace export reader (directory or .zip): one document per thread.

An export is input from outside, so the reader trusts none of it: it reads nothing outside the export (no
channel folder named ``../x``, no symlink leading out, no zip entry named ``../x`` or ``/x``), checks every
channel id at entry (it becomes a partition key and a path component), and turns each unreadable manifest,
file, message or thread into a :class:`RecordProblem` with its location while the rest is still read. A
manifest (``channels.json``, ``groups.json``, ``users.json``) that parses but is not a JSON list is not a bad
record but another format: :class:`UnreadableSource`, naming the file and the shape expected.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from rag_pipeline.connectors.slack.threads import (
    SlackChannel,
    ThreadDocumentBuilder,
    checked_message,
    group_threads,
    user_display_name,
)
from rag_pipeline.sources.document import Document
from rag_pipeline.sources.identifiers import InvalidIdentifier, check_container_id
from rag_pipeline.sources.problems import RecordProblem, SourceError, UnreadableSource, describe, shown
from rag_pipeline.text.clean import clean_title

_DAY_FILE = re.compile(r"^\d{4}-\d{2}-\d{2}\.json$")
_MANIFESTS = ("channels.json", "groups.json")


# Fields of a user record that say where it stands: its own team, and the guest flags.
STATUS_FIELDS = ("team_id", "is_restricted", "is_ultra_restricted")


def user_team(user: Any) -> str | None:
    """The team a ``users.list`` / ``users.json`` record belongs to (``team_id``, else ``profile.team``); None when
    the record names none."""
    if not isinstance(user, dict):
        return None
    team = user.get("team_id")
    if not isinstance(team, str) or not team:
        profile = user.get("profile")
        team = profile.get("team") if isinstance(profile, dict) else None
    return team if isinstance(team, str) and team else None


def export_marks_status(users: Iterable[Any]) -> bool:
    """Whether any user record of an export carries its team or a guest flag. Slack's own exports carry them for
    every user; an export converted from elsewhere may carry none, and then cannot tell guests or other teams'
    users from members (its readers treat everyone as a member). One record that carries one means the export
    does say, and a record without them is then not counted as a member."""
    return any(isinstance(u, dict) and (any(f in u for f in STATUS_FIELDS) or user_team(u) is not None) for u in users)


class OutsideExport(OSError):
    """A path of the export that resolves outside it (a symlink); it is not read."""


@dataclass
class SlackRead:
    """Documents read from an export plus the records that could not be read."""

    documents: list[Document] = field(default_factory=list)
    problems: list[RecordProblem] = field(default_factory=list)


def is_safe_name(name: object) -> bool:
    """True for a single file or folder name: no separator, not ``.``/``..``, no NUL, a sane length."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= 255
        and name not in (".", "..")
        and not any(c in name for c in "/\\\x00")
    )


def _is_safe_entry(name: str) -> bool:
    """True for a zip entry name that stays inside the archive's tree: relative, no ``..``/``.`` or empty
    component, no backslash or drive letter (which Windows tools would resolve)."""
    if not name or name.startswith("/") or "\\" in name or "\x00" in name or re.match(r"^[A-Za-z]:", name):
        return False
    parts = name.rstrip("/").split("/")
    return all(part not in ("", ".", "..") for part in parts)


def _decode(data: bytes, where: str, problems: list[RecordProblem]) -> str:
    """UTF-8 text of a file; an invalid byte is reported and replaced (U+FFFD), so one bad byte costs a
    character and not the whole file."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        problems.append(
            RecordProblem(where, f"invalid UTF-8 at byte {exc.start:,}; read with U+FFFD in place of bad bytes")
        )
        return data.decode("utf-8-sig", errors="replace")


def _json_type(value: object) -> str:
    """The JSON name of a parsed value's type (``object``, not Python's ``dict``)."""
    names = {dict: "object", list: "list", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


class _ExportFiles:
    """Uniform access to an export folder or zip (whose root may be one folder deep), confined to it."""

    def __init__(self, path: Path, problems: list[RecordProblem]) -> None:
        self.path = path
        self._zip: zipfile.ZipFile | None = None
        self._names: set[str] = set()
        self._prefix = ""
        if path.is_dir():
            self._root = path.resolve()
            return
        if not zipfile.is_zipfile(path):
            raise SourceError(f"Slack export {path} is neither a directory nor a zip file")
        try:
            self._zip = zipfile.ZipFile(path)
            names = [n for n in self._zip.namelist() if not n.endswith("/")]
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise SourceError(f"Slack export {path} is not a readable zip file: {describe(exc)}") from exc
        unsafe = sorted(n for n in names if not _is_safe_entry(n))
        if unsafe:
            # Nothing is extracted, but a channel named "../x" must not find "../x/<day>.json" either.
            problems.append(
                RecordProblem(
                    str(path),
                    f"{len(unsafe)} zip entries with names leading outside the export ignored: "
                    + ", ".join(shown(n, 60) for n in unsafe[:5]),
                )
            )
        self._names = set(names) - set(unsafe)
        manifest = min(
            (n for n in self._names if n.rsplit("/", 1)[-1] in _MANIFESTS),
            key=lambda n: (n.count("/"), len(n)),
            default="",
        )
        self._prefix = manifest.rsplit("/", 1)[0] + "/" if "/" in manifest else ""

    def where(self, rel: str) -> str:
        return f"{self.path}/{rel}"

    def _inside(self, rel: str) -> Path | None:
        """The folder export's path of ``rel`` if it resolves inside the export (symlinks followed)."""
        target = (self.path / rel).resolve()
        return target if target == self._root or target.is_relative_to(self._root) else None

    def exists(self, rel: str) -> bool:
        if self._zip is None:
            return (self.path / rel).exists() or (self.path / rel).is_symlink()
        return self._prefix + rel in self._names

    def read_text(self, rel: str, problems: list[RecordProblem]) -> str:
        """A file's text (a bad UTF-8 byte reported in ``problems``); OutsideExport when it resolves outside
        the export, OSError or a zip error when it cannot be read."""
        if self._zip is None:
            target = self._inside(rel)
            if target is None:
                raise OutsideExport(f"{rel} leads outside the export (a symlink); not read")
            data = target.read_bytes()
        else:
            data = self._zip.read(self._prefix + rel)
        return _decode(data, self.where(rel), problems)

    def day_files(self, folder: str) -> list[str]:
        """The day files of a channel folder (none for a name that is not one folder's); OutsideExport for a
        folder that resolves outside the export."""
        if not is_safe_name(folder):
            return []
        if self._zip is None:
            base = self.path / folder
            if not base.is_dir():
                return []
            if self._inside(folder) is None:
                raise OutsideExport(f"folder {folder} leads outside the export (a symlink); not read")
            return sorted(f"{folder}/{p.name}" for p in base.iterdir() if _DAY_FILE.match(p.name))
        start = f"{self._prefix}{folder}/"
        return sorted(
            n[len(self._prefix) :] for n in self._names if n.startswith(start) and _DAY_FILE.match(n[len(start) :])
        )

    def folders(self) -> set[str]:
        """The export's top-level folder names (channel folders, by name or id)."""
        if self._zip is None:
            return {p.name for p in self.path.iterdir() if p.is_dir()}
        return {
            PurePosixPath(n[len(self._prefix) :]).parts[0]
            for n in self._names
            if n.startswith(self._prefix) and "/" in n[len(self._prefix) :]
        }


class SlackExportReader:
    """Reads a Slack export (``channels.json``, ``groups.json``, ``users.json``, ``<channel>/<day>.json``).

    ``team_id`` scopes document ids and the workspace ACL group; ``workspace_domain`` builds
    permalinks. Problems found in the manifests are kept in ``problems`` and reported with every read.
    """

    def __init__(self, path: str | Path, team_id: str, workspace_domain: str | None = None) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise SourceError(f"Slack export not found: {self.path}")
        self.team_id = team_id
        self.workspace_domain = workspace_domain
        self.problems: list[RecordProblem] = []
        self._files = _ExportFiles(self.path, self.problems)
        present = [m for m in _MANIFESTS if self._files.exists(m)]
        if not present:
            raise SourceError(f"Slack export {self.path} has no channels.json or groups.json")
        users = list(self._entries("users.json")) if self._files.exists("users.json") else []
        self.user_names = {str(u["id"]): user_display_name(u) for _, u in users}
        # External members of a shared channel are named in its threads' ACL (they hold no workspace group). A
        # user whose team is not given counts as external where the export says teams at all: naming a member
        # of the channel in its ACL never widens it. An export that names no team for anyone (the bundled Ubuntu
        # export) keeps every user in the workspace, as before: it cannot tell, and its channels are not shared.
        marked = export_marks_status(u for _, u in users)
        external = {str(u["id"]) for _, u in users if (user_team(u) or (None if marked else team_id)) != team_id}
        self._folders: dict[str, str] = {}
        self.channels = self._read_channels(external)
        if "channels.json" not in present:
            self._report_unlisted("channels.json")
        self._builder = ThreadDocumentBuilder(team_id, workspace_domain, self.user_names.get, self._channel_name)

    def _entries(self, manifest: str) -> Iterator[tuple[int, dict[str, Any]]]:
        """The objects of a manifest (a JSON list) that carry an ``id``, with their index; everything else is a
        problem naming the file (and the entry)."""
        where = self._files.where(manifest)
        try:
            entries = json.loads(self._files.read_text(manifest, self.problems))
        except Exception as exc:  # unreadable, outside, not JSON: the manifest's problem, not the export's end
            self.problems.append(RecordProblem(where, f"unreadable: {describe(exc)}"))
            return
        if not isinstance(entries, list):
            # Not one bad record but a file of another format (an object wrapping the list, another tool's
            # export): reading on would index an export without its channels or names and say nothing.
            raise UnreadableSource(
                f'{where} is a JSON {_json_type(entries)}, not the list of objects with an "id" a Slack export\'s '
                f"{manifest} holds; is {self.path} a Slack workspace export?"
            )
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not entry["id"]:
                self.problems.append(RecordProblem(f"{where}[{i}]", f"entry without an id: {shown(entry)}"))
                continue
            yield i, entry

    def _read_channels(self, external_users: set[str]) -> dict[str, SlackChannel]:
        channels: dict[str, SlackChannel] = {}
        for manifest, private in (("channels.json", False), ("groups.json", True)):
            if not self._files.exists(manifest):
                continue
            for i, raw in self._entries(manifest):
                where = f"{self._files.where(manifest)}[{i}]"
                try:
                    channel, folder = self._channel(raw, private, external_users, where)
                except InvalidIdentifier as exc:
                    self.problems.append(RecordProblem(where, f"{exc}; channel not read"))
                    continue
                previous = channels.get(channel.id)
                if previous is not None:
                    # Listing a channel as private anywhere must never make it readable by the workspace.
                    kept = channel if channel.is_private and not previous.is_private else previous
                    self.problems.append(
                        RecordProblem(where, f"channel {channel.id} listed twice; kept the {kept.name!r} entry")
                    )
                    if kept is previous:
                        continue
                channels[channel.id] = channel
                self._folders[channel.id] = folder
        return channels

    def _channel(
        self, raw: dict[str, Any], private: bool, external_users: set[str], where: str
    ) -> tuple[SlackChannel, str]:
        """A manifest entry as a channel, and the folder its day files are in (its name, else its id)."""
        channel_id = check_container_id(raw["id"], "Slack channel id")
        name = raw.get("name")
        if name is None:
            name = channel_id
        folder = name if is_safe_name(name) else channel_id
        if folder != name:
            self.problems.append(
                RecordProblem(
                    where, f"channel name {shown(name)} is not a folder name inside the export; read folder {folder!r}"
                )
            )
        members_raw = raw.get("members")
        if members_raw is not None and not isinstance(members_raw, list):
            self.problems.append(RecordProblem(where, f"members {shown(members_raw)} is not a list; none kept"))
        members = tuple(m for m in members_raw or () if isinstance(m, str)) if isinstance(members_raw, list) else ()
        channel = SlackChannel(
            id=channel_id,
            name=clean_title(name) if isinstance(name, str) else channel_id,
            is_private=private or bool(raw.get("is_private")),
            is_archived=bool(raw.get("is_archived")),
            members=members,
            external_members=tuple(m for m in members if m in external_users) if raw.get("is_ext_shared") else (),
        )
        return channel, folder

    def _report_unlisted(self, manifest: str) -> None:
        """A missing manifest: what it would have listed cannot be read, which must be seen, not silent."""
        known = set(self._folders.values()) | set(self.channels)
        unlisted = sorted(self._files.folders() - known)
        detail = f"; {len(unlisted)} folder(s) not read: {', '.join(unlisted[:10])}" if unlisted else ""
        self.problems.append(
            RecordProblem(
                self._files.where(manifest),
                f"missing: public channels cannot be listed, only the private ones of groups.json are read{detail}",
            )
        )

    def read(self, channel_ids: Iterable[str] | None = None) -> SlackRead:
        """Every thread of the given channels (all when None), with the problems of the manifests too."""
        out = SlackRead(problems=list(self.problems))
        wanted = set(channel_ids) if channel_ids is not None else None
        for channel in self.channels.values():
            if wanted is not None and channel.id not in wanted:
                continue
            folder = self._folders.get(channel.id, channel.id)
            try:
                if not self._files.day_files(folder):
                    folder = channel.id
                messages = list(self._messages(folder, out.problems))
                threads = group_threads(messages)
            except Exception as exc:  # a channel that cannot be read does not stop the others
                out.problems.append(RecordProblem(self._files.where(folder), describe(exc)))
                continue
            out.documents.extend(self._threads(channel, folder, threads, out.problems))
        return out

    def _messages(self, folder: str, problems: list[RecordProblem]) -> Iterator[dict[str, Any]]:
        for rel in self._files.day_files(folder):
            where = self._files.where(rel)
            try:
                day = json.loads(self._files.read_text(rel, problems))
            except Exception as exc:  # unreadable, damaged zip member, not JSON, too deep: this file's problem
                reason = "not valid JSON" if isinstance(exc, ValueError | RecursionError) else "not read"
                problems.append(RecordProblem(where, f"{reason}: {describe(exc)}"))
                continue
            if not isinstance(day, list):
                problems.append(RecordProblem(where, "expected a JSON list of messages"))
                continue
            for i, raw in enumerate(day):
                try:
                    msg, notes = checked_message(raw)
                except ValueError as exc:
                    problems.append(RecordProblem(f"{where}[{i}]", f"message not read: {describe(exc)}"))
                    continue
                problems.extend(RecordProblem(f"{where}[{i}] (ts {msg['ts']})", note) for note in notes)
                yield msg

    def _threads(
        self,
        channel: SlackChannel,
        folder: str,
        threads: dict[str, dict[str, Any]],
        problems: list[RecordProblem],
    ) -> Iterator[Document]:
        for thread_ts, by_ts in threads.items():
            try:
                doc = self._builder.build(channel, thread_ts, by_ts)
            except Exception as exc:  # one thread's data never ends the channel's read
                problems.append(RecordProblem(f"{self._files.where(folder)} thread {thread_ts}", describe(exc)))
                continue
            if doc is not None:
                yield doc

    def _channel_name(self, channel_id: str) -> str | None:
        channel = self.channels.get(channel_id)
        return channel.name if channel else None
