"""Tests of the Dagster-free names and data-folder operations (``rag_pipeline/pipeline/``)."""
