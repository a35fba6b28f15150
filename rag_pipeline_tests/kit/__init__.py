"""The test kit: everything the tests share that is not a test.

``data`` (crafted Slack exports and Jira dumps), ``slack_fixtures``/``jira_fixtures`` (the emulators' workspaces
and sites), ``serving_fixtures`` (a search service in a subprocess), ``slack_index`` (an index from the Slack
emulator), ``pipeline`` (the code location's pieces), ``sync_harness``/``sync_week`` (sensor ticks and the
simulated week), ``postgres_server``, ``hostile``, ``beir``, ``tokenizer_checks``, ``paths``; ``emulators/``
(HTTP stand-ins for Slack, Jira, OpenAI and Qdrant) and ``fixtures/`` (data files). The kit never imports a
conftest or a test module, and the bench scripts may import it.
"""
