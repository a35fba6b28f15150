"""Small indexes built from the Slack Web API emulator for tests that need no dense model: threads read through
the real slack-sdk client, indexed with a 4-d stand-in encoder."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from rag_pipeline.connectors.slack.api import SlackApiReader, build_web_client
from rag_pipeline.index.store import VectorStore
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.document import Document
from rag_pipeline.stages import documents_frame, index_documents_directly
from rag_pipeline.text.chunking import Chunker
from rag_pipeline.vectors.sparse import Bm25Encoder
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator

TOKEN = "xoxb-test-token"
MARCH = [f"2024-03-{d:02d}" for d in range(1, 13)]
# Never loadable: set as RAG_DENSE_MODEL (and recorded in the index), any attempt to load the dense model fails.
UNLOADABLE_MODEL = "no-such-dense-model-in-tests"


class HashEncoder:
    """A 4-d stand-in for the dense model: a text's vector comes from its hash; counts what it embeds."""

    model_id = UNLOADABLE_MODEL
    dimension = 4
    max_tokens = 512

    def __init__(self) -> None:
        self.embedded = 0

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded += len(texts)
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:4], dtype=np.uint8) + 1.0 for t in texts]
        return np.stack([r / np.linalg.norm(r) for r in rows]) if rows else np.zeros((0, 4))

    encode_queries = encode_documents

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def reader(emu: SlackEmulator) -> SlackApiReader:
    """A fresh reader (it caches channel members, as one run does)."""
    return SlackApiReader(build_web_client(TOKEN, emu.base_url, stats=ApiStats()))


def read_threads(emu: SlackEmulator, *channels: str) -> list[Document]:
    """Every thread of the channels active in March 2024."""
    api = reader(emu)
    return [d for c in channels for d in api.read_days(c, MARCH).documents]


def index_threads(store: VectorStore, documents: list[Document]) -> None:
    index_documents_directly(store, documents_frame(documents), Chunker(), HashEncoder(), Bm25Encoder())


def point_payloads(store: VectorStore, document_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Every point (children and parents) of the documents, by id, with its whole payload."""
    out = {}
    for collection in (store.names.children, store.names.parents):
        ids = [r.id for r in store.document_points(collection, document_ids)]
        out.update({h.id: h.payload for h in store.retrieve(collection, ids)})
    return out
