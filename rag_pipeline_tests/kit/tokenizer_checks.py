"""Checks of the dense encoders' batching shared by the unit and the multilingual tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from rag_pipeline.vectors.dense.openvino import pad_batch


def assert_pads_as_the_tokenizer(tokenizer: Any, names: list[str]) -> None:
    """``pad_batch`` on an unpadded tokenizer output equals ``tokenizer(..., padding=True)`` on each subset."""
    texts = ["", "x", "a somewhat longer text of several words", "日本語のテキスト", "word " * 400]
    encoded = tokenizer(texts, truncation=True, max_length=64)
    for rows in ([0], [1, 0], [2, 4, 3], list(range(len(texts)))):
        inputs, mask = pad_batch(tokenizer, encoded, rows, names)
        expected = tokenizer(
            [texts[i] for i in rows], truncation=True, max_length=64, padding=True, return_tensors="np"
        )
        assert np.array_equal(mask, expected["attention_mask"]), rows
        for name in names:
            assert inputs[name].dtype == np.int64 and np.array_equal(inputs[name], expected[name]), (name, rows)
