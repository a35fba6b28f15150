"""The MetaTool tool-search eval-set builder (tools/build_tool_eval_set.py) on a tiny MetaTool-shaped folder:
the split depends on the text alone, noisy labels and repeats are dropped, relevant ids are the tools source's
document ids, and the catalog is one the tools source reads without problems."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rag_pipeline.connectors.tools.catalog import read_catalog
from rag_pipeline.evaluation.eval_set import load_eval_set, load_eval_set_meta
from tools.build_tool_eval_set import NAME, build, digest, is_test

TOOLS = {
    "WeatherTool": "Provide you with the latest weather information.",
    "FinanceTool": "Stay informed with the latest financial updates, real-time insights.",
    "word_sneak": "A word game: sneak secret words into the conversation.",
}
NOISY = "What's the weather like today?"


def _rows() -> list[tuple[str, str]]:
    rows = [(f"Will it rain in city number {i}?", "WeatherTool") for i in range(40)]
    rows += [(f"How is stock {i}, with commas, doing?", "FinanceTool") for i in range(40)]
    rows += [(NOISY, "WeatherTool"), (NOISY, "word_sneak")]  # one text, two tools: label noise
    rows += [("  Play   a word game  ", "word_sneak"), ("Play a word game", "word_sneak")]  # a repeat, once spaced
    return rows


def _metatool(folder: Path, checkout: bool = True) -> Path:
    """A MetaTool checkout (``dataset/...``) or a flat copy of its files, with a LICENSE."""
    data = folder / "dataset" if checkout else folder
    (data / "data" if checkout else data).mkdir(parents=True, exist_ok=True)
    (data / "plugin_des.json").write_text(json.dumps(TOOLS), encoding="utf-8")
    with (data / "data" / "all_clean_data.csv" if checkout else data / "all_clean_data.csv").open(
        "w", encoding="utf-8", newline=""
    ) as handle:
        writer = csv.writer(handle)
        writer.writerow(["Query", "Tool"])
        writer.writerows(_rows())
    (folder / "LICENSE").write_text("MIT License\n\nCopyright (c) 2023 Someone\n", encoding="utf-8")
    return folder


def _train(out: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in (out / "train.ndjson").read_text(encoding="utf-8").splitlines()]


def test_split_is_deterministic_and_by_sha1(tmp_path: Path) -> None:
    data = _metatool(tmp_path / "metatool")
    first = build(data, tmp_path / "a")
    build(data, tmp_path / "b")
    for name in ("catalog.json", f"{NAME}.jsonl", f"{NAME}.meta.json", "train.ndjson", "README.md", "LICENSE"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    test = [q.query for q in load_eval_set(tmp_path / "a" / f"{NAME}.jsonl")]
    train = [row["query"] for row in _train(tmp_path / "a")]
    assert test and train
    assert all(is_test(q) for q in test) and not any(is_test(q) for q in train)
    assert test == sorted(test, key=digest) and train == sorted(train, key=digest)
    assert len(test) + len(train) == first.distinct == 81  # 80 + the word game once; the noisy text is gone


def test_noisy_labels_and_repeats_are_dropped(tmp_path: Path) -> None:
    built = build(_metatool(tmp_path / "metatool"), tmp_path / "out")
    out = tmp_path / "out"
    queries = [q.query for q in load_eval_set(out / f"{NAME}.jsonl")] + [r["query"] for r in _train(out)]
    assert NOISY not in queries
    assert queries.count("Play a word game") == 1  # whitespace collapsed, then kept once
    assert built.dropped["rows of a query labelled with several tools"] == 2
    assert built.dropped["repeated (query, tool) rows"] == 1
    assert "CSV rows" in (out / "README.md").read_text(encoding="utf-8")
    assert "Copyright (c) 2023 Someone" in (out / "README.md").read_text(encoding="utf-8")


def test_relevant_ids_are_the_tools_document_ids(tmp_path: Path) -> None:
    build(_metatool(tmp_path / "metatool", checkout=False), tmp_path / "out")
    path = tmp_path / "out" / f"{NAME}.jsonl"
    labels = {q: t for q, t in _rows() if q != NOISY}
    for query in load_eval_set(path):
        assert query.relevant == {f"tools:catalog:{labels[query.query]}": 1}
        assert query.tags == ["tools"] and query.id.startswith("metatool-")
    meta = load_eval_set_meta(path)
    assert meta.sources == ["tools"] and meta.license == "MIT" and meta.queries == len(load_eval_set(path))


def test_catalog_reads_without_problems(tmp_path: Path) -> None:
    build(_metatool(tmp_path / "metatool"), tmp_path / "out")
    tools, problems = read_catalog(tmp_path / "out" / "catalog.json")
    assert problems == []
    assert [(t.name, t.description, t.tags) for t in tools] == [(n, d, ()) for n, d in TOOLS.items()]


def test_subsamples_keep_the_smallest_sha1(tmp_path: Path) -> None:
    data = _metatool(tmp_path / "metatool")
    whole = build(data, tmp_path / "whole")
    small = build(data, tmp_path / "small", test_limit=2, train_max_bytes=100, train_limit=5)
    assert [q for q, _ in small.test] == [q for q, _ in whole.test[:2]]
    assert [r["query"] for r in _train(tmp_path / "small")] == [q for q, _ in whole.train[:5]]
    assert small.train_sampled and not whole.train_sampled


def test_a_missing_licence_stops_the_build(tmp_path: Path) -> None:
    data = _metatool(tmp_path / "metatool")
    (data / "LICENSE").unlink()
    with pytest.raises(SystemExit):
        build(data, tmp_path / "out")
    assert not (tmp_path / "out").exists()
