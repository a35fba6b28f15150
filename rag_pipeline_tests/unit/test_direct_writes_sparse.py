"""A write outside the chain (a reconciliation rewrite, a mined set's masked copy) weighs BM25 as the chain does: in a
CJK index a chat thread's children carry their thread's vector; every other source's children their own."""

from __future__ import annotations

import numpy as np

from rag_pipeline.sources.document import Acl, Document, content_hash
from rag_pipeline.stages import chunk_documents, documents_frame, sparse_vectors_of
from rag_pipeline.text.chunking import Chunker, ChunkingConfig
from rag_pipeline.vectors.sparse import THREAD_AVG_LEN, Bm25Encoder, Bm25Params


def _doc(doc_id: str, source: str, text: str) -> Document:
    from datetime import UTC, datetime

    when = datetime(2024, 3, 1, tzinfo=UTC)
    return Document(id=doc_id, source=source, container="C", title="t", text=text, created=when, updated=when,
                    version=when.timestamp(), content_hash=content_hash(text), acl=Acl(public=True))  # fmt: skip


def test_chat_threads_carry_their_thread_vector_in_a_cjk_index() -> None:
    text = " ".join(f"프린터 드라이버 {i}번 설치 방법을 알려주세요" for i in range(40))
    documents = documents_frame([_doc("slack:T:C:1.0", "slack", text), _doc("jira:s:1", "jira", text)])
    parents, children = chunk_documents(documents, Chunker(ChunkingConfig(parent_tokens=2000, child_tokens=100,
                                                                           child_overlap=10)))  # fmt: skip
    bm25 = Bm25Encoder(Bm25Params(tokenizer="cjk-bigram"))
    sparse = sparse_vectors_of(documents, parents, children, bm25).set_index("chunk_id")
    thread = Bm25Encoder(bm25.params.model_copy(update={"avg_len": THREAD_AVG_LEN}))
    parent_text = dict(zip(parents["chunk_id"], parents["text"], strict=True))
    for row in children.itertuples():
        got = sparse.loc[row.chunk_id]
        if row.document_id.startswith("slack:"):
            want = thread.encode_documents([parent_text[row.parent_id]])[0]
        else:
            want = bm25.encode_documents([row.text])[0]
        assert list(got["indices"]) == list(want.indices)
        assert np.allclose(got["values"], want.values)
    # An English index scores every child on its own text.
    word = Bm25Encoder(Bm25Params(tokenizer="word"))
    plain = sparse_vectors_of(documents, parents, children, word).set_index("chunk_id")
    first = children.iloc[0]
    assert list(plain.loc[first.chunk_id]["indices"]) == list(word.encode_documents([first.text])[0].indices)
