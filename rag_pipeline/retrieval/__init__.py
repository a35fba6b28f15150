"""Search over the index: retrieval arms, small-to-big results, rerankers (no orchestration here)."""
