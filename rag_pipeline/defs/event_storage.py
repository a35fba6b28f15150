"""Where the runners' event storage used to live: instances created before it moved to
:mod:`rag_pipeline.runs.event_storage` name this module in their ``dagster.yaml``, and keep loading."""

from rag_pipeline.runs.event_storage import BatchingSqliteEventLogStorage

__all__ = ["BatchingSqliteEventLogStorage"]
