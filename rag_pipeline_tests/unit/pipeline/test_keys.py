"""``pipeline/keys.py``: the names of a source's chain assets, which asset keys, run records and the UI rely on."""

from __future__ import annotations

import pickle

import pytest

from rag_pipeline.pipeline.keys import ChainKeys, raw_config, week_key


def test_each_stage_asset_is_the_sources_name_joined_with_the_stages() -> None:
    keys = ChainKeys("jira", "jira_issues")
    assert (keys.parents, keys.children, keys.dense, keys.sparse, keys.points) == (
        "jira_parent_chunks",
        "jira_child_chunks",
        "jira_dense_vectors",
        "jira_sparse_vectors",
        "jira_qdrant_points",
    )
    assert keys.all == [
        "jira_issues",
        *[f"jira_{s}" for s in ("parent_chunks", "child_chunks", "dense_vectors", "sparse_vectors", "qdrant_points")],
    ]


def test_keys_stay_a_two_field_value_that_compares_hashes_and_pickles() -> None:
    keys = ChainKeys("slack", "slack_threads")
    assert keys == ChainKeys("slack", "slack_threads") and len({keys, ChainKeys("slack", "slack_threads")}) == 1
    assert repr(keys) == "ChainKeys(source='slack', raw='slack_threads')"
    assert pickle.loads(pickle.dumps(keys)).dense == "slack_dense_vectors"


def test_a_stage_name_asked_of_the_class_says_it_belongs_to_one_source() -> None:
    with pytest.raises(AttributeError, match="one source's asset"):
        _ = ChainKeys.parents


def test_week_key_and_raw_config() -> None:
    assert week_key("2024-03-07") == "2024-03-04"
    assert raw_config({"ops": {"slack_threads": {"config": {"channels": ["C1"]}}}}, "slack_threads") == {
        "channels": ["C1"]
    }
    assert raw_config(None, "slack_threads") == {}
