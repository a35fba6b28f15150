"""One folder per connector: everything a source knows (readers, settings, identity, markup, principal directory,
reconciliation, its retrieval facts), Dagster-free and found only through :mod:`rag_pipeline.sources.registry`."""
