"""The search service's Model Context Protocol face (the official ``mcp`` SDK), as ``http/`` is its HTTP face.

- :mod:`.tools`: one module-level function per tool, each a thin call into the application layer
  (:mod:`rag_pipeline.serving`) through a :class:`~.backends.ToolBackend`;
- :mod:`.server`: the server those tools are registered on, shared by both transports — stdio
  (``rag-pipeline mcp``) and streamable HTTP mounted at ``/mcp`` in ``rag-pipeline serve``;
- :mod:`.backends`: where a tool call runs — this process's search service;
- :mod:`.remote`: or a running ``rag-pipeline serve`` of the same folder over its HTTP API (the stdio server's).

The reader is the server's: fixed at start for stdio, the caller's identity headers over HTTP. It is never a tool
argument, so a model cannot widen what it may see by what it writes into a call.
"""
