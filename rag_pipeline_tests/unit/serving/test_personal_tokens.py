"""Personal service tokens (issue 47, part 2): random, stored hashed, tied to one person, scoped, expiring,
revocable, last use recorded (at most once a minute); refusals never hold the token."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rag_pipeline.serving.tokens import TokenRefused, TokenStore, check_scopes, looks_like_token, parse_duration

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def test_a_token_verifies_as_its_person_and_scopes_and_only_its_hash_is_stored(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.sqlite")
    token, info = store.create("alice@acme.test", ["answer", "search", "search"], timedelta(days=30), "ci agent", NOW)
    assert looks_like_token(token) and info.scopes == ("search", "answer") and info.expires_at.startswith("2026-12-28")
    verified = store.verify(token, NOW + timedelta(minutes=5))
    assert (verified.person, verified.scopes, verified.note) == ("alice@acme.test", ("search", "answer"), "ci agent")
    secret = token.rsplit("_", 1)[1]
    with sqlite3.connect(tmp_path / "tokens.sqlite") as db:
        dumped = "\n".join(db.iterdump())
    assert secret not in dumped and token not in dumped
    # Last use: recorded, then not rewritten within the minute.
    assert store.list()[0].last_used_at == "2026-11-28T12:05:00+00:00"
    store.verify(token, NOW + timedelta(minutes=5, seconds=30))
    assert store.list()[0].last_used_at == "2026-11-28T12:05:00+00:00"
    store.verify(token, NOW + timedelta(minutes=7))
    assert store.list()[0].last_used_at == "2026-11-28T12:07:00+00:00"


def test_wrong_expired_and_revoked_tokens_are_refused_without_echoing_them(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.sqlite")
    token, info = store.create("bob@acme.test", ["search"], timedelta(hours=1), now=NOW)
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    for bad in (forged, "rag_00000000_" + "x" * 43, "rag_nothex__", "not-a-token"):
        with pytest.raises(TokenRefused) as refused:
            store.verify(bad, NOW)
        assert bad not in str(refused.value)
    with pytest.raises(TokenRefused, match="expired"):
        store.verify(token, NOW + timedelta(hours=1))
    assert store.revoke(info.id, NOW).revoked_at is not None
    with pytest.raises(TokenRefused, match="revoked"):
        store.verify(token, NOW)
    assert [i.state(NOW) for i in store.list()] == ["revoked"]
    with pytest.raises(KeyError, match="no token"):
        store.revoke("ffffffff")
    with pytest.raises(TokenRefused):  # a folder without tokens
        TokenStore(tmp_path / "none.sqlite").verify(token, NOW)


def test_durations_and_scopes_are_checked_naming_the_option() -> None:
    assert parse_duration("30d") == timedelta(days=30) and parse_duration("12h") == timedelta(hours=12)
    for bad in ("0d", "30", "1w", "-1d", ""):
        with pytest.raises(ValueError, match="--expires"):
            parse_duration(bad)
    with pytest.raises(ValueError, match="--scope root"):
        check_scopes(["root"])
    assert check_scopes(["admin", "search", "admin"]) == ("search", "admin")
    with pytest.raises(ValueError, match="--scope"):
        check_scopes([])
