"""The service's routes, one module-level ``APIRouter`` per concern; each reads the app's shared parts through
:func:`rag_pipeline.http.state.http_state` and the caller through :func:`rag_pipeline.http.state.caller`."""
