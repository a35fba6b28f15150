"""Slack: the Web API reader, the export reader, threads as documents, markup, the workspace identity."""
