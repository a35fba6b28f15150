"""The search service's HTTP face (FastAPI): module-level routers (``routes/``), the authentication and admission
guard, the body and Host limits, the error shapes, and the app factory that wires them (``app.py``). Thin: every
search comes from :class:`~rag_pipeline.serving.service.SearchService`, every answer from
:mod:`rag_pipeline.answers.ask`, the MCP tools from :mod:`rag_pipeline.mcp`.

Every error is a JSON object ``{"error": ..., "field": ...}`` with a 4xx status naming what was wrong, or a 503
saying why the index cannot answer now; an unexpected failure is a 500 with no detail (the traceback goes to the
server's log, without the query). Query text is never logged at INFO: uvicorn's access log shows the method and
path only, and the body is never logged.
"""
