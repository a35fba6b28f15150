"""A toy third source for the tests: a folder of JSON documents, registered through the ``rag_pipeline.sources``
entry-point group from the test tree alone (no shared code names it)."""
