"""The Dagster code location of rag_pipeline (``dagster dev -m rag_pipeline.definitions``, the daemon, the
webserver, ``workspace.yaml``).

Everything is built from one ``Settings`` by :func:`rag_pipeline.defs.builders.build_definitions`; ``defs`` is
loaded lazily by Dagster's tools, so importing this module reads no configuration.
"""

from __future__ import annotations

import dagster as dg

from rag_pipeline.defs.builders import build_definitions
from rag_pipeline.settings import Settings, load_env_file


@dg.definitions
def defs() -> dg.Definitions:
    """The code location Dagster loads (``dagster dev``, the daemon, ``dagster-webserver``)."""
    load_env_file()  # the code location's working directory's .env (or $RAG_ENV_FILE); the environment wins
    return build_definitions(Settings.from_env())
