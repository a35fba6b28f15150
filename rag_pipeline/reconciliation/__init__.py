"""Keeping the index in step with live sources: reconciliation of deletions and rewrites."""
