"""The search service's result and document caches (issue 51, part 4), against a real ``rag-pipeline serve``
process: a repeated search is a hit, a reader with other access never gets another reader's entry, a document
entry is checked against each reader's access, and a write by another process (the real ``rag-pipeline index``)
makes every older entry unreachable. Counted in ``/metrics``, parsed with ``prometheus_client``'s parser.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.serving.result_cache import ResultCache, access_key
from rag_pipeline_tests.kit import serving_fixtures as S

ALICE = {"X-User-Id": "U1"}  # #secret's member
BOB = {"X-User-Id": "U2"}  # the workspace only
QUERY = {"query": "salary budget postgres upgrade", "mode": "hybrid", "top_k": 5}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[S.ServiceProcess, Path]]:
    root = tmp_path_factory.mktemp("result_cache")
    data_dir = S.build_index(root)  # its own index: the test writes to it
    with S.running_service(data_dir, root / "serve.log", RAG_SERVE_CACHE_SECONDS="600") as service:
        yield service, root


def search(service: S.ServiceProcess, headers: dict[str, str], body: dict[str, Any] = QUERY) -> dict[str, Any]:
    response = httpx.post(f"{service.url}/v1/search", json=body, headers=headers, timeout=60)
    assert response.status_code == 200, response.text
    return dict(response.json())


def cache_counts(service: S.ServiceProcess) -> dict[tuple[str, str], float]:
    text = httpx.get(f"{service.url}/metrics", timeout=10).text
    return {
        (s.labels["cache"], s.labels["outcome"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "rag_cache_requests_total"
    }


def ids(payload: dict[str, Any]) -> list[str]:
    return [r["document_id"] for r in payload["results"]]


def test_repeated_searches_hit_per_access_and_a_write_elsewhere_invalidates(
    served: tuple[S.ServiceProcess, Path],
) -> None:
    service, root = served
    first = search(service, ALICE)
    again = search(service, ALICE)
    assert (first["cached"], again["cached"]) == (False, True)
    assert ids(again) == ids(first) and S.SECRET_THREAD in ids(first)
    # Another parameter, another entry.
    assert search(service, ALICE, {**QUERY, "top_k": 4})["cached"] is False
    # Bob's access differs: never Alice's entry, and never her private thread.
    bob = search(service, BOB)
    assert bob["cached"] is False and S.SECRET_THREAD not in ids(bob)
    assert search(service, BOB)["cached"] is True
    counts = cache_counts(service)
    assert counts[("search", "hit")] == 2 and counts[("search", "miss")] == 3

    # Documents: the entry holds the parts and their ACL; Bob is refused the one Alice read, from the cache too.
    doc = f"{service.url}/v1/documents/{S.SECRET_THREAD}"
    assert httpx.get(doc, headers=ALICE, timeout=30).status_code == 200
    assert httpx.get(doc, headers=ALICE, timeout=30).status_code == 200
    assert httpx.get(doc, headers=BOB, timeout=30).status_code == 404
    counts = cache_counts(service)
    assert counts[("document", "hit")] == 2 and counts[("document", "miss")] == 1

    # A write by another process: the real index run adds a thread that matches the query.
    day = root / "export" / "general" / "2024-03-05.json"
    day.write_text(json.dumps([{"type": "message", "user": "U2", "ts": "1709640000.000000",
                                "text": "salary budget for the postgres upgrade contractors"}]))  # fmt: skip
    new_thread = f"slack:{S.TEAM}:C0PUB:1709640000.000000"
    done = subprocess.run(
        S.rag_pipeline_command("index", "--slack-export", str(root / "export"), "--slack-team", S.TEAM,
                               "--slack-domain", "serve.slack.com", "--source", "slack"),
        env=S.service_env(root / "data"), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    after = search(service, BOB)
    assert after["cached"] is False and new_thread in ids(after), after
    assert search(service, BOB)["cached"] is True


def test_the_access_key_is_the_readers_accounts_and_groups_in_any_order() -> None:
    one = Principal(user_id="U1", user_ids=("acc-1",), groups=("b", "a"))
    same = Principal(user_id="acc-1", user_ids=("U1",), groups=("a", "b", "a"))
    wider = Principal(user_id="U1", user_ids=("acc-1",), groups=("a", "b", "c"))
    assert access_key(one) == access_key(same) != access_key(wider)
    off: ResultCache[str] = ResultCache(0, 300)
    off.put("k", "v")
    assert off.get("k") is None and off.hits == off.misses == 0
    short: ResultCache[str] = ResultCache(10, 0.05)
    short.put("k", "v")
    assert short.get("k") == "v"
    time.sleep(0.1)
    assert short.get("k") is None and (short.hits, short.misses) == (1, 1)
