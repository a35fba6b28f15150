"""Dagster wiring of the retrieval evaluation: reranker model, per-arm eval runs, the comparison report."""
