"""Each caller's active tool set (the RAG tool-search design's per-agent set, issue 67): the tools an agent has
loaded into its context, so a tool search leaves them out and ``get_active_tools`` lists them.

A set is kept per caller — the reader's user id and, where the client gives one, its session id (an MCP session,
an HTTP ``X-Session-Id``, the CLI's ``--session``) — and starts as, and resets to, the critical set. The sets are
bounded and expiring: at most ``max_tools`` tools in one set (activating more is refused, naming the bound), at
most ``max_sets`` sets (the least recently used one is dropped), and a set untouched for ``ttl_seconds`` is gone
(it starts again from the critical set). Time is the wall clock, so a set written to a file (the CLI keeps its
sets in the data folder, :meth:`ActiveToolSets.dump` / :meth:`ActiveToolSets.load`) expires across processes.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.tool_search import ToolSearchSettings
from rag_pipeline.serving.refusal import Refusal

# The HTTP header a client names its session with (the MCP stdio server forwards its own session in it).
SESSION_HEADER = "X-Session-Id"


class ActiveSetRefused(Refusal, ValueError):
    """An activation the caller's set cannot take: an unknown tool, or more tools than the bound. ``field`` names
    the argument at fault (the faces' refusals name it)."""

    field: str

    def __init__(self, message: str, status: int = 400, field: str = "names") -> None:
        super().__init__(status, field, message)


@dataclass(frozen=True)
class CallerKey:
    """Whose set: the reader's user id and the client's session id ("" where it gives none)."""

    user_id: str
    session: str = ""

    @classmethod
    def of(cls, reader: Principal, session: str = "") -> CallerKey:
        """``reader``'s key: its user id (its account ids where it has no single one; anonymous: "")."""
        return cls(reader.user_id or ",".join(reader.all_user_ids()), session)


@dataclass(frozen=True)
class ActiveSetLimits:
    """RAG_TOOL_ACTIVE_MAX_TOOLS, RAG_TOOL_ACTIVE_MAX_SETS, RAG_TOOL_ACTIVE_TTL_SECONDS."""

    max_tools: int = 20
    max_sets: int = 1000
    ttl_seconds: float = 3600.0

    @classmethod
    def of(cls, settings: ToolSearchSettings) -> ActiveSetLimits:
        return cls(settings.active_max_tools, settings.active_max_sets, settings.active_ttl_seconds)


@dataclass
class _Set:
    names: list[str]
    touched: float


class ActiveToolSets:
    """The callers' active sets, least recently used first; thread-safe (one per service, shared by its requests)."""

    def __init__(self, limits: ActiveSetLimits | None = None, clock: Callable[[], float] = time.time) -> None:
        self.limits = limits or ActiveSetLimits()
        self._clock = clock
        self._sets: OrderedDict[CallerKey, _Set] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._expire(self._clock())
            return len(self._sets)

    def _expire(self, now: float) -> None:
        ttl = self.limits.ttl_seconds
        for key in [k for k, s in self._sets.items() if now - s.touched > ttl]:
            del self._sets[key]

    def _set(self, caller: CallerKey, critical: Iterable[str]) -> _Set:
        """The caller's set, made the most recently used (a fresh one from ``critical`` where it has none)."""
        now = self._clock()
        self._expire(now)
        found = self._sets.get(caller)
        if found is None:
            found = _Set(list(dict.fromkeys(critical)), now)
            self._sets[caller] = found
            while len(self._sets) > self.limits.max_sets:
                self._sets.popitem(last=False)
        found.touched = now
        self._sets.move_to_end(caller)
        return found

    def active(self, caller: CallerKey, critical: Iterable[str]) -> list[str]:
        """The caller's active tools, in the order they were activated (the critical set first)."""
        with self._lock:
            return list(self._set(caller, critical).names)

    def activate(
        self, caller: CallerKey, names: Iterable[str], known: Iterable[str], critical: Iterable[str]
    ) -> list[str]:
        """Add ``names`` (each an indexed tool, one of ``known``) to the caller's set; refused whole, and nothing
        added, when one is unknown or the set would exceed ``max_tools``."""
        wanted = list(dict.fromkeys(names))
        known_names = set(known)
        unknown = [n for n in wanted if n not in known_names]
        if unknown:
            raise ActiveSetRefused(f"names: no indexed tool is named {', '.join(map(repr, unknown))}", 404)
        with self._lock:
            found = self._set(caller, critical)
            added = [n for n in wanted if n not in found.names]
            if len(found.names) + len(added) > self.limits.max_tools:
                raise ActiveSetRefused(
                    f"names: an active set holds at most {self.limits.max_tools} tools (RAG_TOOL_ACTIVE_MAX_TOOLS); "
                    f"{len(found.names)} are active and {len(added)} more were asked for: deactivate some first",
                    409,
                )
            found.names.extend(added)
            return list(found.names)

    def deactivate(self, caller: CallerKey, names: Iterable[str], critical: Iterable[str]) -> list[str]:
        """Remove ``names`` from the caller's set (a name not in it is no error: it is inactive either way)."""
        gone = set(names)
        with self._lock:
            found = self._set(caller, critical)
            found.names = [n for n in found.names if n not in gone]
            return list(found.names)

    def reset(self, caller: CallerKey, critical: Iterable[str]) -> list[str]:
        """The caller's set back to the critical set."""
        with self._lock:
            found = self._set(caller, critical)
            found.names = list(dict.fromkeys(critical))
            return list(found.names)

    def dump(self) -> dict[str, Any]:
        """The sets as JSON-ready data, least recently used first."""
        with self._lock:
            self._expire(self._clock())
            return {"sets": [{"caller": [k.user_id, k.session], "names": s.names, "touched": s.touched}
                             for k, s in self._sets.items()]}  # fmt: skip

    def load(self, data: dict[str, Any]) -> None:
        """Sets kept by :meth:`dump` (expired ones dropped, the bounds applied)."""
        with self._lock:
            for kept in data.get("sets", []):
                user_id, session = kept["caller"]
                names = [str(n) for n in kept["names"]][: self.limits.max_tools]
                self._sets[CallerKey(str(user_id), str(session))] = _Set(names, float(kept["touched"]))
            self._expire(self._clock())
            while len(self._sets) > self.limits.max_sets:
                self._sets.popitem(last=False)


def load_sets(path: Path, limits: ActiveSetLimits) -> ActiveToolSets:
    """The sets kept at ``path`` (none where the file is missing or unreadable: they start from the critical set)."""
    sets = ActiveToolSets(limits)
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        sets.load(json.loads(path.read_text(encoding="utf-8")))
    return sets


def save_sets(path: Path, sets: ActiveToolSets) -> None:
    """Write the sets to ``path`` atomically (a reader never sees half a file)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(sets.dump()), encoding="utf-8")
    partial.replace(path)
