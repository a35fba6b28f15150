"""Jira: raw issues from the offline dump, and the chain to Qdrant."""
