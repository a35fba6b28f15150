"""Rerankers: rescore a retriever's candidates (learned multi-signal, cross-encoder, LLM later)."""
