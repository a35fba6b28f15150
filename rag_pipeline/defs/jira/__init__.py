"""Jira: (day, project) partitions, ``jira_issues`` from the REST API or a dump, the chain to Qdrant,
reconciliation and project discovery; ``jira_spec`` builds them all from the settings."""

from rag_pipeline.defs.jira.spec import jira_spec

__all__ = ["jira_spec"]
