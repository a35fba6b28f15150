"""Implementations of the ``rag-pipeline`` sub-commands (the parser lives in :mod:`rag_pipeline.cli`)."""
