"""Hostile input shared by the reader-level tests (``dagster/test_hostile_input.py``) and the command-line ones
(``e2e/test_skipped_report.py``): a traversing id, a folder that must never be read, Jira lines built by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rag_pipeline_tests.kit.data import D1, ts

SITE = "jira.example.com"
HOSTILE_ID = "../../../../tmp/x"
SECRET = "secret-outside-the-export"


def msg(seconds: float, text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "user": "U1", "text": text, "ts": ts(seconds), **extra}


def outside_folder(tmp_path: Path) -> Path:
    """A folder next to the export holding a day file that must never be read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "2024-03-01.json").write_text(json.dumps([msg(D1 + 50, SECRET)]))
    return outside


def deep_adf_json(levels: int, text: str) -> str:
    # json.dumps itself recurses, so the deep body is written by hand.
    return (
        '{"type":"doc","content":['
        + '{"type":"paragraph","content":[' * levels
        + json.dumps({"type": "text", "text": text})
        + "]}" * levels
        + "]}"
    )


def issue_line(issue: dict[str, Any], description_json: str) -> str:
    return json.dumps({**issue, "fields": {**issue["fields"], "description": "@@"}}).replace('"@@"', description_json)
