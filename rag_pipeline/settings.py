"""One configuration for the whole project, read once from the environment and passed down.

``Settings.from_env()`` is the only place that reads configuration variables: the Dagster code
location, every CLI command and the bench scripts build one ``Settings`` and hand it (or the parts
they need) to what they construct. Nothing reads the environment at import time.

Secrets are never copied into ``Settings``: it records only *whether* a token is set, and the
Dagster resources receive ``EnvVar``s, so a token never lands in a run's config, logs or metadata.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SecretStr

from rag_pipeline.index.store import DenseSearch
from rag_pipeline.vectors.dense.base import DenseEncoder
from rag_pipeline.vectors.dense.load import DEFAULT_DENSE_MODEL, load_dense_encoder
from rag_pipeline.vectors.sparse import BM25_TOKENIZERS, Bm25Tokenizer

PACKAGE_DIR = Path(__file__).resolve().parent
BUNDLED_DATA_DIR = PACKAGE_DIR / "data"
BUNDLED_SLACK_EXPORT = BUNDLED_DATA_DIR / "slack_ubuntu" / "export"
BUNDLED_JIRA_DUMP = BUNDLED_DATA_DIR / "jira_appcelerator" / "issues.jsonl.gz"
BUNDLED_SLACK_TEAM = "T0UBUNTU"
BUNDLED_SLACK_DOMAIN = "ubuntu.slack.com"
BUNDLED_JIRA_SITE = "jira.appcelerator.org"
# Date formats of Jira CSV exports, tried in turn ("|"-separated): the instance's display format, by default
# Jira's "dd/MMM/yy h:mm a" ("30/Sep/21 5:20 PM") or its 24-hour variant ("30/Sep/21 17:20").
DEFAULT_JIRA_CSV_DATE_FORMAT = "%d/%b/%y %I:%M %p|%d/%b/%y %H:%M"
# Earliest partition day: the bundled Slack export starts in November 2004.
DEFAULT_PARTITION_START = "2004-01-01"
DEFAULT_RAW_SYNC_CRON = "0 * * * *"
DEFAULT_EVAL_CRON = "0 6 * * *"
# Scheduled sync: history a new channel/project starts with, how long after midnight the previous day is
# read again, and the longest range one run reads (a longer backlog is read range after range).
DEFAULT_INITIAL_HISTORY_DAYS = 90
DEFAULT_SYNC_SETTLE_HOURS = 2
DEFAULT_SYNC_MAX_RANGE_DAYS = 30
# Slack's Tier 3 (conversations.history/replies) allows ~50 requests/minute; apps outside the Marketplace
# created since May 2025 get 1 request/minute with at most 15 items per page.
SLACK_TIER3_REQUESTS_PER_MINUTE = 50
SLACK_NON_MARKETPLACE_REQUESTS_PER_MINUTE = 1
SLACK_NON_MARKETPLACE_PAGE_SIZE = 15
# A document longer than this is truncated (and reported): one 5 MB message would otherwise become
# ~12,000 chunks. Long Jira issues with all their comments stay far below it.
DEFAULT_MAX_DOCUMENT_CHARS = 500_000
# How long a search or a write waits for another process holding the embedded index before giving up.
DEFAULT_STORE_WAIT_SECONDS = 120


class SettingsError(ValueError):
    """A configuration variable holds a value the project cannot use; the message names the variable."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DataPaths(_Frozen):
    """Every file and folder the project keeps under one data folder (``RAG_DATA_DIR``)."""

    root: Path

    @property
    def parquet(self) -> Path:
        """Per-partition parquet files of the intermediate assets."""
        return self.root / "parquet"

    @property
    def qdrant(self) -> Path:
        """The embedded Qdrant engine's folder (unused with a Qdrant server)."""
        return self.root / "qdrant"

    @property
    def embedding_cache(self) -> Path:
        return self.root / "embedding_cache.sqlite"

    @property
    def source_identities(self) -> Path:
        """The workspace/site each offline source was indexed as (one per source per data folder)."""
        return self.root / "source_identities.json"

    @property
    def reports(self) -> Path:
        """Evaluation runs, reports, plots and the learned reranker."""
        return self.root / "reports"

    @property
    def reranker(self) -> Path:
        return self.reports / "reranker"

    @property
    def eval_runs(self) -> Path:
        return self.reports / "runs"

    @property
    def rewrite_plans(self) -> Path:
        """Query rewrite plans by (model, day, question), shared by the service and the evaluation."""
        return self.reports / "rewrite_plans.sqlite"

    @property
    def llm_grades(self) -> Path:
        """The LLM reranker's grade cache, shared by the Dagster arm and ``rag-pipeline bench``."""
        return self.reports / "llm_grades.sqlite"

    @property
    def dagster_home(self) -> Path:
        """The in-process runners' Dagster instance when ``DAGSTER_HOME`` is not set."""
        return self.root / "dagster_home"

    @property
    def directory(self) -> Path:
        """The principal directory (SQLite): accounts, groups and channel members per source."""
        return self.root / "directory.sqlite"

    @property
    def identity_links(self) -> Path:
        """The default links file joining accounts of one person whose emails differ (``RAG_IDENTITY_LINKS``)."""
        return self.root / "identity_links.txt"


