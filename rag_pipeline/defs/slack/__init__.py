"""Slack: raw threads from the offline export, and the chain to Qdrant."""
