"""The live Jira connector against a faulty server: paging that would loop, silent and trickling answers, budgets.

Each fault hits one project (OPS, twelve issues: many pages at one issue per page) while another (SEC) is read
in the same run: the faulty one fails alone within a bound, with a message naming the endpoint and the project,
and none of its partitions is recorded as synced.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
from dagster._core.instance import InstanceRef

from rag_pipeline.defs.jira.resources import JiraResource
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import CollectionNames, SearchFilter
from rag_pipeline_tests.kit import jira_fixtures as F
from rag_pipeline_tests.kit.emulators.jira_api import JiraEmulator

SITE = "jira.example.test"
USER, TOKEN = "bot@example.com", "jira-test-token"
DAYS = [f"2024-03-{d:02d}" for d in range(1, 13)]
PAGE_CAP = 20


def _resource(emu: JiraEmulator, cloud: bool, **overrides: object) -> JiraResource:
    auth = {"username": USER, "api_token": TOKEN} if cloud else {"personal_access_token": "jira-test-pat"}
    config: dict[str, object] = {
        "url": emu.url, "cloud": cloud, "site": SITE, "page_size": 1, "backoff_seconds": 0, "page_cap": PAGE_CAP,
        **auth, **overrides,
    }  # fmt: skip
    return JiraResource(**config)  # type: ignore[arg-type]


def _read(emu: JiraEmulator, cloud: bool, **overrides: object) -> tuple[object, int, float]:
    """Read OPS and SEC in one call: (the read, OPS's search requests, seconds)."""
    search = "/rest/api/3/search/jql" if cloud else "/rest/api/2/search"
    started = time.monotonic()
    read = _resource(emu, cloud, **overrides).read_partitions({"OPS": DAYS, "SEC": DAYS})
    seconds = time.monotonic() - started
    faulty_requests = sum(1 for r in emu.calls(search) if 'project = "OPS"' in r.params.get("jql", ""))
    return read, faulty_requests, seconds


PAGING = [
    pytest.param(True, "repeat_token", "repeated_cursor", id="cloud-repeated-token"),
    pytest.param(False, "ignore_start", "offset", id="server-startAt-ignored"),
    pytest.param(True, "empty_pages", "empty_pages", id="cloud-endless-empty-pages"),
    pytest.param(False, "empty_pages", "empty_pages", id="server-endless-empty-pages"),
]


@pytest.mark.parametrize(("cloud", "fault", "guard"), PAGING)
def test_paging_that_cannot_end_fails_its_project_alone(cloud: bool, fault: str, guard: str) -> None:
    with JiraEmulator(F.crafted_site(), cloud=cloud) as emu:
        good = _resource(emu, cloud).read_partitions({"SEC": DAYS})
        emu.reset_log()
        emu.break_paging(fault, project="OPS")
        read, requests, seconds = _read(emu, cloud)
    assert set(read.failed) == {"OPS"}  # type: ignore[attr-defined]
    message = read.failed["OPS"]  # type: ignore[attr-defined]
    assert "/search" in message and "project OPS" in message
    assert read.metadata["guards_tripped"] == {"OPS": guard}  # type: ignore[attr-defined]
    assert {d.container for d in read.documents} == {"SEC"}  # type: ignore[attr-defined]
    assert {d.id for d in read.documents} == {d.id for d in good.documents}  # type: ignore[attr-defined]
    assert requests <= 3 and seconds < 5  # stopped at the first page that cannot progress, far below the cap


def test_page_cap_and_request_budget_are_the_backstops() -> None:
    with JiraEmulator(F.crafted_site()) as emu:
        capped = _resource(emu, True, page_cap=2).read_partitions({"OPS": DAYS})
        budget = _resource(emu, True, requests_per_partition=1).read_partitions({"OPS": DAYS})
    assert capped.metadata["guards_tripped"] == {"OPS": "page_cap"} and "RAG_API_PAGE_CAP" in capped.failed["OPS"]
    assert budget.metadata["guards_tripped"] == {"OPS": "request_budget"}
    assert "more than 12 requests" in budget.failed["OPS"] and not budget.documents


@pytest.mark.parametrize("fault", ["silent", "trickle"])
def test_a_server_that_never_answers_in_full_fails_the_call_within_the_timeout(fault: str) -> None:
    with JiraEmulator(F.crafted_site()) as emu:
        emu.inject(fault, path="/search/jql", match='project = "OPS"', times=10)
        read, requests, seconds = _read(emu, True, timeout_seconds=1)  # the default 8 retries
    assert set(read.failed) == {"OPS"}  # type: ignore[attr-defined]
    message = read.failed["OPS"]  # type: ignore[attr-defined]
    assert "did not answer" in message and "/rest/api/3/search/jql" in message and "project OPS" in message
    assert read.metadata["guards_tripped"] == {"OPS": "timeout"}  # type: ignore[attr-defined]
    assert {d.container for d in read.documents} == {"SEC"}  # type: ignore[attr-defined]
    # One attempt and one retry (a timeout is retried once, whatever max_retries), each stopped at 1 s.
    assert requests == 2 and seconds < 4


def test_a_good_site_of_many_pages_is_untouched_by_the_guards() -> None:
    with JiraEmulator(F.crafted_site()) as emu:
        guarded = _resource(emu, True).read_partitions({"OPS": DAYS, "SEC": DAYS})
        calls = len(emu.requests)
        emu.reset_log()
        bounded = _resource(emu, True, page_cap=10_000, requests_per_partition=10**6).read_partitions(
            {"OPS": DAYS, "SEC": DAYS}
        )
    assert not guarded.failed and not guarded.metadata["guards_tripped"]
    assert guarded.metadata["api_calls_by_method"]["GET /rest/api/3/search/jql"] > 10  # many pages
    assert len(emu.requests) == calls and {d.id for d in bounded.documents} == {d.id for d in guarded.documents}


def test_sync_command_leaves_the_faulty_project_unsynced(tmp_path: Path, monkeypatch, capsys) -> None:
    from rag_pipeline.cli import main

    with JiraEmulator(F.crafted_site()) as emu:
        for name, value in {"JIRA_URL": emu.url, "JIRA_USERNAME": USER, "JIRA_API_TOKEN": TOKEN, "JIRA_SITE": SITE,
                            "JIRA_PAGE_SIZE": "2", "RAG_API_PAGE_CAP": str(PAGE_CAP),
                            "DAGSTER_HOME": str(tmp_path / "home")}.items():  # fmt: skip
            monkeypatch.setenv(name, value)
        (tmp_path / "home").mkdir()
        emu.break_paging("repeat_token", project="SEC")
        code = main(
            ["sync", "--source", "jira", "--start", "2024-03-01", "--end", "2024-03-12", "--data-dir", str(tmp_path),
             "--project", "SEC", "--project", "OPS", "--json"]
        )  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and set(out["failed"]) == {"SEC"} and "repeated the cursor" in out["failed"]["SEC"]
    with EdgeVectorStore(tmp_path / "qdrant", CollectionNames.with_prefix("rag")) as store:
        assert store.indexed_documents(SearchFilter(containers=("OPS",)))
        assert not store.indexed_documents(SearchFilter(containers=("SEC",)))
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path / "home"))) as instance:
        synced = instance.get_materialized_partitions(dg.AssetKey("jira_issues"))
        # One run read both: it succeeded for OPS and names SEC as failed (its rows and watermark untouched).
        [record] = instance.fetch_materializations(dg.AssetKey("jira_issues"), limit=1).records
        metadata = {k: v.value for k, v in record.asset_materialization.metadata.items()}
    assert synced and metadata["guards_tripped"] == {"SEC": "repeated_cursor"}
    assert metadata["projects_failed"] == ["SEC"]
    stored = pd.concat(pd.read_parquet(p) for p in (tmp_path / "parquet" / "jira_issues").glob("*.parquet"))
    assert set(stored["_container"]) == {"OPS"}
