"""The tools source's Dagster wiring: a resource over the configured tool definitions and its spec."""
