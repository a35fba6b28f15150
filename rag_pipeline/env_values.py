"""Typed reads of configuration variables from a mapping, with errors that name the variable.

``Settings.from_env`` hands each reader the environment it was given (never ``os.environ`` directly), so a
source's own settings section (``rag_pipeline/sources/<name>/settings.py``) reads its variables with the same
rules and messages as the shared settings.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar


class SettingsError(ValueError):
    """A configuration variable has a value that cannot be used; the message names it."""


Number = TypeVar("Number", int, float)

_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,\-?LW#]+$")
_CRON_ALIASES = {"@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually", "@midnight"}


class EnvValues:
    """The variables of one ``env`` mapping, read as text, numbers, flags, paths, choices and cron strings."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def get(self, name: str) -> str | None:
        """A variable's value; unset and empty are the same (``FOO=`` in an .env file means unset)."""
        value = self.env.get(name)
        return value.strip() if value and value.strip() else None

    def _parsed(self, name: str, parse: Callable[[str], Number], what: str) -> Number | None:
        """The variable read by ``parse`` (None when unset); a value it refuses is a :class:`SettingsError` saying
        ``what`` the variable must be."""
        raw = self.get(name)
        if raw is None:
            return None
        try:
            return parse(raw)
        except ValueError:
            raise SettingsError(f"{name} must be {what}, got {raw!r}") from None

    def int(self, name: str, default: int | None, minimum: int = 0) -> int | None:
        value = self._parsed(name, int, "a whole number")
        if value is None:
            return default
        if value < minimum:
            raise SettingsError(f"{name} must be at least {minimum}, got {value}")
        return value

    def float(self, name: str, default: float, minimum: float, maximum: float) -> float:
        """A number within [``minimum``, ``maximum``] (``default`` when unset)."""
        value = self._parsed(name, float, "a number")
        if value is None:
            return default
        if not minimum <= value <= maximum:
            raise SettingsError(f"{name} must be between {minimum:g} and {maximum:g}, got {self.get(name)}")
        return value

    def flag(self, name: str, default: bool) -> bool:
        raw = self.get(name)
        if raw is None:
            return default
        lowered = raw.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise SettingsError(f"{name} must be one of 1/0, true/false, yes/no, on/off; got {raw!r}")

    def cron(self, name: str, default: str) -> str:
        """A five-field cron expression (the Dagster layer parses it fully; this catches what is plainly not one)."""
        value = self.get(name) or default
        fields = value.split()
        if not (value in _CRON_ALIASES or (len(fields) == 5 and all(_CRON_FIELD.match(f) for f in fields))):
            raise SettingsError(f"{name} must be a cron expression such as '0 * * * *', got {value!r}")
        return value

    def choice(self, name: str, choices: tuple[str, ...], default: str) -> Any:
        value = (self.get(name) or default).lower()
        if value not in choices:
            raise SettingsError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        return value

    def delimiter(self, name: str) -> str:
        value = self.get(name) or ","
        if value == "\\t":
            value = "\t"
        if len(value) != 1:
            raise SettingsError(f"{name} must be one character (e.g. ; or \\t), got {value!r}")
        return value

    def names(self, name: str) -> tuple[str, ...]:
        """A comma-separated list (spaces ignored); () when unset."""
        return tuple(n.strip() for n in (self.get(name) or "").split(",") if n.strip())

    def path(self, name: str, default: Path) -> Path:
        raw = self.get(name)
        return Path(raw).expanduser().resolve() if raw else default

    def optional_path(self, name: str) -> Path | None:
        raw = self.get(name)
        return Path(raw).expanduser().resolve() if raw else None

    def paths(self, name: str) -> tuple[Path, ...]:
        """Paths joined by the platform's separator (``:``); () when unset."""
        return tuple(Path(p).expanduser().resolve() for p in (self.get(name) or "").split(os.pathsep) if p)
