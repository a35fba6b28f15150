"""Test hook for Celery workers (on their PYTHONPATH only): once ``$RAG_TEST_PAUSE_MARKER.armed`` exists, the next
index write of the whole cluster writes its collection (parents come first), then records the process id in
``$RAG_TEST_PAUSE_MARKER`` and stalls, so a test can kill the worker holding a half-written index step. Every other
write, in any process, goes through."""

import os
import time

_marker = os.environ.get("RAG_TEST_PAUSE_MARKER")
if _marker:
    from rag_pipeline.index.edge_store import EdgeVectorStore

    _upsert = EdgeVectorStore.upsert

    def _paused_upsert(self, collection, points):  # type: ignore[no-untyped-def]
        _upsert(self, collection, points)
        if not os.path.exists(f"{_marker}.armed"):
            return
        try:
            # O_EXCL: exactly one write in the cluster pauses, the step run again elsewhere does not.
            fd = os.open(_marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return
        os.write(fd, f"{os.getpid()} {collection}".encode())
        os.close(fd)
        time.sleep(600)

    EdgeVectorStore.upsert = _paused_upsert
