"""A throwaway PostgreSQL server for tests: ``initdb`` in a temp folder, loopback on a free port.

Uses the Debian ``postgresql`` package's binaries (``make test`` installs the package where it is
missing). As root, the server runs as the ``postgres`` user, since PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class PostgresServer:
    """Where a running test server listens and the role/database made for Dagster."""

    host: str
    port: int
    user: str
    password: str
    database: str

    def env(self) -> dict[str, str]:
        """The DAGSTER_PG_* variables deploy/dagster.postgres.yaml reads."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USERNAME": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_DB": self.database,
        }


def postgres_bindir() -> Path | None:
    """The newest installed PostgreSQL server binaries (Debian layout), or None."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _runner() -> list[str]:
    if os.geteuid() != 0:
        return []
    return ["runuser", "-u", "postgres", "--"]


@contextmanager
def running_postgres(root: Path) -> Iterator[PostgresServer]:
    """Start a server with its data, socket and log under ``root``; stop it afterwards."""
    bindir = postgres_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL server binaries not found: install the Debian package `postgresql`")
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir(parents=True, exist_ok=True)
    run = _runner()
    if run:
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(sockets, "postgres", "postgres")
    subprocess.run(
        [*run, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth-local=trust",
         "--auth-host=scram-sha-256", "-E", "UTF8", "--no-locale"],
        check=True, capture_output=True,
    )  # fmt: skip
    port = _free_port()
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets} -c fsync=off"
    subprocess.run(
        [*run, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-o", options, "-w", "start"],
        check=True, capture_output=True,
    )  # fmt: skip
    server = PostgresServer("127.0.0.1", port, "dagster", "dagster-test-pw", "dagster")
    try:
        subprocess.run(
            [*run, str(bindir / "psql"), "-h", str(sockets), "-p", str(port), "-U", "postgres", "-v",
             "ON_ERROR_STOP=1", "-c", f"CREATE ROLE {server.user} LOGIN PASSWORD '{server.password}';",
             "-c", f"CREATE DATABASE {server.database} OWNER {server.user};"],
            check=True, capture_output=True,
        )  # fmt: skip
        yield server
    finally:
        subprocess.run([*run, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], capture_output=True)


@contextmanager
def server_for_tests() -> Iterator[PostgresServer]:
    """A throwaway server for a test module; without the binaries the test is skipped, or fails where
    ``RAG_REQUIRE_POSTGRES`` is set."""
    if postgres_bindir() is None:
        # `make test` installs the package, so CI never gets here; elsewhere say what is missing.
        if os.environ.get("RAG_REQUIRE_POSTGRES"):
            pytest.fail("RAG_REQUIRE_POSTGRES is set but no PostgreSQL server binaries were found")
        pytest.skip("PostgreSQL server binaries not found (Debian package `postgresql`)")
    # Not under pytest's tmp_path: its parents are private to root, and the server runs as `postgres`.
    root = Path(tempfile.mkdtemp(prefix="rag_pg_"))
    try:
        with running_postgres(root) as server:
            yield server
    finally:
        shutil.rmtree(root, ignore_errors=True)
