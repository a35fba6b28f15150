"""Readers beside a running search service on one data folder (issue 54), with real processes: the stdio MCP
server (through the official ``mcp`` client) sends its tool calls to the service recorded in ``service.json`` and
answers in its normal latency with the service's results for the same reader, and keeps answering from the index
itself when the service is killed mid-session; a second ``serve`` on the folder is refused at once in one line."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters

from rag_pipeline.serving.service_record import live_service, record_path
from rag_pipeline_tests.kit import serving_fixtures as S

TOKEN = "beside-test-token-9012"
QUERY = "salary budget postgres"


@pytest.fixture
def data_dir(serving_index: Path, tmp_path: Path) -> Path:
    return S.copy_index(serving_index, tmp_path / "data")


def _service_ids(service: S.ServiceProcess, user: str) -> list[str]:
    response = httpx.post(f"{service.url}/v1/search", json={"query": QUERY, "top_k": 10},
                          headers={"Authorization": f"Bearer {TOKEN}", "X-User-Id": user}, timeout=60)  # fmt: skip
    assert response.status_code == 200, response.text
    return [r["document_id"] for r in response.json()["results"]]


def _mcp_session(data_dir: Path, calls: Any, **env: str) -> dict[str, Any]:
    """Runs ``calls(client)`` in a stdio MCP session of ``rag-pipeline mcp --user U1`` on ``data_dir``."""

    async def session() -> dict[str, Any]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "rag_pipeline.cli", "mcp", "--user", "U1"],
            env=S.service_env(data_dir, **env),
        )
        async with Client(params, read_timeout_seconds=120) as client:
            result: dict[str, Any] = await calls(client)
            return result

    return asyncio.run(session())


def _ids(found: Any) -> list[str]:
    return [r["document_id"] for r in (found.structured_content or {}).get("results", [])]


def test_the_stdio_mcp_server_delegates_to_the_running_service_and_survives_its_end(data_dir: Path) -> None:
    with S.running_service(data_dir, data_dir.parent / "serve.log", RAG_SERVE_TOKEN=TOKEN) as service:
        record = live_service(data_dir)
        assert record is not None and record.url == service.url and record.auth == "token"
        expected = _service_ids(service, "U1")
        assert S.SECRET_THREAD in expected

        async def calls(client: Any) -> dict[str, Any]:
            seconds = []
            for _ in range(3):
                started = time.perf_counter()
                found = await client.call_tool("search_documents", {"query": QUERY, "top_k": 10})
                seconds.append(time.perf_counter() - started)
                assert not found.is_error, found.content
            document = await client.call_tool("get_document", {"document_id": S.SECRET_THREAD})
            ids = [r["document_id"] for r in (found.structured_content or {})["results"]]
            service.stop()  # killed mid-session: the next call searches the index itself
            after = await client.call_tool("search_documents", {"query": QUERY, "top_k": 10})
            return {
                "ids": ids,
                "seconds": seconds,
                "document": (document.structured_content or {}).get("document_id"),
                "after": _ids(after),
                "after_error": after.content[0].text if after.is_error and after.content else "",
            }

        result = _mcp_session(data_dir, calls, RAG_SERVE_TOKEN=TOKEN)
    # The service's own ranking for the same reader, in its normal latency (it was 258 s of waiting before).
    assert result["ids"] == expected and max(result["seconds"]) < 10, result["seconds"]
    assert result["document"] == S.SECRET_THREAD
    assert not result["after_error"] and S.SECRET_THREAD in result["after"]
    assert not record_path(data_dir).exists()  # the service removed its record when it stopped


def test_a_second_service_on_the_folder_is_refused_at_once_naming_the_first(data_dir: Path, tmp_path: Path) -> None:
    with S.running_service(data_dir, tmp_path / "serve.log", RAG_SERVE_TOKEN=TOKEN) as service:
        started = time.perf_counter()
        second = subprocess.run(
            S.rag_pipeline_command("serve", "--port", str(S.free_port())),
            env=S.service_env(data_dir, RAG_SERVE_TOKEN=TOKEN),
            capture_output=True,
            text=True,
            timeout=60,
        )
        elapsed = time.perf_counter() - started
    assert second.returncode != 0 and elapsed < 15
    lines = [line for line in second.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and service.url in lines[0] and "already serves" in lines[0], second.stderr


def test_a_record_left_by_a_killed_service_is_ignored(data_dir: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    record_path(data_dir).write_text(
        json.dumps({"pid": int(dead.stdout), "url": "http://127.0.0.1:9", "auth": "token", "started": 0})
    )
    assert live_service(data_dir) is None


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["search", "--user", "U1", QUERY, "--json"], S.SECRET_THREAD),
        (["explain", "--user", "U1", S.SECRET_THREAD], S.SECRET_THREAD),
        (["whois", "U1"], S.EMAILS["U1"]),  # the directory alone: no index to wait for
    ],
    ids=["search", "explain", "whois"],
)
def test_cli_readers_are_lent_the_index_beside_the_service_within_a_bound(
    data_dir: Path, command: list[str], expected: str
) -> None:
    """The CLI readers open the index themselves: the service hands it over while they work and takes it back."""
    with S.running_service(data_dir, data_dir.parent / "serve.log", RAG_SERVE_TOKEN=TOKEN) as service:
        started = time.perf_counter()
        done = subprocess.run(
            S.rag_pipeline_command(*command),
            env=S.service_env(data_dir, RAG_SERVE_TOKEN=TOKEN),
            capture_output=True,
            text=True,
            timeout=120,
        )
        elapsed = time.perf_counter() - started
        assert done.returncode == 0, done.stderr
        assert expected in done.stdout
        assert S.SECRET_THREAD in _service_ids(service, "U1")  # the service has the index back
    assert elapsed < 60, elapsed


@pytest.mark.slow  # two more CLI processes loading the dense model
def test_ask_and_bench_are_lent_the_index_beside_the_service_within_a_bound(data_dir: Path, tmp_path: Path) -> None:
    from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake

    eval_set = tmp_path / "beside.jsonl"
    eval_set.write_text(
        json.dumps({"id": "q1", "query": QUERY, "relevant": {S.SECRET_THREAD: 1}, "principal": {"user_id": "U1"}})
        + "\n"
    )
    with OpenAIFake() as fake, S.running_service(data_dir, tmp_path / "serve.log", RAG_SERVE_TOKEN=TOKEN) as service:
        env = S.service_env(data_dir, RAG_SERVE_TOKEN=TOKEN, RAG_ANSWER_MODEL="gpt-4o-mini", OPENAI_API_KEY=API_KEY,
                            OPENAI_BASE_URL=fake.base_url)  # fmt: skip
        for command in (
            ["ask", "what is the salary budget?", "--user", "U1", "--json"],
            ["bench", "--eval-set", str(eval_set), "--arms", "bm25", "hybrid", "--json"],
        ):
            started = time.perf_counter()
            done = subprocess.run(S.rag_pipeline_command(*command), env=env, capture_output=True, text=True,
                                  timeout=300)  # fmt: skip
            elapsed = time.perf_counter() - started
            assert done.returncode == 0, done.stderr
            assert elapsed < 90, (command[0], elapsed)
            payload = json.loads(done.stdout)
            assert payload.get("sources") is not None or payload["arms"]["bm25"]["ndcg@10"] == 1.0
        assert S.SECRET_THREAD in _service_ids(service, "U1")  # the service has the index back


def test_beside_a_service_it_cannot_call_the_stdio_server_refuses_at_once_saying_what_to_use(data_dir: Path) -> None:
    """An OIDC service wants a signed-in caller: the stdio server's calls cannot go there, so each is refused
    within seconds naming the service's /mcp (it waited minutes for the index before); after the service stops,
    the stdio server searches the index itself."""
    from rag_pipeline_tests.kit.emulators.oidc_issuer import AUDIENCE, OidcIssuer

    with (
        OidcIssuer() as issuer,
        S.running_service(
            data_dir,
            data_dir.parent / "serve.log",
            RAG_SERVE_AUTH="oidc",
            RAG_OIDC_ISSUER=issuer.issuer,
            RAG_OIDC_AUDIENCE=AUDIENCE,
        ) as service,  # fmt: skip
    ):

        async def calls(client: Any) -> dict[str, Any]:
            started = time.perf_counter()
            refused = await client.call_tool("search_documents", {"query": QUERY})
            seconds = time.perf_counter() - started
            service.stop()
            after = await client.call_tool("search_documents", {"query": QUERY, "top_k": 10})
            return {
                "refused": refused.content[0].text if refused.is_error and refused.content else "",
                "seconds": seconds,
                "after": _ids(after),
            }

        result = _mcp_session(data_dir, calls)
    assert f"{service.url}/mcp" in result["refused"] and "OIDC" in result["refused"], result
    assert result["seconds"] < 5
    assert S.SECRET_THREAD in result["after"]


def test_a_stdio_server_started_while_a_writer_holds_the_folder_says_so_within_seconds(data_dir: Path) -> None:
    """A writer (an `index` run, a Dagster step) does not lend the folder: a tool call is refused within seconds
    naming the holder, not after the CLI's two-minute wait (longer than any agent's tool timeout), and answers as
    soon as the writer is done."""
    from rag_pipeline.index.store_lock import FolderLock

    (lock_file,) = data_dir.rglob("store.lock")
    writer = FolderLock(lock_file.parent, "rag-pipeline index (a test writer)")
    assert writer.try_acquire()

    async def calls(client: Any) -> dict[str, Any]:
        started = time.perf_counter()
        refused = await client.call_tool("search_documents", {"query": QUERY, "top_k": 10})
        seconds = time.perf_counter() - started
        writer.release()
        after = await client.call_tool("search_documents", {"query": QUERY, "top_k": 10})
        return {
            "refused": refused.content[0].text if refused.is_error and refused.content else "",
            "seconds": seconds,
            "after": _ids(after),
        }

    try:
        result = _mcp_session(data_dir, calls)
    finally:
        writer.release()
    assert "rag-pipeline index (a test writer)" in result["refused"], result
    assert result["seconds"] < 10, result["seconds"]  # 5 s of waiting for a short write, then the refusal
    assert S.SECRET_THREAD in result["after"]


def test_a_service_killed_during_a_delegated_call_leaves_the_call_answered_from_the_index(data_dir: Path) -> None:
    """The service is stopped (SIGSTOP) with the stdio server's call in flight, then killed (SIGKILL): the call
    does not hang or fail, it is answered from the index the kill released, with the same documents."""
    import signal

    with S.running_service(data_dir, data_dir.parent / "serve.log", RAG_SERVE_TOKEN=TOKEN) as service:
        expected = _service_ids(service, "U1")

        async def calls(client: Any) -> dict[str, Any]:
            warm = await client.call_tool("search_documents", {"query": QUERY, "top_k": 10})
            service.process.send_signal(signal.SIGSTOP)
            in_flight = asyncio.ensure_future(client.call_tool("search_documents", {"query": QUERY, "top_k": 10}))
            await asyncio.sleep(1.0)
            assert not in_flight.done()  # the frozen service holds the call
            service.process.send_signal(signal.SIGKILL)
            started = time.perf_counter()
            found = await in_flight
            return {
                "warm": _ids(warm),
                "found": _ids(found),
                "error": found.content[0].text if found.is_error and found.content else "",
                "seconds": time.perf_counter() - started,
            }

        result = _mcp_session(data_dir, calls, RAG_SERVE_TOKEN=TOKEN)
    assert result["warm"] == expected
    assert not result["error"] and set(result["found"]) == set(expected), result
    assert result["seconds"] < 30, result["seconds"]  # the index opened in this process (no model load: warm)


@pytest.mark.slow  # a Dagster CLI process loading the definitions and the dense model
def test_the_dagster_evaluation_runs_beside_the_service(data_dir: Path, tmp_path: Path) -> None:
    """`dagster asset materialize` of an evaluation arm, a real Dagster run in its own process, is lent the index
    by the running service and hands it back: the run succeeds within a bound and the service answers after."""
    from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, write_eval_set
    from rag_pipeline.retrieval.principal import Principal

    eval_dir = tmp_path / "eval_sets"
    queries = [EvalQuery(id="q1", query=QUERY, relevant={S.SECRET_THREAD: 1}, principal=Principal(user_id="U1"))]
    meta = EvalSetMeta(name="beside", description="one query", source="test", license="CC0-1.0",
                       attribution="test", queries=1)  # fmt: skip
    write_eval_set(eval_dir, meta, queries)
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    with S.running_service(data_dir, tmp_path / "serve.log", RAG_SERVE_TOKEN=TOKEN) as service:
        env = S.service_env(data_dir, RAG_EVAL_DIR=str(eval_dir), DAGSTER_HOME=str(dagster_home))
        started = time.perf_counter()
        dagster = str(Path(sys.executable).with_name("dagster"))
        materialize = ["asset", "materialize", "-m", "rag_pipeline.definitions", "--select", "retrieval_eval"]
        done = subprocess.run(
            [dagster, *materialize, "--partition", "hybrid"],
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
        )
        elapsed = time.perf_counter() - started
        assert done.returncode == 0, done.stderr[-3000:]
        assert "RUN_SUCCESS" in done.stderr, done.stderr[-3000:]
        assert S.SECRET_THREAD in _service_ids(service, "U1")  # the service has the index back
        metrics = httpx.get(f"{service.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).text
    assert elapsed < 240, elapsed
    handed = [line for line in metrics.splitlines() if line.startswith("rag_index_hand_overs")]
    assert handed and float(handed[0].split()[-1]) >= 1, metrics[-2000:]
