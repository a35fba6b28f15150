"""Dagster tests: assets materialized in-process, definitions (and their snapshot), sensors, instances, resources."""
