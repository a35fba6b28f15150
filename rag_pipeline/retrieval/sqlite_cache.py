"""A small persistent cache of LLM replies by key: one SQLite table, one connection per thread (the LLM
reranker grades candidates from a thread pool), in memory when no path is given. The reranker's grades and
the rewriter's plans are both kept in it."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any


class SqliteCache:
    """Values by key in ``table`` (key TEXT, ``column`` of SQL type ``sql_type``) of the SQLite file ``path``."""

    def __init__(self, path: str | Path | None, table: str, column: str, sql_type: str) -> None:
        self.path = str(path) if path else None
        self._select = f"SELECT {column} FROM {table} WHERE key = ?"
        self._insert = f"INSERT OR REPLACE INTO {table} VALUES (?, ?)"
        self._local = threading.local()
        self._memory: dict[str, Any] = {}
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            with sqlite3.connect(str(path)) as conn:
                conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, {column} {sql_type} NOT NULL)")

    def _conn(self) -> sqlite3.Connection | None:
        if self.path is None:
            return None
        if not hasattr(self._local, "conn"):
            self._local.conn = sqlite3.connect(self.path, timeout=30)
        conn: sqlite3.Connection = self._local.conn
        return conn

    def get(self, key: str) -> Any:
        """The value stored under ``key``, or None."""
        conn = self._conn()
        if conn is None:
            return self._memory.get(key)
        row = conn.execute(self._select, (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, value: Any) -> None:
        conn = self._conn()
        if conn is None:
            self._memory[key] = value
            return
        conn.execute(self._insert, (key, value))
        conn.commit()
