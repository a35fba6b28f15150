"""In-process runners over the real Dagster machinery: the demo backfill, live syncs and the evaluation.

They execute the code location's assets on a local Dagster instance (``DAGSTER_HOME``, else one under
the data folder), so everything they do shows in the Dagster UI as ordinary runs.
"""