class QdrantSettings(_Frozen):
    """Which engine holds the index: embedded qdrant-edge, or a Qdrant server/cluster at ``url``."""

    url: str | None = None
    api_key_set: bool = False
    shards: int | None = None
    replicas: int | None = None
    collection_prefix: str = "rag"
    # Dense search: HNSW with these parameters, or exact (RAG_DENSE_EXACT) for every search.
    hnsw_m: int = DenseSearch.m
    hnsw_ef_construct: int = DenseSearch.ef_construct
    hnsw_ef: int = DenseSearch.hnsw_ef
    exact_dense: bool = False

    @property
    def dense_search(self) -> DenseSearch:
        return DenseSearch(
            exact=self.exact_dense, hnsw_ef=self.hnsw_ef, m=self.hnsw_m, ef_construct=self.hnsw_ef_construct
        )

    @property
    def engine(self) -> str:
        return "qdrant-client:server" if self.url else "qdrant-edge"


class SlackApiSettings(_Frozen):
    """The live Slack connector (present when ``SLACK_BOT_TOKEN`` is set)."""

    base_url: str | None = None
    page_size: int = 200
    lookback_days: int = 30


class JiraApiSettings(_Frozen):
    """The live Jira connector (present when ``JIRA_URL`` is set)."""

    url: str
    cloud: bool = True
    username: str | None = None
    api_token_set: bool = False
    pat_set: bool = False
    site: str | None = None
    page_size: int = 100
    overlap_minutes: int = 15


class ApiLimits(_Frozen):
    """Bounds on every live API read, so a faulty server cannot make a run request or wait forever."""

    timeout_seconds: int = 30  # connect and read timeout of each HTTP request
    page_cap: int = 10_000  # pages per paged call
    requests_per_partition: int = 5_000  # a container's read may make this many requests per day it covers
    seconds_per_partition: int = 3_600  # ... and take this long per day it covers


class NotificationSettings(_Frozen):
    """Slack notifications of failed runs and checks (present when a channel and a token are set)."""

    channel: str
    token_env: str  # the variable that holds the token: RAG_NOTIFY_SLACK_TOKEN or SLACK_BOT_TOKEN
    base_url: str | None = None
    webserver_url: str = "http://127.0.0.1:3000"


class SourceSyncSettings(_Frozen):
    """The scheduled sync of one live source."""

    enabled: bool = True  # RAG_<SOURCE>_SYNC_ENABLED: off defines none of its sensors and schedules
    cron: str = DEFAULT_RAW_SYNC_CRON  # <SOURCE>_SYNC_CRON, else RAG_RAW_SYNC_CRON
    initial_history_days: int = DEFAULT_INITIAL_HISTORY_DAYS  # <SOURCE>_INITIAL_HISTORY_DAYS
    requests_per_minute: int | None = None  # the API's budget (SLACK_REQUESTS_PER_MINUTE); None: no budget


