"""Local stand-ins for the HTTP services the pipeline talks to, for tests and benchmarks (stdlib HTTP servers on
127.0.0.1; real clients are pointed at them).

Modules:

* :mod:`.http`: what every emulator shares: a threaded HTTP server on a free port, its start/stop lifecycle
  (:class:`~.http.LocalHttpService`, usable as a context manager) and ``send``/``send_json`` response helpers.
* :mod:`.slack_workspace`: the Slack data model: :class:`~.slack_workspace.SlackWorkspace` (team, users, channels,
  messages and threads, edits and tombstones, Slack export folders in and out).
* :mod:`.slack_api`: the Slack Web API server over a workspace: :class:`~.slack_api.SlackEmulator` (methods, auth and
  scopes, cursor paging, rate limits, injected faults, recorded requests).
* :mod:`.jira_site`: the Jira site model: :class:`~.jira_site.JiraSite` and :class:`~.jira_site.JiraProject`
  (projects, issues, comments, permission schemes and role actors, dumps), wiki/ADF body conversion, Jira timestamps.
* :mod:`.jql`: the JQL subset: tokenizer, parser, date literals, predicates over a site's issues, ORDER BY.
* :mod:`.jira_api`: the Jira REST server over a site: :class:`~.jira_api.JiraEmulator` (Cloud and Server routes, auth,
  search and comment paging, projects, injected faults, recorded requests).
* :mod:`.openai_api`: a fake of the OpenAI embeddings and chat completions API (:class:`~.openai_api.OpenAIFake`).
* :mod:`.qdrant_rest`: a recording stand-in for the Qdrant REST API's collection setup
  (:class:`~.qdrant_rest.QdrantRestRecorder`).
"""
