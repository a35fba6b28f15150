"""Unit tests of ``rag_pipeline/http/``: the app's shared parts, limits and errors, and each route module through
FastAPI's TestClient on a small in-process index."""
