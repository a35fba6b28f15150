"""Slack: (day, channel) partitions, ``slack_threads`` from the Web API or an export, the chain to Qdrant,
reconciliation and channel discovery; ``slack_spec`` builds them all from the settings."""

from rag_pipeline.defs.slack.spec import slack_spec

__all__ = ["slack_spec"]
