"""Pool slots that hold their limit on a PostgreSQL Dagster instance (deploy/dagster.postgres.yaml, the stacks).

dagster-postgres has the race :mod:`rag_pipeline.runs.pool_claims` describes: its engine runs in AUTOCOMMIT, so
the ``SELECT … FOR UPDATE SKIP LOCKED`` that picks a free slot releases its row lock before the ``UPDATE`` that
takes the slot, and the queue's count-then-insert and the free-then-assign steps are separate statements too.
:class:`SerializedPoolClaimsPostgresStorage` runs each pool-slot operation whole under a PostgreSQL advisory lock.

Why the lock lives on a connection of its own, in a transaction (``pg_advisory_xact_lock``):

- Dagster's methods open a fresh AUTOCOMMIT connection for each step of an operation (``index_connection()``, no
  pool), so a lock taken on one of them would be gone with its statement (an xact lock) or with its connection (a
  session lock) before the next step runs. The lock's connection stays open for the whole operation instead.
- Running the operation's statements inside the lock's transaction (routing ``index_connection()`` to it) is not
  safe: Dagster catches ``IntegrityError`` in the middle of these operations (``add_pending_step``,
  ``initialize_concurrency_limit_to_default``) and goes on, which on PostgreSQL aborts the whole enclosing
  transaction; and a statement on another connection would not see the transaction's uncommitted writes. Left on
  their own AUTOCOMMIT connections, each write has committed before the lock is released, so the next holder
  reads it.
- A transaction-level lock is released by the transaction's end, whatever ends it: the commit after the
  operation, a rollback on an error, or the server noticing that the client went away (a killed orchestrator). A
  session lock needs an explicit ``pg_advisory_unlock`` that an error could skip.

Advisory locks are per database, so instances in different databases of one server do not wait for each other.
The lock's connection is one more connection per pool-slot operation in flight (milliseconds each).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import ExitStack
from typing import Any

import sqlalchemy as db
from dagster_postgres import PostgresEventLogStorage
from dagster_postgres.utils import (
    create_pg_connection,
    create_pg_engine,
    get_token_provider_from_config,
    pg_url_from_config,
)
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from rag_pipeline.runs.pool_claims import ReentrantHeldLock, SerializedPoolClaims

# The advisory lock's key: the bytes of "rag_pool". In pg_locks it shows as locktype 'advisory' with classid
# 1918986079 (0x7261675F) and objid 1886351212 (0x706F6F6C).
POOL_LOCK_KEY = int.from_bytes(b"rag_pool", "big")


class PostgresAdvisoryLock(ReentrantHeldLock):
    """An exclusive PostgreSQL advisory lock held in a transaction on a connection of its own, re-entrant within
    a thread."""

    def __init__(self, engine: Engine, key: int = POOL_LOCK_KEY) -> None:
        super().__init__()
        self.engine = engine
        self.key = key
        self._held: ExitStack | None = None

    def _take(self) -> None:
        with ExitStack() as held:
            conn = held.enter_context(create_pg_connection(self.engine))  # retries a refused connection
            held.enter_context(conn.begin())
            conn.execute(db.text("SELECT pg_advisory_xact_lock(:key)"), {"key": self.key})
            self._held = held.pop_all()

    def _drop(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.close()  # commits: the transaction's end releases the lock; then the connection closes


class SerializedPoolClaimsPostgresStorage(SerializedPoolClaims, PostgresEventLogStorage):
    """dagster-postgres's event log whose pool-slot operations run one at a time across every process that opens
    the instance, under the advisory lock :data:`POOL_LOCK_KEY` in the instance's database.

    Same tables and configuration (``postgres_db`` or ``postgres_url``) as ``PostgresEventLogStorage``: an
    instance can move to it, and back, without a migration."""

    def __init__(
        self,
        postgres_url: str,
        should_autocreate_tables: bool = True,
        inst_data: Any = None,
        token_provider: Any = None,
    ) -> None:
        # An engine of its own: the storage's is AUTOCOMMIT (no transaction to hold the lock in), and in the webserver
        # a small pool that the operation's own statements draw on while the lock's connection is out.
        lock_engine = create_pg_engine(postgres_url, token_provider, poolclass=NullPool)
        self.pool_lock = PostgresAdvisoryLock(lock_engine)
        super().__init__(postgres_url, should_autocreate_tables, inst_data=inst_data, token_provider=token_provider)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Mapping[str, Any]) -> SerializedPoolClaimsPostgresStorage:
        # PostgresEventLogStorage.from_config_value builds its own class by name, not cls.
        return cls(
            inst_data=inst_data,
            postgres_url=pg_url_from_config(config_value),
            should_autocreate_tables=config_value.get("should_autocreate_tables", True),
            token_provider=get_token_provider_from_config(config_value),
        )
