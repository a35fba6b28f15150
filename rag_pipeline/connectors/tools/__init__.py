"""Tool definitions as a source: a catalog file and the ``tools/list`` of MCP servers, indexed like documents so
an agent can search for the few tools a task needs instead of loading every one (issue 52, the design's tool
search)."""
