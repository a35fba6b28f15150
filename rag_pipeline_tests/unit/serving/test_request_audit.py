"""The per-request audit log: one line per request with the reader and the documents given, never query text;
one file per UTC day, older files than the retention deleted; a failed write never fails the request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_pipeline.serving.request_audit import RequestAudit

DAY = 86_400.0
START = 1_764_374_400.0  # 2025-11-29T00:00:00Z


def test_lines_files_per_day_and_retention(tmp_path: Path) -> None:
    now = [START + 3600]
    audit = RequestAudit(tmp_path / "audit", retention_days=2, clock=lambda: now[0])
    audit.record(["U1", "acc-1"], "search", ["slack:T:C:1", "jira:s:2"])
    audit.record(["U2"], "document", ["jira:s:2"])
    (first,) = sorted((tmp_path / "audit").iterdir())
    assert first.name == "requests-2025-11-29.jsonl"
    lines = [json.loads(line) for line in first.read_text().splitlines()]
    assert lines[0] == {"at": "2025-11-29T01:00:00.000Z", "reader": ["U1", "acc-1"], "kind": "search",
                        "documents": ["slack:T:C:1", "jira:s:2"]}  # fmt: skip
    assert lines[1]["kind"] == "document" and set(lines[1]) == {"at", "reader", "kind", "documents"}
    now[0] = START + DAY + 60
    audit.record(["U1"], "search", [])
    now[0] = START + 2 * DAY + 60  # 2 days kept: the 29th goes
    audit.record(["U1"], "search", [])
    assert sorted(p.name for p in (tmp_path / "audit").iterdir()) == [
        "requests-2025-11-30.jsonl",
        "requests-2025-12-01.jsonl",
    ]


def test_a_failed_write_is_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    audit = RequestAudit(blocked / "audit", retention_days=1)
    audit.record(["U1"], "search", ["d"])
    audit.record(["U1"], "search", ["d"])
    assert [r.levelname for r in caplog.records] == ["ERROR"]  # once, not per request
    with pytest.raises(ValueError, match="RAG_SERVE_AUDIT_DAYS"):
        RequestAudit(tmp_path, retention_days=0)
