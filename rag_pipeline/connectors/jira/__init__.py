"""Jira: the REST reader and its HTTP client guards, the JSON-lines dump and CSV export readers, markup, resolution
and the site identity."""
