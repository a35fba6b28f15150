"""The test kit: everything the tests share that is not a test.

``data`` (crafted Slack exports and Jira dumps), ``slack_fixtures``/``jira_fixtures`` (the emulators' workspaces
and sites), ``serving_fixtures`` (a search service in a subprocess), ``slack_index`` (an index from the Slack
emulator), ``pipeline`` (the code location's pieces), ``sync_harness``/``sync_week`` (sensor ticks and the
simulated week), ``postgres_server``, ``hostile``, ``beir``, ``tokenizer_checks``, ``paths``; ``emulators/``
(HTTP stand-ins for Slack, Jira, OpenAI and Qdrant) and ``fixtures/`` (data files). The kit never imports a
conftest or a test module.

The kit is also a library for ``bench/``, by decision (issue 69): the benchmarks measure the pipeline against the
same emulators, harnesses and service fixtures the tests drive, so that a bench figure and a test exercise one
stand-in, not two that drift apart. These are test doubles, not production code, so they stay here rather than in
``rag_pipeline/``. Only the modules in :data:`PUBLISHED` are the kit's published API for ``bench/``: a bench script
imports nothing else of ``rag_pipeline_tests`` (no test module, no conftest, no other kit module), and a change to
a published module's names is a change to the bench scripts too. ``unit/kit/test_published_kit.py`` holds both
rules. The published modules:

- ``celery_cluster``: a Celery cluster on this machine (a Redis broker, ``rag-pipeline worker`` processes, range
  runs);
- ``container_stack``: the Compose stack the stack tests start;
- ``jira_fixtures``, ``slack_fixtures``: synthetic Jira sites and Slack workspaces of a given size;
- ``serving_fixtures``: a small permission-varied index, and ``rag-pipeline serve``/``mcp`` as real processes;
- ``sync_harness``, ``sync_week``: sensor ticks against the emulators, and the simulated week of syncs;
- ``emulators.jira_api``, ``emulators.jira_site``: the Jira REST emulator and the site it serves;
- ``emulators.slack_api``, ``emulators.slack_workspace``: the Slack Web API emulator and the workspace it serves;
- ``emulators.openai_api``: the OpenAI-compatible fake (embeddings, chat);
- ``emulators.oidc_issuer``: an OIDC issuer with its JWKS;
- ``emulators.push_senders``: signed Slack events and Jira/Confluence webhooks sent to a service (``bench.freshness``);
- ``postgres_server``: a throwaway PostgreSQL server from the Debian packages (``bench.pool_claims``);
- ``pool_claim_race``: claimers racing for one pool slot, and the plain-Dagster control configs.

Publishing another module: add it to :data:`PUBLISHED` and to the list above.
"""

PUBLISHED: frozenset[str] = frozenset(
    {
        "celery_cluster",
        "container_stack",
        "jira_fixtures",
        "slack_fixtures",
        "serving_fixtures",
        "sync_harness",
        "sync_week",
        "emulators.jira_api",
        "emulators.jira_site",
        "emulators.slack_api",
        "emulators.slack_workspace",
        "emulators.openai_api",
        "emulators.oidc_issuer",
        "emulators.push_senders",
        "postgres_server",
        "pool_claim_race",
    }
)
"""The kit's modules that ``bench/`` may import, relative to ``rag_pipeline_tests.kit``."""
