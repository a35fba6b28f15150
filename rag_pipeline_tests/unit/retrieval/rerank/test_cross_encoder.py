"""The cross-encoder reranker on a tiny BERT built in the test: no download, scores checked against transformers."""

from __future__ import annotations

import os

# Before anything imports huggingface_hub, which reads these once: any hub access must fail, not hang.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import random
import re
from pathlib import Path

import pytest

from rag_pipeline.retrieval.rerank.base import rerank
from rag_pipeline.retrieval.rerank.cross_encoder import CrossEncoderLoadError, CrossEncoderReranker
from rag_pipeline.retrieval.results import SearchResult

WORDS = [
    *("the", "a", "cat", "dog", "sat", "on", "mat", "grub", "boot"),
    *("error", "kernel", "ubuntu", "install", "failed", "how", "do", "i", "fix"),
]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
POSITIONS = 64
QUERY = "how do i fix grub"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-layer BERT cross-encoder with a word-level tokenizer (one token per word, so truncation is exact)."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIALS + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    # No model_max_length: the reranker must take the limit from the model's position table.
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]"
    )
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=1,
        max_position_embeddings=POSITIONS,
        pad_token_id=vocab["[PAD]"],
        # Wide initial weights so random texts get clearly different scores and orderings mean something.
        initializer_range=0.5,
    )
    directory = tmp_path_factory.mktemp("tiny_cross_encoder")
    BertForSequenceClassification(config).eval().save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def reranker(model_dir: Path) -> CrossEncoderReranker:
    return CrossEncoderReranker(str(model_dir))


def direct_logits(model_dir: Path, pairs: list[tuple[str, str]], max_length: int = POSITIONS) -> list[float]:
    """The reference: transformers' own tokenizer and forward pass, one unpadded pair at a time."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = BertForSequenceClassification.from_pretrained(model_dir).eval()
    out = []
    with torch.inference_mode():
        for query, text in pairs:
            batch = tokenizer(query, text, truncation="longest_first", max_length=max_length, return_tensors="pt")
            out.append(float(model(**batch).logits[0, 0]))
    return out


def result(i: int, child: str, parent: str = "") -> SearchResult:
    return SearchResult(
        document_id=f"d{i}",
        score=1.0 / (i + 1),
        source="test",
        container="c",
        title=f"doc {i}",
        url=None,
        child_id=f"d{i}#c0",
        child_text=child,
        parent_id=f"d{i}#p0",
        parent_text=parent,
    )


def texts(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 20))) for _ in range(count)]


def test_scores_are_the_models_logits(reranker: CrossEncoderReranker, model_dir: Path) -> None:
    passages = texts(8)
    # Half the candidates carry a parent; the rest must fall back to their child text.
    candidates = [result(i, child=f"child {p}", parent=p if i % 2 else "") for i, p in enumerate(passages)]
    expected_texts = [c.parent_text or c.child_text for c in candidates]

    scores = reranker.score(QUERY, candidates)

    assert all(type(s) is float for s in scores)
    assert scores == pytest.approx(direct_logits(model_dir, [(QUERY, t) for t in expected_texts]), abs=1e-5)
    assert len({round(s, 3) for s in scores}) > 4, "the tiny model should discriminate between texts"
    assert reranker.name == f"cross-encoder:{model_dir}"
    assert reranker.max_length == POSITIONS


def test_batch_size_does_not_change_scores(model_dir: Path, reranker: CrossEncoderReranker) -> None:
    candidates = [result(i, child=t) for i, t in enumerate(texts(10, seed=3))]
    full = reranker.score(QUERY, candidates)
    one_by_one = CrossEncoderReranker(str(model_dir), batch_size=1).score(QUERY, candidates)
    threes = CrossEncoderReranker(str(model_dir), batch_size=3).score(QUERY, candidates)
    assert one_by_one == pytest.approx(full, abs=1e-5)
    assert threes == pytest.approx(full, abs=1e-5)


def test_long_parent_is_truncated_not_an_error(reranker: CrossEncoderReranker, model_dir: Path) -> None:
    rng = random.Random(11)
    words = [rng.choice(WORDS) for _ in range(20 * POSITIONS)]
    long_text = " ".join(words)
    # [CLS] query [SEP] passage [SEP]: longest-first truncation keeps the short query whole.
    kept = POSITIONS - 3 - len(QUERY.split())
    prefix = " ".join(words[:kept])

    long_score, prefix_score, shorter_score = reranker.score(
        QUERY, [result(0, "child", long_text), result(1, "child", prefix), result(2, " ".join(words[: kept - 5]))]
    )

    assert long_score == pytest.approx(prefix_score, abs=1e-5)
    assert long_score == pytest.approx(direct_logits(model_dir, [(QUERY, long_text)])[0], abs=1e-5)
    assert shorter_score != pytest.approx(long_score, abs=1e-5), "the last kept tokens must matter"


def test_max_length_is_honoured_and_capped(model_dir: Path) -> None:
    words = texts(1, seed=5)[0].split() * 40
    short = CrossEncoderReranker(str(model_dir), max_length=32)
    assert short.max_length == 32
    kept = 32 - 3 - len(QUERY.split())
    cut, prefix = short.score(QUERY, [result(0, " ".join(words)), result(1, " ".join(words[:kept]))])
    assert cut == pytest.approx(prefix, abs=1e-5)

    # Beyond the position table the model would index out of range: the limit is clamped instead.
    too_long = CrossEncoderReranker(str(model_dir), max_length=10 * POSITIONS)
    assert too_long.max_length == POSITIONS
    assert len(too_long.score(QUERY, [result(0, " ".join(words))])) == 1


def test_rerank_orders_by_cross_encoder_score(reranker: CrossEncoderReranker) -> None:
    candidates = [result(i, child=t) for i, t in enumerate(texts(6, seed=21))]
    expected = reranker.score(QUERY, candidates)
    original_scores = {c.document_id: c.score for c in candidates}

    ranked = rerank(reranker, QUERY, candidates)

    assert [r.score for r in ranked] == sorted(expected, reverse=True)
    assert {r.document_id: r.score for r in ranked} == {
        c.document_id: s for c, s in zip(candidates, expected, strict=True)
    }
    assert all(r.signals["before_rerank"] == original_scores[r.document_id] for r in ranked)
    assert reranker.score(QUERY, []) == []


def test_missing_folder_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_model"
    with pytest.raises(CrossEncoderLoadError, match=re.escape(str(missing))):
        CrossEncoderReranker(str(missing))


def test_folder_without_a_model_names_the_path(tmp_path: Path) -> None:
    empty = tmp_path / "empty_model"
    empty.mkdir()
    reranker = CrossEncoderReranker(str(empty))  # construction is lazy: nothing is read yet
    with pytest.raises(CrossEncoderLoadError, match=re.escape(str(empty))):
        reranker.score(QUERY, [result(0, "grub")])
