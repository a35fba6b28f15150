"""A cross-encoder reranker: a sentence-transformers ``CrossEncoder`` reads each (query, passage) pair jointly.

The model is a local folder (the normal case: nothing is downloaded at run time) or a Hugging Face hub name,
which only loads where its weights are already in the local cache or the hub is reachable. Loading is deferred
to the first :meth:`CrossEncoderReranker.score` call because importing torch and building the model is slow
and most code paths that construct a reranker (configuration, Dagster definitions) never score anything.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_pipeline.retrieval.results import SearchResult

if TYPE_CHECKING:
    from sentence_transformers import CrossEncoder
    from sentence_transformers.base.modality_types import PairInput


class CrossEncoderLoadError(RuntimeError):
    """The cross-encoder could not be loaded (missing folder, incomplete files, hub name not reachable)."""


def _looks_like_path(model: str) -> bool:
    """True when ``model`` names a filesystem location rather than a hub id like ``org/name``.

    Hub ids are ``name`` or ``org/name``; anything absolute, relative with ``.``/``~``, with a backslash or
    with more than one ``/`` can only be a path, so a missing folder is reported as such instead of being
    retried as a hub download.
    """
    if Path(model).expanduser().exists():
        return True
    return model.startswith(("/", ".", "~")) or "\\" in model or model.count("/") > 1


def passage_text(candidate: SearchResult) -> str:
    """The text a candidate is judged on: its parent section (more context), else the matching child."""
    return candidate.parent_text or candidate.child_text


class CrossEncoderReranker:
    """Scores candidates with a cross-encoder; higher is more relevant.

    Scores are the model's raw logits (no sigmoid), whatever activation the model was saved with: they are
    monotone in the model's relevance estimate, compare across models of one family, and stay informative as
    a feature when saturated sigmoids would collapse to 1.0. Inputs longer than the model's maximum length are
    truncated by the model's own tokenizer (longest sequence first, so the passage is cut before the query).
    """

    def __init__(self, model: str, max_length: int | None = None, batch_size: int = 32, device: str = "cpu") -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if max_length is not None and max_length < 8:
            raise ValueError(f"max_length must leave room for a query and a passage, got {max_length}")
        self.model = model
        self.name = f"cross-encoder:{model}"
        self.batch_size = batch_size
        self.device = device
        self._requested_max_length = max_length
        self._local = _looks_like_path(model)
        if self._local:
            path = Path(model).expanduser()
            # Checked here, not at first use: a typo in a configured path should fail when the pipeline is
            # configured, and a stat is cheap where loading the model is not.
            if not path.is_dir():
                raise CrossEncoderLoadError(f"cross-encoder model folder not found: {path.resolve()}")
        self._model: CrossEncoder | None = None
        self._lock = threading.Lock()

    @property
    def max_length(self) -> int:
        """Tokens per (query, passage) pair after truncation, special tokens included (loads the model)."""
        length = self._load().max_seq_length
        assert length is not None  # _load refuses a model without a maximum input length
        return int(length)

    def score(self, query: str, candidates: Sequence[SearchResult]) -> list[float]:
        """One score per candidate, in candidate order."""
        if not candidates:
            return []
        pairs = [(query, passage_text(candidate)) for candidate in candidates]
        return self.score_pairs(pairs)

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Raw scores for (query, passage) pairs: the building block of :meth:`score`, also used by evaluation."""
        if not pairs:
            return []
        import torch

        model = self._load()
        inputs: list[PairInput] = [list(pair) for pair in pairs]
        # predict() is not re-entrant across threads (it toggles eval mode and moves the model); one lock
        # per reranker keeps concurrent searches in one process safe.
        with self._lock:
            scores = model.predict(
                inputs,
                batch_size=self.batch_size,
                activation_fn=torch.nn.Identity(),
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return [float(value) for value in scores.reshape(-1)]

    def _load(self) -> CrossEncoder:
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is None:
                self._model = self._build()
        return self._model

    def _build(self) -> CrossEncoder:
        from sentence_transformers import CrossEncoder

        source = str(Path(self.model).expanduser()) if self._local else self.model
        try:
            model: CrossEncoder = CrossEncoder(
                source,
                device=self.device,
                max_length=self._requested_max_length,
                # A local folder never needs the hub; without this sentence-transformers may still ask it for
                # model-card metadata. Hub names follow HF_HUB_OFFLINE (cache only) like every other HF load.
                local_files_only=self._local,
            )
        except Exception as exc:  # transformers raises OSError, ValueError or hub errors depending on the cause
            where = f"folder {source}" if self._local else f"hub model {source!r} (cached or downloadable)"
            raise CrossEncoderLoadError(f"could not load cross-encoder from {where}: {exc}") from exc
        if model.num_labels != 1:
            raise CrossEncoderLoadError(
                f"cross-encoder {source!r} has {model.num_labels} output labels; a reranker needs a single score"
            )
        limit = _position_limit(model.model)
        current = model.max_seq_length
        # An explicit max_length bypasses sentence-transformers' own cap at max_position_embeddings, and that
        # cap ignores RoBERTa's position offset: clamp so an over-long pair is truncated, never an index error.
        if limit is not None and (current is None or current > limit):
            model.max_seq_length = limit
        elif current is None or current > 1_000_000:
            raise CrossEncoderLoadError(
                f"cross-encoder {source!r} declares no maximum input length; pass max_length explicitly"
            )
        return model


def _position_limit(transformers_model: Any) -> int | None:
    """The longest input the model's position embeddings accept, or None when it has no learned table."""
    config = getattr(transformers_model, "config", None)
    if config is None:
        return None
    if hasattr(config, "get_text_config"):
        config = config.get_text_config()
    positions = getattr(config, "max_position_embeddings", None)
    if not isinstance(positions, int) or positions <= 0:
        return None
    # RoBERTa-family embeddings number positions from padding_idx + 1, so a 514-row table holds 512 tokens.
    import torch

    for module in transformers_model.modules():
        padding_idx = getattr(module, "padding_idx", None)
        if isinstance(padding_idx, int) and isinstance(getattr(module, "position_embeddings", None), torch.nn.Module):
            return positions - (padding_idx + 1)
    return positions
