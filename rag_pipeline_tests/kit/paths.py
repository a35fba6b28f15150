"""Folders the tests read, found from this file so that they do not depend on the working directory."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = REPO_ROOT / "rag_pipeline"
EVAL_SETS_DIR = REPO_ROOT / "eval_sets"
BENCH_DIR = REPO_ROOT / "bench"
FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"
