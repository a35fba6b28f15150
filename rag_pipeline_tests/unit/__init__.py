"""Unit tests: domain code in-process, without a Dagster instance, a materialization or a command-line subprocess."""