class ServeSettings(_Frozen):
    """The search service (``rag-pipeline serve`` and ``rag-pipeline mcp``)."""

    # RAG_SERVE_TOKEN: required as ``Authorization: Bearer`` on every route but /health when set. Unlike the
    # pipeline's secrets (resolved by Dagster's EnvVar where they are used), the service must compare it, so
    # it is held here as a SecretStr: its repr, str and JSON dump show asterisks, never the value.
    token: SecretStr | None = None
    # RAG_SERVE_TRUSTED_PROXY: the service sits behind a proxy that authenticates users and sets their
    # groups, so X-User-Groups is believed. Off, a request carrying that header is refused (never widened).
    trusted_proxy: bool = False
    # RAG_SERVE_ALLOWED_HOSTS: the Host names the service answers (comma-separated; default: loopback names when
    # it listens on loopback, any name otherwise). A proxy in front adds its public name here.
    allowed_hosts: tuple[str, ...] = ()
    # Who ``rag-pipeline mcp`` (stdio) searches as when --user/--email are not given (RAG_MCP_USER, RAG_MCP_EMAIL).
    mcp_user: str | None = None
    mcp_email: str | None = None


class AutomationSettings(_Frozen):
    """When the daemon runs things by itself."""

    raw_sync_cron: str = DEFAULT_RAW_SYNC_CRON
    eval_cron: str = DEFAULT_EVAL_CRON
    settle_hours: int = DEFAULT_SYNC_SETTLE_HOURS
    max_range_days: int = DEFAULT_SYNC_MAX_RANGE_DAYS
    slack: SourceSyncSettings = SourceSyncSettings(requests_per_minute=SLACK_TIER3_REQUESTS_PER_MINUTE)
    jira: SourceSyncSettings = SourceSyncSettings()

    def sync(self, source: str) -> SourceSyncSettings:
        """The scheduled sync settings of ``source`` ("slack" or "jira")."""
        found: SourceSyncSettings = getattr(self, source)
        return found


