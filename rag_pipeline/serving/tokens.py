"""Personal, scoped service tokens for agents: each tied to one person, limited to scopes, expiring, revocable.

A token reads as its person and never wider: the service resolves the person through the principal directory
on every request, exactly as for a signed-in caller, so a group the person loses is lost by their tokens too.

Format ``rag_<id>_<secret>``: the id (8 hex characters) finds the row, the secret (32 random bytes, URL-safe)
proves it. Only the secret's SHA-256 is stored (a stolen ``tokens.sqlite`` gives no usable token; the secret is
high-entropy, so a fast hash is enough), compared in constant time. Rows keep the person, the scopes, creation
and expiry times, revocation and the last use (written at most once a minute per token, so a busy agent does not
turn every search into a write).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

PREFIX = "rag_"
# search: /v1/search, /v1/documents, /v1/whois, /v1/explain (about oneself), /mcp; answer: /v1/chat/completions,
# answers; admin: /v1/whois and /v1/explain about another person (?person=).
SCOPES = ("search", "answer", "admin")
_TOKEN = re.compile(r"^rag_([0-9a-f]{8})_([A-Za-z0-9_-]{43})$")
_DURATION = re.compile(r"^(\d{1,4})([dh])$")
LAST_USE_EVERY = timedelta(minutes=1)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    id TEXT PRIMARY KEY,
    secret_sha256 BLOB NOT NULL,
    person TEXT NOT NULL,
    scopes TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    revoked_at TEXT,
    last_used_at TEXT
)
"""


class TokenRefused(ValueError):
    """A token that names nobody now (unknown, wrong secret, expired, revoked); the message never holds it."""


@dataclass(frozen=True)
class TokenInfo:
    """A stored token without its secret."""

    id: str
    person: str
    scopes: tuple[str, ...]
    note: str
    created_at: str
    expires_at: str
    revoked_at: str | None
    last_used_at: str | None

    def state(self, now: datetime) -> str:
        if self.revoked_at:
            return "revoked"
        return "expired" if datetime.fromisoformat(self.expires_at) <= now else "active"


def parse_duration(text: str) -> timedelta:
    """``30d`` or ``12h`` (at most 9999); ValueError naming the format otherwise."""
    match = _DURATION.match(text.strip())
    if not match or int(match.group(1)) == 0:
        raise ValueError(f"--expires {text!r}: give a number of days or hours, e.g. 30d or 12h")
    number = int(match.group(1))
    return timedelta(days=number) if match.group(2) == "d" else timedelta(hours=number)


def check_scopes(scopes: Sequence[str]) -> tuple[str, ...]:
    """The scopes, deduplicated in canonical order; ValueError naming an unknown one."""
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown or not scopes:
        raise ValueError(f"--scope {','.join(scopes) or '(none)'}: choose from {', '.join(SCOPES)}")
    return tuple(s for s in SCOPES if s in scopes)


def looks_like_token(value: str) -> bool:
    """Whether a bearer value is one of these tokens (rather than the shared token or a JWT)."""
    return value.startswith(PREFIX)


class TokenStore:
    """The tokens of one data folder (``<data dir>/tokens.sqlite``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=10)) as connection, connection:
            connection.execute(_SCHEMA)
            yield connection

    def create(
        self, person: str, scopes: Sequence[str], lifetime: timedelta, note: str = "", now: datetime | None = None
    ) -> tuple[str, TokenInfo]:
        """A new token for ``person`` (as the directory knows them): the token, shown once, and its row."""
        now = now or datetime.now(UTC)
        token_id, secret = secrets.token_hex(4), secrets.token_urlsafe(32)
        info = TokenInfo(token_id, person, check_scopes(scopes), note, _iso(now), _iso(now + lifetime), None, None)
        with self._connect() as db:
            db.execute(
                "INSERT INTO tokens (id, secret_sha256, person, scopes, note, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (token_id, _digest(secret), person, ",".join(info.scopes), note, info.created_at, info.expires_at),
            )
        return f"{PREFIX}{token_id}_{secret}", info

    def verify(self, token: str, now: datetime | None = None) -> TokenInfo:
        """The row of a valid ``token`` (its last use recorded); :class:`TokenRefused` otherwise."""
        now = now or datetime.now(UTC)
        match = _TOKEN.match(token)
        if not match or not self.path.exists():
            raise TokenRefused("the token is not a rag-pipeline token this service issued")
        token_id, secret = match.groups()
        with self._connect() as db:
            row = db.execute("SELECT secret_sha256 FROM tokens WHERE id = ?", (token_id,)).fetchone()
            # Compared even for an unknown id, so timing says nothing about which ids exist.
            stored = row[0] if row else b"\0" * 32
            if not hmac.compare_digest(stored, _digest(secret)) or row is None:
                raise TokenRefused("the token is not a rag-pipeline token this service issued")
            info = self._info(db, token_id)
            if info.revoked_at:
                raise TokenRefused(f"token {token_id} was revoked")
            if datetime.fromisoformat(info.expires_at) <= now:
                raise TokenRefused(f"token {token_id} expired at {info.expires_at}")
            if info.last_used_at is None or datetime.fromisoformat(info.last_used_at) + LAST_USE_EVERY <= now:
                db.execute("UPDATE tokens SET last_used_at = ? WHERE id = ?", (_iso(now), token_id))
        return info

    def revoke(self, token_id: str, now: datetime | None = None) -> TokenInfo:
        """Revoke the token ``token_id``; KeyError naming it when there is none."""
        with self._connect() as db:
            updated = db.execute(
                "UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?",
                (_iso(now or datetime.now(UTC)), token_id),
            )
            if updated.rowcount == 0:
                raise KeyError(f"no token {token_id!r} (rag-pipeline token list shows them)")
            return self._info(db, token_id)

    def list(self) -> list[TokenInfo]:
        if not self.path.exists():
            return []
        with self._connect() as db:
            ids = [r[0] for r in db.execute("SELECT id FROM tokens ORDER BY created_at, id")]
            return [self._info(db, i) for i in ids]

    @staticmethod
    def _info(db: sqlite3.Connection, token_id: str) -> TokenInfo:
        row = db.execute(
            "SELECT id, person, scopes, note, created_at, expires_at, revoked_at, last_used_at "
            "FROM tokens WHERE id = ?",
            (token_id,),
        ).fetchone()
        return TokenInfo(row[0], row[1], tuple(row[2].split(",")), row[3], row[4], row[5], row[6], row[7])


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds")
