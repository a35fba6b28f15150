"""End-to-end tests: the command line in subprocesses, the HTTP/MCP service, PostgreSQL, the Dagster UI in a browser."""