class Settings(_Frozen):
    """Everything configurable, with the defaults of the offline demo."""

    data_dir: Path
    eval_dir: Path
    dagster_home: Path | None = None
    partition_start: str = DEFAULT_PARTITION_START
    dense_model: str = DEFAULT_DENSE_MODEL
    # How local dense models run: OpenVINO on the CPU (same vectors, less CPU) with torch as the reference and
    # fallback; on a CUDA/MPS device, torch there.
    dense_backend: Literal["auto", "openvino", "torch"] = "auto"
    dense_device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    # Models converted for a faster runtime (OpenVINO IR), made once from the bundled weights and shared by
    # every data folder of the user (RAG_MODEL_CACHE; default: the user's cache folder).
    model_cache: Path | None = None
    # BM25 tokenizer: "word" (Qdrant's default, for space-separated languages), "cjk-bigram" (character bigrams
    # for Japanese, Chinese and Korean, words elsewhere) or "multilingual" (Qdrant's dictionary segmentation);
    # the index records it and refuses another.
    bm25_tokenizer: Bm25Tokenizer = "word"
    # How BM25 reads a query (RAG_SPARSE_QUERY): "fielded" weighs the title line up and drops code, stack
    # frames and URLs from the body; "plain" is Qdrant's one weight per term. Search and evaluation alike.
    sparse_query: Literal["plain", "fielded"] = "fielded"
    # Hybrid searches use the learned fusions: per-source RRF and, for multi-line queries, the title line's
    # dense prefetch (RAG_LEARNED_FUSION; off: plain RRF k=60).
    learned_fusion: bool = True
    llm_rerank_model: str | None = None
    # Answers with cited sources (RAG_ANSWER_MODEL: an OpenAI chat model, or any OpenAI-compatible server's via
    # OPENAI_BASE_URL); unset, `ask` and the chat endpoint say how to turn them on.
    answer_model: str | None = None
    # The judge ragas scores answers' faithfulness with (RAG_JUDGE_MODEL), in the answer_quality asset.
    judge_model: str | None = None
    # Query rewriting before the search (RAG_REWRITE_MODEL): a JSON plan of queries, expansions and filters.
    rewrite_model: str | None = None
    answer_documents: int = 5
    answer_context_chars: int = 1500
    # The evaluation's dense and hybrid arms on exact dense search rather than the index's HNSW.
    eval_exact_dense: bool = False
    slack_export: Path = BUNDLED_SLACK_EXPORT
    jira_dump: Path = BUNDLED_JIRA_DUMP
    # Jira's own CSV export (one or more files); when given, the offline Jira source reads them, not the dump.
    jira_csv: tuple[Path, ...] = ()
    jira_csv_date_format: str = DEFAULT_JIRA_CSV_DATE_FORMAT
    jira_csv_delimiter: str = ","
    # A CSV of Jira accounts and their groups for offline sites whose dump holds no membership
    # (RAG_JIRA_DIRECTORY, --jira-directory): account_id,email,groups.
    jira_directory: Path | None = None
    # Joins of one person's accounts whose emails differ (RAG_IDENTITY_LINKS; default <data>/identity_links.txt).
    identity_links: Path | None = None
    # Whose data the offline sources are, where the data does not say (SLACK_TEAM_ID, SLACK_WORKSPACE_DOMAIN,
    # JIRA_SITE; --slack-team, --slack-domain, --jira-site). The offline_* properties add the bundled data's.
    slack_team: str | None = None
    slack_domain: str | None = None
    jira_site: str | None = None
    max_document_chars: int = DEFAULT_MAX_DOCUMENT_CHARS
    store_wait_seconds: int = DEFAULT_STORE_WAIT_SECONDS
    qdrant: QdrantSettings = QdrantSettings()
    slack_api: SlackApiSettings | None = None
    jira_api: JiraApiSettings | None = None
    api_limits: ApiLimits = ApiLimits()
    notifications: NotificationSettings | None = None
    automation: AutomationSettings = AutomationSettings()
    serve: ServeSettings = ServeSettings()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read every configuration variable once (``env`` defaults to ``os.environ``)."""
        return _from_env(os.environ if env is None else env)

    def load_dense_encoder(self) -> DenseEncoder:
        """The configured dense model on the configured backend and device (cached per process)."""
        return load_dense_encoder(self.dense_model, self.dense_backend, self.dense_device, self.model_cache)

    @property
    def paths(self) -> DataPaths:
        return DataPaths(root=self.data_dir)

    # The bundled data names no workspace or site: its identity is the default for it alone; a team's own export
    # gets its identity from its data or the settings, or its read fails naming the flag.
    @property
    def offline_slack_team(self) -> str | None:
        return self.slack_team or (BUNDLED_SLACK_TEAM if self.slack_export == BUNDLED_SLACK_EXPORT else None)

    @property
    def offline_slack_domain(self) -> str | None:
        return self.slack_domain or (BUNDLED_SLACK_DOMAIN if self.slack_export == BUNDLED_SLACK_EXPORT else None)

    @property
    def offline_jira_site(self) -> str | None:
        bundled = self.jira_dump == BUNDLED_JIRA_DUMP and not self.jira_csv
        return self.jira_site or (BUNDLED_JIRA_SITE if bundled else None)

    @property
    def identity_links_file(self) -> Path:
        """Where the identity links are read from."""
        return self.identity_links or self.paths.identity_links

    def with_offline_sources(self, **given: Any) -> Settings:
        """The same settings with the offline sources and identities given on the command line (None: keep)."""
        update = {k: v for k, v in given.items() if v not in (None, ())}
        unknown = set(update) - set(type(self).model_fields)
        if unknown:
            raise TypeError(f"not settings: {', '.join(sorted(unknown))}")
        return self.model_copy(update=update)

    def with_data_dir(self, data_dir: str | Path | None) -> Settings:
        """The same settings on another data folder (``--data-dir``); ``None`` keeps this one."""
        if data_dir is None:
            return self
        return self.model_copy(update={"data_dir": Path(data_dir).resolve()})

    def offline(self) -> Settings:
        """The same settings reading only the offline sources (the demo never calls a live API)."""
        return self.model_copy(update={"slack_api": None, "jira_api": None})

    @property
    def live_sources(self) -> tuple[str, ...]:
        """Sources fed by their live API in this configuration."""
        return tuple(n for n, s in (("slack", self.slack_api), ("jira", self.jira_api)) if s is not None)

    @property
    def synced_sources(self) -> tuple[str, ...]:
        """Live sources whose scheduled sync is switched on (the daemon syncs them by itself)."""
        return tuple(n for n in self.live_sources if self.automation.sync(n).enabled)


def _user_cache(env: Mapping[str, str]) -> Path:
    """The user's cache folder (XDG_CACHE_HOME, else ~/.cache)."""
    return Path(_get(env, "XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()


def _get(env: Mapping[str, str], name: str) -> str | None:
    """A variable's value; unset and empty are the same (``FOO=`` in an .env file means unset)."""
    value = env.get(name)
    return value.strip() if value and value.strip() else None


def _int(env: Mapping[str, str], name: str, default: int | None, minimum: int = 0) -> int | None:
    raw = _get(env, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise SettingsError(f"{name} must be at least {minimum}, got {value}")
    return value


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(env, name)
    if raw is None:
        return default
    lowered = raw.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name} must be one of 1/0, true/false, yes/no, on/off; got {raw!r}")


_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,\-?LW#]+$")
_CRON_ALIASES = {"@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually", "@midnight"}


def _cron(env: Mapping[str, str], name: str, default: str) -> str:
    """A five-field cron expression (the Dagster layer parses it fully; this catches what is plainly not one)."""
    value = _get(env, name) or default
    fields = value.split()
    if not (value in _CRON_ALIASES or (len(fields) == 5 and all(_CRON_FIELD.match(f) for f in fields))):
        raise SettingsError(f"{name} must be a cron expression such as '0 * * * *', got {value!r}")
    return value


def _source_sync(env: Mapping[str, str], source: str, cron: str, requests_per_minute: int | None) -> SourceSyncSettings:
    upper = source.upper()
    return SourceSyncSettings(
        enabled=_flag(env, f"RAG_{upper}_SYNC_ENABLED", default=True),
        cron=_cron(env, f"{upper}_SYNC_CRON", cron),
        initial_history_days=_int(env, f"{upper}_INITIAL_HISTORY_DAYS", DEFAULT_INITIAL_HISTORY_DAYS, minimum=1)
        or DEFAULT_INITIAL_HISTORY_DAYS,
        requests_per_minute=requests_per_minute,
    )


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> Any:
    value = (_get(env, name) or default).lower()
    if value not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _delimiter(env: Mapping[str, str], name: str) -> str:
    value = _get(env, name) or ","
    if value == "\\t":
        value = "\t"
    if len(value) != 1:
        raise SettingsError(f"{name} must be one character (e.g. ; or \\t), got {value!r}")
    return value


def _names(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    """A comma-separated list (spaces ignored); () when unset."""
    return tuple(n.strip() for n in (_get(env, name) or "").split(",") if n.strip())


def _path(env: Mapping[str, str], name: str, default: Path) -> Path:
    raw = _get(env, name)
    return Path(raw).expanduser().resolve() if raw else default


def _from_env(env: Mapping[str, str]) -> Settings:
    slack_api = None
    if _get(env, "SLACK_BOT_TOKEN"):
        slack_api = SlackApiSettings(
            base_url=_get(env, "SLACK_API_BASE_URL"),
            page_size=_int(env, "SLACK_PAGE_SIZE", 200, minimum=1) or 200,
            lookback_days=_int(env, "SLACK_LOOKBACK_DAYS", 30) or 0,
        )
    jira_api = None
    jira_url = _get(env, "JIRA_URL")
    if jira_url:
        has_pat, has_token = bool(_get(env, "JIRA_PAT")), bool(_get(env, "JIRA_API_TOKEN"))
        jira_api = JiraApiSettings(
            url=jira_url,
            # Cloud unless only a personal access token (Server/Data Center) is given.
            cloud=_flag(env, "JIRA_CLOUD", default=not (has_pat and not has_token)),
            username=_get(env, "JIRA_USERNAME"),
            api_token_set=has_token,
            pat_set=has_pat,
            site=_get(env, "JIRA_SITE"),
            page_size=_int(env, "JIRA_PAGE_SIZE", 100, minimum=1) or 100,
            overlap_minutes=_int(env, "JIRA_OVERLAP_MINUTES", 15) or 0,
        )
    notifications = None
    channel = _get(env, "RAG_NOTIFY_SLACK_CHANNEL")
    token_env = next((n for n in ("RAG_NOTIFY_SLACK_TOKEN", "SLACK_BOT_TOKEN") if _get(env, n)), None)
    if channel and token_env:
        notifications = NotificationSettings(
            channel=channel,
            token_env=token_env,
            base_url=_get(env, "SLACK_API_BASE_URL"),
            webserver_url=_get(env, "DAGSTER_WEBSERVER_URL") or "http://127.0.0.1:3000",
        )
    home = _get(env, "DAGSTER_HOME")
    serve_token = _get(env, "RAG_SERVE_TOKEN")
    slack_export = _path(env, "RAG_SLACK_EXPORT", BUNDLED_SLACK_EXPORT)
    jira_dump = _path(env, "RAG_JIRA_DUMP", BUNDLED_JIRA_DUMP)
    jira_csv = tuple(Path(p).expanduser().resolve() for p in (_get(env, "RAG_JIRA_CSV") or "").split(os.pathsep) if p)
    raw_sync_cron = _cron(env, "RAG_RAW_SYNC_CRON", DEFAULT_RAW_SYNC_CRON)
    # A page size of 15 is the non-Marketplace regime, whose limit is 1 request a minute.
    slack_page_size = slack_api.page_size if slack_api else 200
    slack_rpm_default = (
        SLACK_NON_MARKETPLACE_REQUESTS_PER_MINUTE
        if slack_page_size <= SLACK_NON_MARKETPLACE_PAGE_SIZE
        else SLACK_TIER3_REQUESTS_PER_MINUTE
    )
    return Settings(
        data_dir=_path(env, "RAG_DATA_DIR", Path(".rag_data").resolve()),
        # In a checkout the eval sets sit next to the package.
        eval_dir=_path(env, "RAG_EVAL_DIR", PACKAGE_DIR.parent / "eval_sets"),
        dagster_home=Path(home).resolve() if home else None,
        partition_start=_get(env, "RAG_PARTITION_START") or DEFAULT_PARTITION_START,
        dense_model=_get(env, "RAG_DENSE_MODEL") or DEFAULT_DENSE_MODEL,
        dense_backend=_choice(env, "RAG_DENSE_BACKEND", ("auto", "openvino", "torch"), "auto"),
        dense_device=_choice(env, "RAG_DENSE_DEVICE", ("auto", "cpu", "cuda", "mps"), "auto"),
        model_cache=_path(env, "RAG_MODEL_CACHE", _user_cache(env) / "rag_pipeline" / "models"),
        bm25_tokenizer=_choice(env, "RAG_BM25_TOKENIZER", BM25_TOKENIZERS, "word"),
        sparse_query=_choice(env, "RAG_SPARSE_QUERY", ("plain", "fielded"), "fielded"),
        learned_fusion=_flag(env, "RAG_LEARNED_FUSION", True),
        llm_rerank_model=_get(env, "RAG_LLM_RERANK_MODEL"),
        answer_model=_get(env, "RAG_ANSWER_MODEL"),
        rewrite_model=_get(env, "RAG_REWRITE_MODEL"),
        judge_model=_get(env, "RAG_JUDGE_MODEL"),
        answer_documents=_int(env, "RAG_ANSWER_DOCUMENTS", 5, minimum=1) or 5,
        answer_context_chars=_int(env, "RAG_ANSWER_CONTEXT_CHARS", 1500, minimum=100) or 1500,
        eval_exact_dense=_flag(env, "RAG_EVAL_EXACT_DENSE", False),
        slack_export=slack_export,
        jira_dump=jira_dump,
        jira_csv=jira_csv,
        jira_csv_date_format=_get(env, "RAG_JIRA_CSV_DATE_FORMAT") or DEFAULT_JIRA_CSV_DATE_FORMAT,
        jira_csv_delimiter=_delimiter(env, "RAG_JIRA_CSV_DELIMITER"),
        jira_directory=_path(env, "RAG_JIRA_DIRECTORY", Path()) if _get(env, "RAG_JIRA_DIRECTORY") else None,
        identity_links=_path(env, "RAG_IDENTITY_LINKS", Path()) if _get(env, "RAG_IDENTITY_LINKS") else None,
        slack_team=_get(env, "SLACK_TEAM_ID"),
        slack_domain=_get(env, "SLACK_WORKSPACE_DOMAIN"),
        jira_site=_get(env, "JIRA_SITE"),
        max_document_chars=_int(env, "RAG_MAX_DOCUMENT_CHARS", DEFAULT_MAX_DOCUMENT_CHARS, minimum=1000)
        or DEFAULT_MAX_DOCUMENT_CHARS,
        store_wait_seconds=_int(env, "RAG_STORE_WAIT_SECONDS", DEFAULT_STORE_WAIT_SECONDS) or 0,
        qdrant=QdrantSettings(
            url=_get(env, "QDRANT_URL"),
            api_key_set=bool(_get(env, "QDRANT_API_KEY")),
            shards=_int(env, "QDRANT_SHARDS", None, minimum=1),
            replicas=_int(env, "QDRANT_REPLICAS", None, minimum=1),
            hnsw_m=_int(env, "RAG_HNSW_M", DenseSearch.m, minimum=4) or DenseSearch.m,
            hnsw_ef_construct=_int(env, "RAG_HNSW_EF_CONSTRUCT", DenseSearch.ef_construct, minimum=4)
            or DenseSearch.ef_construct,
            hnsw_ef=_int(env, "RAG_HNSW_EF", DenseSearch.hnsw_ef, minimum=1) or DenseSearch.hnsw_ef,
            exact_dense=_flag(env, "RAG_DENSE_EXACT", False),
        ),
        slack_api=slack_api,
        jira_api=jira_api,
        api_limits=ApiLimits(
            timeout_seconds=_int(env, "RAG_API_TIMEOUT_SECONDS", 30, minimum=1) or 30,
            page_cap=_int(env, "RAG_API_PAGE_CAP", 10_000, minimum=1) or 10_000,
            requests_per_partition=_int(env, "RAG_API_REQUEST_BUDGET", 5_000, minimum=1) or 5_000,
            seconds_per_partition=_int(env, "RAG_API_SECONDS_BUDGET", 3_600, minimum=1) or 3_600,
        ),
        notifications=notifications,
        automation=AutomationSettings(
            raw_sync_cron=raw_sync_cron,
            eval_cron=_cron(env, "RAG_EVAL_CRON", DEFAULT_EVAL_CRON),
            settle_hours=_int(env, "RAG_SYNC_SETTLE_HOURS", DEFAULT_SYNC_SETTLE_HOURS) or 0,
            max_range_days=_int(env, "RAG_SYNC_MAX_RANGE_DAYS", DEFAULT_SYNC_MAX_RANGE_DAYS, minimum=1)
            or DEFAULT_SYNC_MAX_RANGE_DAYS,
            slack=_source_sync(
                env, "slack", raw_sync_cron, _int(env, "SLACK_REQUESTS_PER_MINUTE", slack_rpm_default, minimum=1)
            ),
            jira=_source_sync(env, "jira", raw_sync_cron, None),
        ),
        serve=ServeSettings(
            token=SecretStr(serve_token) if serve_token else None,
            trusted_proxy=_flag(env, "RAG_SERVE_TRUSTED_PROXY", False),
            allowed_hosts=_names(env, "RAG_SERVE_ALLOWED_HOSTS"),
            mcp_user=_get(env, "RAG_MCP_USER"),
            mcp_email=_get(env, "RAG_MCP_EMAIL"),
        ),
    )
