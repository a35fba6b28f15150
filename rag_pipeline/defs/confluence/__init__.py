"""Confluence's Dagster side: ``spec.py`` (what differs from any live source, built by
:mod:`rag_pipeline.defs.chain.live_spec`) and ``resources.py`` (the API and offline resources)."""
