"""Confluence as a source: pages and blog posts of a site's spaces, from a JSON-lines dump or the live REST API."""
