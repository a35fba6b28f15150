"""The declared catalogue of every environment variable the project reads: one entry per variable, written once.

``Settings.from_env`` (``rag_pipeline/settings.py`` and each source's settings section) is still what *reads* the
environment; this module only *declares* what it reads: each variable's type, its default as text, which processes
use it, whether it is a secret, and one line saying what it does. Everything that has to list the variables is made
from or checked against this tuple instead of keeping a list of its own:

- ``tools/settings_docs.py`` writes ``deploy/.env.example``, the table in ``docs/guides/configuration.md`` and the
  pass-through blocks of ``deploy/compose.yaml``, ``deploy/helm/dagster-values.yaml`` and
  ``deploy/k8s/search-service.yaml`` from it;
- ``rag_pipeline_tests/unit/test_setting_catalog.py`` fails when the code reads a variable missing here, or when an
  entry names a variable the code no longer reads; ``rag_pipeline_tests/unit/deploy/test_settings_deploy.py`` fails
  when a generated file is stale, a deployed process misses a setting it reads, or a secret's value is written.

Nothing here is read from the environment, and nothing is imported from the rest of the package, so the generator
can load it without the project's dependencies.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Process = Literal["dagster", "serve", "metrics", "mcp", "cli"]

# What each process is, as the deployment files run it.
PROCESSES: dict[Process, str] = {
    "dagster": "the code location: the code server, the run workers and the step workers (Celery or Kubernetes Jobs)",
    "serve": "the search service (`rag-pipeline serve`: HTTP and `/mcp`)",
    "metrics": "the ingestion metrics exporter (`rag-pipeline metrics`)",
    "mcp": "the stdio MCP server (`rag-pipeline mcp`)",
    "cli": "the other `rag-pipeline` commands (`index`, `sync`, `search`, `ask`, `evaluate`, `status`, `prune`, ...)",
}

# Who reads a variable, by the kind of thing it configures (the tuples the entries below use).
_EVERY: tuple[Process, ...] = ("dagster", "serve", "metrics", "mcp", "cli")
_SEARCHING: tuple[Process, ...] = ("dagster", "serve", "mcp", "cli")  # embeds or searches the index
_WRITING: tuple[Process, ...] = ("dagster", "cli")  # reads the sources, writes the index, evaluates
_SYNCING: tuple[Process, ...] = ("dagster", "metrics", "cli")  # plans or reports the scheduled sync
_READERS: tuple[Process, ...] = ("serve", "mcp", "cli")  # answers readers' searches
_NOBODY: tuple[Process, ...] = ()  # read, but without effect in this version


@dataclass(frozen=True)
class Setting:
    """One environment variable the project reads."""

    name: str
    # How the value is read: text, whole number, number, flag (1/0, true/false, yes/no, on/off), cron, a choice
    # (``choice: a|b``), path, paths (``:``-separated), list (comma-separated), URL, date.
    type: str
    # The value in effect when the variable is unset, as text; "" when unset means off, none, or a value derived
    # from something else (``default_note`` says what).
    default: str
    read_by: tuple[Process, ...]
    description: str
    group: str
    secret: bool = False
    # A path or address of the machine or container the process runs in (the data folder, caches, the Dagster home):
    # each deployment sets it itself (the image's ENV, a compose override), and deploy/.env never passes it through.
    fixed: bool = False
    # False where a reader other than ``Settings`` (the OpenAI client, Dagster, Hugging Face) takes an empty value as
    # a value: such a variable is left unset or given a real value in the deployment files, never "".
    empty_is_unset: bool = True
    default_note: str = ""

    @property
    def default_text(self) -> str:
        """The default as the documentation says it."""
        if self.default:
            return f"`{self.default}`" + (f" ({self.default_note})" if self.default_note else "")
        return self.default_note or "unset"


_FILES = "Data folder and files"
_INDEX = "Index and models"
_SEARCH = "Search and answers"
_EVALUATION = "Evaluation"
_EXECUTION = "Execution"
_OFFLINE = "Offline sources"
_LIVE = "Live sources"
_SYNC = "Scheduled sync"
_UPKEEP = "Notifications, retention and audit"
_SERVICE = "Search service"
_TOOLS = "Tool search"

GROUPS: tuple[str, ...] = (
    _FILES,
    _INDEX,
    _SEARCH,
    _EVALUATION,
    _EXECUTION,
    _OFFLINE,
    _LIVE,
    _SYNC,
    _UPKEEP,
    _SERVICE,
    _TOOLS,
)


def _atlassian_api(prefix: str, product: str, page_size: str) -> tuple[Setting, ...]:
    """The live REST API of an Atlassian product (``<prefix>_URL`` and its companions)."""
    pat = f"{prefix}_PAT"
    return (
        Setting(
            f"{prefix}_URL", "URL", "", _WRITING, f"{product} site; set, the live REST API replaces the dump", _LIVE
        ),
        Setting(f"{prefix}_USERNAME", "text", "", _WRITING, "Cloud: the account's e-mail (with the API token)", _LIVE),
        Setting(f"{prefix}_API_TOKEN", "text", "", _WRITING, "Cloud: the API token (an EnvVar)", _LIVE, secret=True),
        Setting(
            pat, "text", "", _WRITING, "Server/Data Center: personal access token, sent as Bearer", _LIVE, secret=True
        ),
        Setting(
            f"{prefix}_CLOUD",
            "flag",
            "1",
            _WRITING,
            "Cloud or Server/Data Center REST",
            _LIVE,
            default_note=f"`0` when only {pat} is set",
        ),
        Setting(
            f"{prefix}_SITE",
            "text",
            "",
            _WRITING,
            "site name in document ids and ACL groups (also of a dump that names none)",
            _LIVE,
            default_note="the URL's host",
        ),
        Setting(f"{prefix}_PAGE_SIZE", "whole number", page_size, _WRITING, "items per search page", _LIVE),
        Setting(
            f"{prefix}_OVERLAP_MINUTES", "whole number", "15", _WRITING, "minutes re-read before each window", _LIVE
        ),
    )


def _source_sync(
    prefix: str,
    label: str,
    read_by: tuple[Process, ...] = _SYNCING,
    requests_per_minute: str = "",
    requests_note: str = "none",
) -> tuple[Setting, ...]:
    """The scheduled sync of one registered source (``RAG_<prefix>_SYNC_ENABLED``, ``<prefix>_SYNC_CRON``, ...)."""
    return (
        Setting(
            f"RAG_{prefix}_SYNC_ENABLED",
            "flag",
            "1",
            read_by,
            f"{label}: `0` defines none of its sensors and schedules",
            _SYNC,
        ),
        Setting(
            f"{prefix}_SYNC_CRON",
            "cron",
            "",
            read_by,
            f"{label}: sync cron (UTC)",
            _SYNC,
            default_note="`RAG_RAW_SYNC_CRON`",
        ),
        Setting(
            f"{prefix}_INITIAL_HISTORY_DAYS",
            "whole number",
            "90",
            read_by,
            f"{label}: history a new channel/project/space starts with",
            _SYNC,
        ),
        Setting(
            f"{prefix}_REQUESTS_PER_MINUTE",
            "whole number",
            requests_per_minute,
            read_by,
            f"{label}: the request budget each tick plans within",
            _SYNC,
            default_note=requests_note,
        ),
    )


SETTINGS: tuple[Setting, ...] = (
    # --- data folder and files -----------------------------------------------------------------------------------
    Setting(
        "RAG_DATA_DIR",
        "path",
        "./.rag_data",
        _EVERY,
        "the data folder: parquet files, embedded index, embedding cache, principal directory, reports",
        _FILES,
        fixed=True,
    ),
    Setting(
        "RAG_ENV_FILE",
        "path",
        "",
        _EVERY,
        "the .env file read under the environment (an error if it names no file)",
        _FILES,
        fixed=True,
        default_note="`./.env` when present",
    ),
    Setting(
        "DAGSTER_HOME",
        "path",
        "",
        ("dagster", "metrics", "cli"),
        "the Dagster instance",
        _FILES,
        fixed=True,
        empty_is_unset=False,
        default_note="`<data dir>/dagster_home` for the CLI's in-process runs",
    ),
    Setting(
        "XDG_CACHE_HOME",
        "path",
        "~/.cache",
        _SEARCHING,
        "the user's cache folder (holds RAG_MODEL_CACHE)",
        _FILES,
        fixed=True,
        empty_is_unset=False,
    ),
    Setting(
        "RAG_MODEL_CACHE",
        "path",
        "",
        _SEARCHING,
        "models converted for OpenVINO, converted once and shared by every data folder",
        _FILES,
        fixed=True,
        default_note="`$XDG_CACHE_HOME/rag_pipeline/models`",
    ),
    Setting(
        "RAG_EVAL_DIR",
        "path",
        "",
        _WRITING,
        "the eval sets the Dagster evaluation and the demo run",
        _FILES,
        fixed=True,
        default_note="`eval_sets/` of the checkout",
    ),
    Setting(
        "RAG_IDENTITY_LINKS",
        "path",
        "",
        _SEARCHING,
        "joins of one person's accounts whose emails differ (one person per line)",
        _FILES,
        default_note="`<data dir>/identity_links.txt`",
    ),
    # --- index and models ----------------------------------------------------------------------------------------
    Setting(
        "QDRANT_URL",
        "URL",
        "",
        _EVERY,
        "a Qdrant server or cluster instead of the embedded engine",
        _INDEX,
        default_note="the embedded engine in the data folder",
    ),
    Setting("QDRANT_API_KEY", "text", "", _EVERY, "the Qdrant server's API key (an EnvVar)", _INDEX, secret=True),
    Setting(
        "QDRANT_SHARDS",
        "whole number",
        "",
        _WRITING,
        "shards of new collections on a server",
        _INDEX,
        default_note="the server's",
    ),
    Setting(
        "QDRANT_REPLICAS",
        "whole number",
        "",
        _WRITING,
        "replicas of new collections on a server",
        _INDEX,
        default_note="the server's",
    ),
    Setting(
        "RAG_LANGUAGE",
        "choice: auto|english|cjk|korean",
        "auto",
        _SEARCHING,
        "the language family the index is built for; `auto`: a data folder's first index chooses",
        _INDEX,
    ),
    Setting(
        "RAG_DENSE_MODEL",
        "text",
        "",
        _SEARCHING,
        "bundled model name, a sentence-transformers folder or `openai:<model>[@dimensions]`",
        _INDEX,
        default_note="the language's (`all-MiniLM-L6-v2`)",
    ),
    Setting(
        "RAG_DENSE_BACKEND",
        "choice: auto|openvino|torch",
        "auto",
        _SEARCHING,
        "how local dense models run: OpenVINO on the CPU, torch as reference and fallback",
        _INDEX,
    ),
    Setting(
        "RAG_DENSE_DEVICE",
        "choice: auto|cpu|cuda|mps",
        "auto",
        _SEARCHING,
        "the device torch runs on (`auto`: CUDA, then MPS, then the CPU)",
        _INDEX,
    ),
    Setting(
        "RAG_DENSE_TRUST_REMOTE_CODE",
        "flag",
        "false",
        _SEARCHING,
        "let a local dense model folder that ships its own modeling code (`auto_map`) load: that code runs, on torch",
        _INDEX,
    ),
    Setting(
        "RAG_BM25_TOKENIZER",
        "choice: word|cjk-bigram|ko-morpheme-bigram|multilingual",
        "",
        _SEARCHING,
        "the BM25 tokenizer; the index records it and refuses another",
        _INDEX,
        default_note="the language's (`word`)",
    ),
    Setting(
        "RAG_SPARSE_QUERY",
        "choice: plain|fielded",
        "fielded",
        _SEARCHING,
        "how BM25 reads a query: title line weighed up, code and URLs dropped, or one weight per term",
        _INDEX,
    ),
    Setting(
        "RAG_LEARNED_FUSION",
        "flag",
        "1",
        _SEARCHING,
        "hybrid searches use the learned fusions; `0`: plain RRF k=60",
        _INDEX,
    ),
    Setting("RAG_HNSW_M", "whole number", "16", _WRITING, "HNSW graph degree of new collections", _INDEX),
    Setting(
        "RAG_HNSW_EF_CONSTRUCT", "whole number", "100", _WRITING, "HNSW build candidates of new collections", _INDEX
    ),
    Setting("RAG_HNSW_EF", "whole number", "128", _SEARCHING, "HNSW candidates per dense query", _INDEX),
    Setting("RAG_DENSE_EXACT", "flag", "0", _SEARCHING, "exact dense search instead of HNSW, everywhere", _INDEX),
    Setting(
        "RAG_STORE_WAIT_SECONDS",
        "whole number",
        "120",
        _SEARCHING,
        "how long a search or a write waits for another process holding the embedded index",
        _INDEX,
    ),
    Setting(
        "PARENT_CHUNK_SIZE",
        "whole number",
        "2000",
        _WRITING,
        "parent chunk size (cl100k tokens); the index records the four sizes and refuses others",
        _INDEX,
    ),
    Setting("PARENT_CHUNK_OVERLAP", "whole number", "200", _WRITING, "parent chunk overlap (tokens)", _INDEX),
    Setting("CHILD_CHUNK_SIZE", "whole number", "400", _WRITING, "child chunk size (tokens)", _INDEX),
    Setting("CHILD_CHUNK_OVERLAP", "whole number", "50", _WRITING, "child chunk overlap (tokens)", _INDEX),
    Setting(
        "RAG_MAX_DOCUMENT_CHARS",
        "whole number",
        "500000",
        _WRITING,
        "longer documents are truncated and reported",
        _INDEX,
    ),
    Setting(
        "RAG_BACKFILL_BATCH_DOCUMENTS",
        "whole number",
        "2000",
        _WRITING,
        "documents per run of a first index (index, demo): bounds its memory",
        _INDEX,
    ),
    # --- search and answers --------------------------------------------------------------------------------------
    Setting(
        "RAG_RERANKER",
        "choice: learned|llm|none",
        "learned",
        _READERS,
        "what the `reranked` mode uses: the learned reranker, RAG_LLM_RERANK_MODEL, or none",
        _SEARCH,
    ),
    Setting(
        "RAG_LLM_RERANK_MODEL",
        "text",
        "",
        _SEARCHING,
        "chat model of the `llm_reranked` evaluation arm and of RAG_RERANKER=llm",
        _SEARCH,
    ),
    Setting(
        "RAG_MIN_SCORE",
        "number",
        "0",
        _READERS,
        "default `min_score`: drop results whose calibrated relevance is below it",
        _SEARCH,
    ),
    Setting(
        "RAG_ANSWER_MODEL",
        "text",
        "",
        ("dagster", "serve", "cli"),
        "chat model that writes answers with cited sources (`ask`, chat, `answer_quality`)",
        _SEARCH,
    ),
    Setting(
        "RAG_ANSWER_DOCUMENTS",
        "whole number",
        "5",
        ("dagster", "serve", "cli"),
        "documents in an answer's context",
        _SEARCH,
    ),
    Setting(
        "RAG_ANSWER_CONTEXT_CHARS",
        "whole number",
        "1500",
        ("dagster", "serve", "cli"),
        "characters of each document in an answer's context",
        _SEARCH,
    ),
    Setting(
        "RAG_ANSWER_TEMPERATURE", "number", "0", ("serve", "cli"), "the answer model's sampling temperature", _SEARCH
    ),
    Setting(
        "RAG_ANSWER_MAX_TOKENS", "whole number", "800", ("serve", "cli"), "the answer model's reply budget", _SEARCH
    ),
    Setting(
        "RAG_ANSWER_LANGUAGE",
        "choice: auto|en|ko|ja",
        "auto",
        ("serve", "cli"),
        "the language of the sentences the project writes in an answer",
        _SEARCH,
    ),
    Setting("RAG_AGENT", "flag", "0", ("serve", "cli"), "answers by a model that searches for itself", _SEARCH),
    Setting(
        "RAG_AGENT_MAX_ITERATIONS",
        "whole number",
        "4",
        ("serve", "cli"),
        "the agent's rounds at most (a request may ask for fewer: max_iterations, ask --max-iterations)",
        _SEARCH,
    ),
    Setting(
        "RAG_AGENT_TOOL_SEARCH",
        "flag",
        "0",
        ("serve", "cli"),
        "the agent starts with search_documents and finds its other tools by tool search",
        _SEARCH,
    ),
    Setting(
        "RAG_REWRITE_MODEL",
        "text",
        "",
        ("dagster", "serve", "cli"),
        "chat model that plans searches (queries, expansions, filters) before they run",
        _SEARCH,
    ),
    Setting(
        "OPENAI_API_KEY",
        "text",
        "",
        _SEARCHING,
        "OpenAI key for embeddings, reranking, answers, rewriting (read by the openai client)",
        _SEARCH,
        secret=True,
    ),
    Setting(
        "OPENAI_BASE_URL",
        "URL",
        "https://api.openai.com/v1",
        _SEARCHING,
        "an OpenAI-compatible server (read by the openai client, which takes an empty value as the URL)",
        _SEARCH,
        empty_is_unset=False,
    ),
    # --- evaluation ----------------------------------------------------------------------------------------------
    Setting(
        "RAG_JUDGE_MODEL",
        "text",
        "",
        _WRITING,
        "chat model ragas judges answers with, in the `answer_quality` asset",
        _EVALUATION,
    ),
    Setting(
        "RAG_EVAL_EXACT_DENSE", "flag", "0", _WRITING, "exact dense search for the Dagster evaluation only", _EVALUATION
    ),
    Setting(
        "RAG_EVAL_WORKERS",
        "whole number",
        "0",
        _WRITING,
        "processes the evaluation's search arms run in (`0`: one per core, at most 4)",
        _EVALUATION,
    ),
    Setting(
        "RAG_EVAL_CRON", "cron", "0 6 * * *", ("dagster",), "when the daemon evaluates every arm (UTC)", _EVALUATION
    ),
    Setting(
        "RAG_MINED_MAX_QUERIES",
        "whole number",
        "1000",
        _WRITING,
        "mined queries kept per source and miner",
        _EVALUATION,
    ),
    Setting(
        "RAG_MINED_MIN_NEW_QUERIES",
        "whole number",
        "20",
        _WRITING,
        "new mined queries that start an evaluation of every arm",
        _EVALUATION,
    ),
    Setting(
        "RAG_MINED_RUN_AS", "choice: authors|everyone", "authors", _WRITING, "who mined queries search as", _EVALUATION
    ),
    # --- execution -----------------------------------------------------------------------------------------------
    Setting(
        "RAG_EXECUTOR",
        "choice: auto|in_process|multiprocess|celery|k8s",
        "auto",
        _WRITING,
        "where a run's steps execute",
        _EXECUTION,
    ),
    Setting(
        "RAG_CELERY_BROKER_URL",
        "URL",
        "",
        _WRITING,
        "`celery`: the broker the workers listen on (may carry a password)",
        _EXECUTION,
        secret=True,
    ),
    Setting(
        "RAG_CELERY_BACKEND_URL",
        "URL",
        "",
        _WRITING,
        "`celery`: where results go (may carry a password)",
        _EXECUTION,
        secret=True,
        default_note="the broker",
    ),
    Setting(
        "RAG_CELERY_VISIBILITY_TIMEOUT",
        "whole number",
        "7200",
        _WRITING,
        "`celery`: seconds before a lost worker's step goes to another worker",
        _EXECUTION,
    ),
    # --- offline sources -----------------------------------------------------------------------------------------
    Setting(
        "RAG_SLACK_EXPORT",
        "path",
        "",
        _WRITING,
        "the Slack export (folder or zip) read offline",
        _OFFLINE,
        default_note="the bundled Ubuntu export",
    ),
    Setting(
        "SLACK_TEAM_ID",
        "text",
        "",
        _WRITING,
        "the export's Slack team id where it names none",
        _OFFLINE,
        default_note="from the export",
    ),
    Setting(
        "SLACK_WORKSPACE_DOMAIN",
        "text",
        "",
        _WRITING,
        "the export's workspace host where it names none",
        _OFFLINE,
        default_note="from the export",
    ),
    Setting(
        "RAG_JIRA_DUMP",
        "path",
        "",
        _WRITING,
        "the Jira dump (REST issue objects, JSON lines) read offline",
        _OFFLINE,
        default_note="the bundled Appcelerator dump",
    ),
    Setting("RAG_JIRA_CSV", "paths", "", _WRITING, "Jira CSV export file(s); they replace the dump", _OFFLINE),
    Setting(
        "RAG_JIRA_CSV_DATE_FORMAT",
        "text",
        "%d/%b/%y %I:%M %p|%d/%b/%y %H:%M",
        _WRITING,
        "strptime formats of the CSV's dates, tried in turn",
        _OFFLINE,
    ),
    Setting(
        "RAG_JIRA_CSV_DELIMITER", "text", ",", _WRITING, "the CSV's field separator (one character, or \\t)", _OFFLINE
    ),
    Setting(
        "RAG_JIRA_DIRECTORY",
        "path",
        "",
        _WRITING,
        "CSV of Jira accounts and groups for the principal directory",
        _OFFLINE,
    ),
    Setting(
        "RAG_CONFLUENCE_DUMP",
        "path",
        "",
        _WRITING,
        "the Confluence dump (REST content objects, JSON lines)",
        _OFFLINE,
        default_note="none: Confluence is not read",
    ),
    Setting(
        "RAG_CONFLUENCE_DIRECTORY",
        "path",
        "",
        _WRITING,
        "CSV of Confluence accounts and groups for the principal directory",
        _OFFLINE,
    ),
    # --- live sources --------------------------------------------------------------------------------------------
    Setting(
        "SLACK_BOT_TOKEN",
        "text",
        "",
        _WRITING,
        "Slack bot token (`xoxb-`); set, the Web API replaces the export",
        _LIVE,
        secret=True,
    ),
    Setting(
        "SLACK_API_BASE_URL",
        "URL",
        "",
        _WRITING,
        "Slack Web API base URL (a proxy, the test emulator)",
        _LIVE,
        default_note="`https://slack.com/api/`",
    ),
    Setting(
        "SLACK_PAGE_SIZE", "whole number", "200", _WRITING, "`limit` per page (15 for non-Marketplace apps)", _LIVE
    ),
    Setting("SLACK_LOOKBACK_DAYS", "whole number", "30", _WRITING, "days of roots re-listed for late replies", _LIVE),
    *_atlassian_api("JIRA", "Jira", page_size="100"),
    *_atlassian_api("CONFLUENCE", "Confluence", page_size="50"),
    Setting("CONFLUENCE_SPACE_ALLOW", "list", "", _WRITING, "space keys or regular expressions to keep", _LIVE),
    Setting(
        "CONFLUENCE_SPACE_DENY", "list", "", _WRITING, "space keys or regular expressions to skip (deny wins)", _LIVE
    ),
    Setting(
        "RAG_API_TIMEOUT_SECONDS", "whole number", "30", _WRITING, "connect/read timeout of every API request", _LIVE
    ),
    Setting("RAG_API_PAGE_CAP", "whole number", "10000", _WRITING, "pages per paged API call", _LIVE),
    Setting(
        "RAG_API_REQUEST_BUDGET",
        "whole number",
        "5000",
        _WRITING,
        "requests a container's read may make per day it covers",
        _LIVE,
    ),
    Setting(
        "RAG_API_SECONDS_BUDGET",
        "whole number",
        "3600",
        _WRITING,
        "seconds a container's read may take per day it covers",
        _LIVE,
    ),
    # --- scheduled sync ------------------------------------------------------------------------------------------
    Setting(
        "RAG_PARTITION_START",
        "date",
        "2004-01-01",
        _SYNCING,
        "the first day a document is admitted; set: every source's partitions start there (else its first data week)",
        _SYNC,
    ),
    Setting("RAG_RAW_SYNC_CRON", "cron", "0 * * * *", _SYNCING, "the live sources' default sync cron (UTC)", _SYNC),
    Setting(
        "RAG_SYNC_SETTLE_HOURS",
        "whole number",
        "2",
        _SYNCING,
        "how long after midnight the previous day is read again",
        _SYNC,
    ),
    Setting("RAG_SYNC_MAX_RANGE_DAYS", "whole number", "30", _SYNCING, "the longest range one sync run reads", _SYNC),
    Setting(
        "RAG_INGESTION_PAUSED",
        "flag",
        "0",
        _SYNCING,
        "`1`: every sync sensor and reconciliation schedule skips its ticks",
        _SYNC,
    ),
    *_source_sync("SLACK", "Slack", requests_per_minute="50", requests_note="`1` when SLACK_PAGE_SIZE is 15 or less"),
    *_source_sync("JIRA", "Jira"),
    *_source_sync("CONFLUENCE", "Confluence"),
    # Read because the sync variables are read for every registered source; the tools source has no live API, so
    # it is never synced and these change nothing (no deployment passes them).
    *_source_sync("TOOLS", "tools (no effect: never synced)", read_by=_NOBODY),
    # --- notifications, retention and audit ----------------------------------------------------------------------
    Setting(
        "RAG_NOTIFY_SLACK_CHANNEL",
        "text",
        "",
        ("dagster",),
        "Slack channel notified of failed runs and checks",
        _UPKEEP,
    ),
    Setting(
        "RAG_NOTIFY_SLACK_TOKEN",
        "text",
        "",
        ("dagster",),
        "the notifications' bot token",
        _UPKEEP,
        secret=True,
        default_note="`SLACK_BOT_TOKEN`",
    ),
    Setting(
        "DAGSTER_WEBSERVER_URL",
        "URL",
        "http://127.0.0.1:3000",
        ("dagster",),
        "base of the run links in notifications",
        _UPKEEP,
    ),
    Setting(
        "RAG_RETENTION_RUN_DAYS",
        "whole number",
        "30",
        _WRITING,
        "finished runs (and event logs) older than this are deleted (`0`: kept)",
        _UPKEEP,
    ),
    Setting(
        "RAG_RETENTION_REPORT_DAYS",
        "whole number",
        "90",
        _WRITING,
        "evaluation runs and reports older than this are deleted (`0`: kept)",
        _UPKEEP,
    ),
    Setting("RAG_RETENTION_CRON", "cron", "30 3 * * *", ("dagster",), "the daily retention schedule (UTC)", _UPKEEP),
    Setting("RAG_RETENTION_ENABLED", "flag", "1", ("dagster",), "`0` defines no retention schedule", _UPKEEP),
    Setting(
        "RAG_AUDIT_MASS_CHANGE_ACCOUNTS",
        "whole number",
        "25",
        ("dagster",),
        "the access audit fails when more accounts than this gained or lost access",
        _UPKEEP,
    ),
    # --- search service ------------------------------------------------------------------------------------------
    Setting(
        "RAG_SERVE_TOKEN",
        "text",
        "",
        _READERS,
        "the service's bearer token (required beyond loopback); `search --server` and `mcp` send it",
        _SERVICE,
        secret=True,
    ),
    Setting(
        "RAG_SERVE_AUTH",
        "choice: token|oidc",
        "token",
        ("serve",),
        "`token` (RAG_SERVE_TOKEN and identity headers) or `oidc` (a verified JWT names the caller)",
        _SERVICE,
    ),
    Setting(
        "RAG_SERVE_TRUSTED_PROXY",
        "flag",
        "0",
        ("serve",),
        "believe X-User-Groups (only behind a proxy that authenticates users)",
        _SERVICE,
    ),
    Setting(
        "RAG_SERVE_ALLOWED_HOSTS",
        "list",
        "",
        ("serve",),
        "the Host names answered",
        _SERVICE,
        default_note="loopback names on loopback, any otherwise",
    ),
    Setting(
        "RAG_SERVE_MAX_IN_FLIGHT",
        "whole number",
        "64",
        ("serve",),
        "requests served at once; one more gets 429",
        _SERVICE,
    ),
    Setting(
        "RAG_SERVE_RATE_PER_MINUTE",
        "whole number",
        "0",
        ("serve",),
        "requests per caller in a minute (`0`: off)",
        _SERVICE,
    ),
    Setting(
        "RAG_SERVE_ADMINS",
        "list",
        "",
        ("serve",),
        "emails or account ids who may ask whois/explain about others",
        _SERVICE,
    ),
    Setting(
        "RAG_SERVE_AUDIT_DAYS",
        "whole number",
        "0",
        ("serve", "mcp"),
        "days the per-request log of documents given is kept (`0`: off)",
        _SERVICE,
    ),
    Setting(
        "RAG_FEEDBACK_DAYS",
        "whole number",
        "0",
        ("serve", "mcp"),
        "days readers' relevance judgements are kept (`0`: the routes refuse)",
        _SERVICE,
    ),
    Setting(
        "RAG_SERVE_CACHE_ENTRIES",
        "whole number",
        "1000",
        ("serve", "mcp"),
        "recent searches and documents cached (`0`: no cache)",
        _SERVICE,
    ),
    Setting(
        "RAG_SERVE_CACHE_SECONDS", "whole number", "300", ("serve", "mcp"), "how long a cached result is kept", _SERVICE
    ),
    Setting(
        "RAG_CACHE_REDIS_URL",
        "URL",
        "",
        ("serve", "mcp"),
        "Redis for the result and document caches, shared by every replica (may carry a password)",
        _SERVICE,
        secret=True,
        default_note="each process its own cache",
    ),
    Setting(
        "RAG_INGEST_TOKEN",
        "text",
        "",
        ("serve",),
        "turns on the ingestion API for this bearer token; its syncs run in the service's container",
        _SERVICE,
        secret=True,
    ),
    Setting(
        "RAG_SLACK_SIGNING_SECRET",
        "text",
        "",
        ("serve",),
        "the Slack app's signing secret: turns on `POST /events/slack` (Events API, targeted syncs)",
        _SERVICE,
        secret=True,
    ),
    Setting(
        "RAG_JIRA_WEBHOOK_SECRET",
        "text",
        "",
        ("serve",),
        "turns on `POST /events/jira`: the webhook's secret (X-Hub-Signature) or its token",
        _SERVICE,
        secret=True,
    ),
    Setting(
        "RAG_CONFLUENCE_WEBHOOK_SECRET",
        "text",
        "",
        ("serve",),
        "turns on `POST /events/confluence`: the token its webhook URL or header carries",
        _SERVICE,
        secret=True,
    ),
    Setting(
        "RAG_EVENTS_DEBOUNCE_SECONDS",
        "number",
        "2",
        ("serve",),
        "quiet seconds before a container's events become one targeted sync",
        _SERVICE,
    ),
    Setting(
        "RAG_PUSH_SOURCES",
        "list",
        "",
        ("serve", "cli"),
        "systems without a connector that may push documents (`POST /v1/ingest/documents`, `rag-pipeline push`)",
        _SERVICE,
    ),
    Setting(
        "RAG_PUSH_MAX_BODY_BYTES",
        "whole number",
        "8388608",
        ("serve",),
        "largest `POST /v1/ingest/documents` body (a larger one is a 413)",
        _SERVICE,
    ),
    Setting(
        "RAG_PUSH_MAX_DOCUMENTS",
        "whole number",
        "500",
        ("serve",),
        "documents and deletions one `POST /v1/ingest/documents` may carry (more is a 413)",
        _SERVICE,
    ),
    Setting("RAG_OIDC_ISSUER", "URL", "", ("serve",), "`oidc`: the issuer (`iss`), required", _SERVICE),
    Setting("RAG_OIDC_AUDIENCE", "text", "", ("serve",), "`oidc`: this service's audience (`aud`), required", _SERVICE),
    Setting(
        "RAG_OIDC_JWKS_URL",
        "URL",
        "",
        ("serve",),
        "`oidc`: where the signing keys are",
        _SERVICE,
        default_note="the issuer's discovery `jwks_uri`",
    ),
    Setting("RAG_OIDC_EMAIL_CLAIM", "text", "email", ("serve",), "`oidc`: the claim naming the person", _SERVICE),
    Setting(
        "RAG_OIDC_ALGORITHMS", "list", "RS256,ES256", ("serve",), "`oidc`: accepted signature algorithms", _SERVICE
    ),
    Setting(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "URL",
        "",
        ("serve",),
        "where spans go (OTLP over HTTP)",
        _SERVICE,
        default_note="OTEL_EXPORTER_OTLP_ENDPOINT + `/v1/traces`; neither: no spans",
    ),
    Setting("OTEL_EXPORTER_OTLP_ENDPOINT", "URL", "", ("serve",), "the OTLP collector's base URL", _SERVICE),
    Setting("OTEL_SERVICE_NAME", "text", "rag-pipeline", ("serve",), "the service name on spans", _SERVICE),
    Setting("RAG_MCP_USER", "text", "", ("mcp",), "the reader when `--user` is not given", _SERVICE),
    Setting("RAG_MCP_EMAIL", "text", "", ("mcp",), "the reader's email when `--email` is not given", _SERVICE),
    # --- tool search ---------------------------------------------------------------------------------------------
    Setting(
        "RAG_TOOLS_CATALOG", "path", "", _WRITING, "JSON file of tool definitions indexed as the `tools` source", _TOOLS
    ),
    Setting(
        "RAG_TOOLS_MCP_SERVERS",
        "list",
        "",
        _WRITING,
        "MCP servers (Streamable HTTP URLs) whose tools are indexed",
        _TOOLS,
    ),
    Setting(
        "RAG_TOOLS_SERVER_TIMEOUT", "number", "20", _WRITING, "seconds an MCP server may take to list its tools", _TOOLS
    ),
    Setting("RAG_TOOLS_CRITICAL", "list", "", _SEARCHING, "tools every tool search returns", _TOOLS),
    Setting(
        "RAG_TOOL_SEARCH_WEIGHTS",
        "list",
        "0.5,0.3,0.2",
        _SEARCHING,
        "tool search's score weights: semantic, usage, success",
        _TOOLS,
    ),
    Setting(
        "RAG_TOOL_SEARCH_TOP_K", "whole number", "5", _SEARCHING, "tools a tool search returns besides critical", _TOOLS
    ),
    Setting(
        "RAG_TOOL_SEARCH_CACHE_ENTRIES",
        "whole number",
        "512",
        ("serve", "mcp", "cli"),
        "queries whose tool candidates are cached (`0`: off)",
        _TOOLS,
    ),
    Setting(
        "RAG_TOOL_SEARCH_CACHE_SECONDS",
        "number",
        "300",
        ("serve", "mcp", "cli"),
        "how long a query's tool candidates are cached",
        _TOOLS,
    ),
    Setting(
        "RAG_TOOL_ACTIVE_MAX_TOOLS",
        "whole number",
        "20",
        ("serve", "mcp", "cli"),
        "tools one caller's active set may hold (activating more is refused)",
        _TOOLS,
    ),
    Setting(
        "RAG_TOOL_ACTIVE_MAX_SETS",
        "whole number",
        "1000",
        ("serve", "mcp", "cli"),
        "active tool sets kept (callers and sessions; the least recently used is dropped)",
        _TOOLS,
    ),
    Setting(
        "RAG_TOOL_ACTIVE_TTL_SECONDS",
        "number",
        "3600",
        ("serve", "mcp", "cli"),
        "seconds an untouched active tool set is kept (then it starts again from the critical set)",
        _TOOLS,
    ),
    Setting(
        "RAG_TOOL_EVAL_DIR",
        "path",
        "",
        _WRITING,
        "the tool-retrieval eval set",
        _TOOLS,
        fixed=True,
        default_note="`eval_sets/tools_metatool` of the checkout",
    ),
)


def by_name() -> dict[str, Setting]:
    """Every setting by its variable's name."""
    return {s.name: s for s in SETTINGS}


def read_by(processes: Iterable[Process]) -> tuple[Setting, ...]:
    """The settings any of ``processes`` reads, in catalogue order."""
    wanted = set(processes)
    return tuple(s for s in SETTINGS if wanted.intersection(s.read_by))
