"""The pipeline as names, without the orchestrator: what the in-process runners (``rag_pipeline.runs``) and the
Dagster wiring (``rag_pipeline.defs``) both speak of, so neither imports the other for it.

Nothing here imports Dagster. It holds the asset names of a source's chain and the partition key of a week
(:mod:`~rag_pipeline.pipeline.keys`), the run tags sync and index runs carry (:mod:`~rag_pipeline.pipeline.tags`),
how a source's scheduled sync plans (:mod:`~rag_pipeline.pipeline.policy`), the shape of a source as the runners
read it (:mod:`~rag_pipeline.pipeline.sources`) and what retention asks of the owners of the data folder's
artifacts (:mod:`~rag_pipeline.pipeline.retained`).

Why a package of its own: the runners used to import these from the Dagster wiring (``defs/builders.py``,
``defs/sync/tags.py``, ``defs/chain/...``), which itself imports the runners' retention: a cycle hidden by imports
inside functions. The Dagster objects themselves (assets, partitions definitions, resources, jobs, sensors) stay
under ``defs/``; the one runners' module that loads them to execute them in this process is
:mod:`rag_pipeline.runs.code_location`.
"""
