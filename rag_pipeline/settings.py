"""One configuration for the whole project, read once from the environment and passed down.

``Settings.from_env()`` is the only place that reads configuration variables: the Dagster code
location, every CLI command and the bench scripts build one ``Settings`` and hand it (or the parts
they need) to what they construct. Nothing reads the environment at import time.

It is configuration only: the models and stores it names are built in the composition root
(:mod:`rag_pipeline.composition`), never here.

Secrets are never copied into ``Settings``: it records only *whether* a token is set, and the
Dagster resources receive ``EnvVar``s, so a token never lands in a run's config, logs or metadata.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

from dotenv import dotenv_values
from pydantic import BaseModel, ConfigDict, SecretStr, SerializeAsAny, model_validator

from rag_pipeline.env_values import EnvValues
from rag_pipeline.env_values import SettingsError as SettingsError  # where commands and tests catch it
from rag_pipeline.index.store import CollectionNames, DenseSearch
from rag_pipeline.scheduling.pause import IngestionPause, current_pause
from rag_pipeline.sources.registry import SourceSettings, registered_sources
from rag_pipeline.text.chunking import ChunkingConfig
from rag_pipeline.text.language import (
    LANGUAGE_SETTINGS,
    Language,
    LanguageChoice,
    LanguageSetting,
    language_of_models,
    read_choice,
)
from rag_pipeline.text.language import MODELS as LANGUAGE_MODELS
from rag_pipeline.vectors.dense.load import DEFAULT_DENSE_MODEL
from rag_pipeline.vectors.sparse import BM25_TOKENIZERS, Bm25Tokenizer

PACKAGE_DIR = Path(__file__).resolve().parent
# Earliest partition day: the bundled Slack export starts in November 2004.
DEFAULT_PARTITION_START = "2004-01-01"
DEFAULT_RAW_SYNC_CRON = "0 * * * *"
DEFAULT_EVAL_CRON = "0 6 * * *"
# Scheduled sync: history a new channel/project starts with, how long after midnight the previous day is
# read again, and the longest range one run reads (a longer backlog is read range after range).
DEFAULT_INITIAL_HISTORY_DAYS = 90
DEFAULT_SYNC_SETTLE_HOURS = 2
DEFAULT_SYNC_MAX_RANGE_DAYS = 30
# A document longer than this is truncated (and reported): one 5 MB message would otherwise become
# ~12,000 chunks. Long Jira issues with all their comments stay far below it.
DEFAULT_MAX_DOCUMENT_CHARS = 500_000
# Documents per run of a first index (index, demo): what bounds its memory (runs/backfill.py, issue 68).
DEFAULT_BACKFILL_BATCH_DOCUMENTS = 2_000
# How long a search or a write waits for another process holding the embedded index before giving up.
DEFAULT_STORE_WAIT_SECONDS = 120


SectionT = TypeVar("SectionT", bound=SourceSettings)


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
    def language(self) -> Path:
        """The language the index is built for, and its two models (:mod:`rag_pipeline.text.language`)."""
        return self.root / "language.json"

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
    def feedback(self) -> Path:
        """Readers' relevance judgements (``RAG_FEEDBACK_DAYS``): one JSON-lines file per UTC day."""
        return self.root / "feedback"

    @property
    def mined_eval_sets(self) -> Path:
        """Eval sets mined from this workspace (``rag-pipeline evaluate``, the ``mined_eval_sets`` asset): the
        current sets, which the evaluation runs beside the bundled ones, and one folder per week mined."""
        return self.reports / "mined"

    @property
    def rewrite_plans(self) -> Path:
        """Query rewrite plans by (model, day, question), shared by the service and the evaluation."""
        return self.reports / "rewrite_plans.sqlite"

    @property
    def calibration(self) -> Path:
        """Each search mode's score as P(relevant), fitted by the evaluation report (retrieval/calibration.py)."""
        return self.reports / "calibration.json"

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
    def tokens(self) -> Path:
        """Personal service tokens (``rag-pipeline token``): hashed secrets, person, scopes, expiry (SQLite)."""
        return self.root / "tokens.sqlite"

    @property
    def tool_outcomes(self) -> Path:
        """Calls and successes per tool (``POST /v1/tools/{name}/outcome``), which tool search's score reads."""
        return self.root / "tool_outcomes.sqlite"

    @property
    def request_audit(self) -> Path:
        """The per-request audit log (``RAG_SERVE_AUDIT_DAYS``): one JSON-lines file per UTC day."""
        return self.root / "request_audit"

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


Executor = Literal["auto", "in_process", "multiprocess", "celery", "k8s"]
DEFAULT_CELERY_VISIBILITY_TIMEOUT = 7200


class ExecutionSettings(_Frozen):
    """Where a run's steps execute (RAG_EXECUTOR): ``auto`` keeps the embedded engine's one process (in-process;
    multiprocess with a Qdrant server), ``celery`` hands each step to Celery workers through a broker
    (RAG_CELERY_BROKER_URL, RAG_CELERY_BACKEND_URL), ``k8s`` runs each step as a Kubernetes Job.

    The broker's URL can carry a password, so only whether it is set is recorded here; the executor reads the
    variable itself (a Dagster ``env`` config source), and it never lands in a run's config."""

    executor: Executor = "auto"
    celery_broker_set: bool = False
    celery_backend_set: bool = False
    # Seconds a step's task may stay unacknowledged before the broker hands it to another worker: a worker
    # that dies (SIGKILL, a lost machine) has its step run again elsewhere after this long. It must exceed the
    # longest step, or a step still running is handed out twice.
    celery_visibility_timeout: int = DEFAULT_CELERY_VISIBILITY_TIMEOUT


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
    # RAG_SERVE_MAX_IN_FLIGHT: requests (/v1 and /mcp) served at once; one more is answered 429 with Retry-After
    # instead of queueing behind the others (64 clients on 2 busy cores waited 6 s at p95 with no bound).
    max_in_flight: int = 64
    # RAG_SERVE_RATE_PER_MINUTE: requests per caller identity in any minute (0: no per-person limit).
    rate_per_minute: int = 0
    # RAG_SERVE_ADMINS: emails or account ids (comma-separated) who may ask `whois` and `explain` about other
    # people over the API; a personal token with the `admin` scope may too. Everyone else asks about themselves.
    admins: tuple[str, ...] = ()
    # RAG_SERVE_AUDIT_DAYS: keep a per-request log of the document ids each reader was given (never query text)
    # for this many days, under <data dir>/request_audit/ (0: off).
    audit_days: int = 0
    # RAG_FEEDBACK_DAYS: accept readers' relevance judgements (POST /v1/feedback, the MCP rate_document tool) and keep
    # them, question text included, this many days under <data dir>/feedback/ (0: off, the routes refuse).
    feedback_days: int = 0
    # RAG_SERVE_CACHE_ENTRIES / RAG_SERVE_CACHE_SECONDS: recent searches (per reader access) and documents kept this
    # many at most, this long at most, and dropped at once when the index is written (0 entries: no cache).
    cache_entries: int = 1000
    cache_seconds: int = 300
    # RAG_CACHE_REDIS_URL: those caches in Redis, shared by every replica (serving/shared_cache.py); unset, each
    # process keeps its own. Held as a SecretStr (the URL may carry a password).
    cache_redis_url: SecretStr | None = None
    # RAG_INGEST_TOKEN: turns on the ingestion API (GET /v1/scheduler/status, POST /v1/ingest[/all]) for callers
    # with this bearer token, and only them (the readers' token is never accepted there). Held as a SecretStr.
    ingest_token: SecretStr | None = None
    # Pushed changes (serving/live_events.py): RAG_SLACK_SIGNING_SECRET turns on POST /events/slack (Slack's Events
    # API), RAG_JIRA_WEBHOOK_SECRET and RAG_CONFLUENCE_WEBHOOK_SECRET POST /events/jira and /events/confluence;
    # each event becomes a targeted sync of its container after RAG_EVENTS_DEBOUNCE_SECONDS without another.
    slack_signing_secret: SecretStr | None = None
    jira_webhook_secret: SecretStr | None = None
    confluence_webhook_secret: SecretStr | None = None
    events_debounce_seconds: float = 2.0
    # Pushed documents (serving/pushed_documents.py): RAG_PUSH_SOURCES registers the systems without a connector that
    # may push (POST /v1/ingest/documents, behind RAG_INGEST_TOKEN); RAG_PUSH_MAX_BODY_BYTES and
    # RAG_PUSH_MAX_DOCUMENTS bound one request.
    push_sources: tuple[str, ...] = ()
    push_max_body_bytes: int = 8 * 1024 * 1024
    push_max_documents: int = 500
    # OpenTelemetry traces (serving/tracing.py): OTLP over HTTP to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
    # OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces (the standard variables); unset, spans are no-ops. OTEL_SERVICE_NAME.
    otlp_endpoint: str | None = None
    otel_service_name: str = "rag-pipeline"
    # RAG_SERVE_AUTH: "token" (the shared RAG_SERVE_TOKEN, identity from X-User-* headers) or "oidc": a bearer JWT
    # from the identity provider, verified (http/oidc.py); its RAG_OIDC_EMAIL_CLAIM names the caller and no
    # identity header is believed.
    auth: Literal["token", "oidc"] = "token"
    oidc_issuer: str | None = None  # RAG_OIDC_ISSUER
    oidc_audience: str | None = None  # RAG_OIDC_AUDIENCE
    oidc_jwks_url: str | None = None  # RAG_OIDC_JWKS_URL (default: the issuer's discovery document's jwks_uri)
    oidc_claim: str = "email"  # RAG_OIDC_EMAIL_CLAIM: the claim naming the person (an email, or an account id)
    oidc_algorithms: tuple[str, ...] = ("RS256", "ES256")  # RAG_OIDC_ALGORITHMS
    # Who ``rag-pipeline mcp`` (stdio) searches as when --user/--email are not given (RAG_MCP_USER, RAG_MCP_EMAIL).
    mcp_user: str | None = None
    mcp_email: str | None = None


class RetentionSettings(_Frozen):
    """What the retention schedule and ``rag-pipeline prune`` delete: finished runs (with their event logs), old
    evaluation reports and superseded data files, older than these many days (0: keep forever)."""

    run_days: int = 30  # RAG_RETENTION_RUN_DAYS: finished Dagster runs and their event logs
    report_days: int = 90  # RAG_RETENTION_REPORT_DAYS: evaluation runs/reports under <data>/reports
    cron: str = "30 3 * * *"  # RAG_RETENTION_CRON (UTC): the daily `retention_schedule`
    enabled: bool = True  # RAG_RETENTION_ENABLED: off defines no schedule (`prune` by hand still works)


class AutomationSettings(_Frozen):
    """When the daemon runs things by itself."""

    raw_sync_cron: str = DEFAULT_RAW_SYNC_CRON
    eval_cron: str = DEFAULT_EVAL_CRON
    settle_hours: int = DEFAULT_SYNC_SETTLE_HOURS
    max_range_days: int = DEFAULT_SYNC_MAX_RANGE_DAYS
    syncs: dict[str, SourceSyncSettings] = {}  # by source name

    def sync(self, source: str) -> SourceSyncSettings:
        """The scheduled sync settings of ``source``."""
        return self.syncs.get(source) or SourceSyncSettings()


class Settings(_Frozen):
    """Everything configurable, with the defaults of the offline demo."""

    data_dir: Path
    # Whether RAG_DATA_DIR named the data folder (else the default, or --data-dir later): errors say which.
    data_dir_from_env: bool = False
    eval_dir: Path
    dagster_home: Path | None = None
    partition_start: str = DEFAULT_PARTITION_START
    # Whether RAG_PARTITION_START set it: then every source's partitions start there; else the code location starts
    # each source's at its first data week, recorded in the data folder (pipeline/partition_start.py).
    partition_start_explicit: bool = False
    dense_model: str = DEFAULT_DENSE_MODEL
    # The language family the index is built for (RAG_LANGUAGE / --language): "auto" chooses it from the data on
    # a data folder's first index and keeps the recorded choice; "english", "cjk" or "korean" set both models below,
    # except one set explicitly (RAG_DENSE_MODEL / RAG_BM25_TOKENIZER: "pinned").
    language: LanguageSetting = "auto"
    dense_model_pinned: bool = False
    bm25_tokenizer_pinned: bool = False
    # How local dense models run: OpenVINO on the CPU (same vectors, less CPU) with torch as the reference and
    # fallback; on a CUDA/MPS device, torch there.
    dense_backend: Literal["auto", "openvino", "torch"] = "auto"
    dense_device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    # A local model folder with code of its own loads only when the operator says so (the code runs).
    dense_trust_remote_code: bool = False
    # Models converted for a faster runtime (OpenVINO IR), made once from the bundled weights and shared by
    # every data folder of the user (RAG_MODEL_CACHE; default: the user's cache folder).
    model_cache: Path | None = None
    # BM25 tokenizer: "word" (Qdrant's default, for space-separated languages), "cjk-bigram" (character bigrams
    # for Japanese, Chinese and Korean, words elsewhere), "ko-morpheme-bigram" (bigrams plus Korean stems) or
    # "multilingual" (Qdrant's dictionary segmentation); the index records it and refuses another.
    bm25_tokenizer: Bm25Tokenizer = "word"
    # How BM25 reads a query (RAG_SPARSE_QUERY): "fielded" weighs the title line up and drops code, stack
    # frames and URLs from the body; "plain" is Qdrant's one weight per term. Search and evaluation alike.
    sparse_query: Literal["plain", "fielded"] = "fielded"
    # Hybrid searches use the learned fusions: per-source RRF and, for multi-line queries, the title line's
    # dense prefetch (RAG_LEARNED_FUSION; off: plain RRF k=60).
    learned_fusion: bool = True
    llm_rerank_model: str | None = None
    # Which reranker the reranked mode uses in `search`, `serve`, `ask` and MCP (RAG_RERANKER): "learned" (the
    # multi-signal model the evaluation trained, or its fixed weights before one), "llm" (RAG_LLM_RERANK_MODEL grades
    # the top 50, the design's LLM reranker) or "none" (reranked answers the hybrid ranking, with a warning).
    reranker: Literal["learned", "llm", "none"] = "learned"
    # Answers with cited sources (RAG_ANSWER_MODEL: an OpenAI chat model, or any OpenAI-compatible server's via
    # OPENAI_BASE_URL); unset, `ask` and the chat endpoint say how to turn them on.
    answer_model: str | None = None
    # The judge ragas scores answers' faithfulness and relevancy with (RAG_JUDGE_MODEL), in answer_quality.
    judge_model: str | None = None
    # Query rewriting before the search (RAG_REWRITE_MODEL): a JSON plan of queries, expansions and filters.
    rewrite_model: str | None = None
    answer_documents: int = 5
    # RAG_AGENT=1: answers (chat, `ask`) let the model call search_documents/get_document/list_containers itself, at
    # most RAG_AGENT_MAX_ITERATIONS rounds (answers/agent.py); off, each question is searched once and answered.
    agent: bool = False
    agent_max_iterations: int = 4
    # RAG_MIN_SCORE: the service's default min_score (0: keep every result), on the calibrated scale: a result's
    # probability of being relevant by the evaluation's judgments (docs/notes/min_score.md says what 0.5 keeps).
    min_score: float = 0.0
    answer_context_chars: int = 1500
    # The answer model's sampling temperature and reply budget (RAG_ANSWER_TEMPERATURE, RAG_ANSWER_MAX_TOKENS).
    answer_temperature: float = 0.0
    answer_max_tokens: int = 800
    # RAG_ANSWER_LANGUAGE: the language of the sentences the project writes in an answer (nothing found, the answer
    # model failed): auto (the question's: Korean, Japanese, else English), en, ko or ja.
    answer_language: str = "auto"
    # The evaluation's dense and hybrid arms on exact dense search rather than the index's HNSW.
    eval_exact_dense: bool = False
    # Processes the evaluation's search arms run in (RAG_EVAL_WORKERS): 0 is one per core, at most 4; each other
    # process searches its own copy of the embedded index (rag_pipeline/evaluation/parallel.py).
    eval_workers: int = 0
    # Mined eval sets (rag_pipeline/evaluation/mining): queries kept per source and miner (RAG_MINED_MAX_QUERIES), and
    # how many new mined queries start an evaluation (RAG_MINED_MIN_NEW_QUERIES).
    mined_max_queries: int = 1000
    mined_min_new_queries: int = 20
    mined_run_as: Literal["authors", "everyone"] = "authors"
    # Joins of one person's accounts whose emails differ (RAG_IDENTITY_LINKS; default <data>/identity_links.txt).
    identity_links: Path | None = None
    max_document_chars: int = DEFAULT_MAX_DOCUMENT_CHARS
    backfill_batch_documents: int = DEFAULT_BACKFILL_BATCH_DOCUMENTS
    # PARENT_CHUNK_SIZE, PARENT_CHUNK_OVERLAP, CHILD_CHUNK_SIZE, CHILD_CHUNK_OVERLAP (cl100k tokens); the index
    # records them and refuses a write with other sizes (index_info.claim_chunking).
    chunking: ChunkingConfig = ChunkingConfig()
    store_wait_seconds: int = DEFAULT_STORE_WAIT_SECONDS
    # RAG_AUDIT_MASS_CHANGE_ACCOUNTS: the access audit's check fails (and notifies) when one audit sees more
    # accounts gain or lose access than this.
    audit_mass_change_accounts: int = 25
    # RAG_INGESTION_PAUSED: every sync sensor and reconciliation schedule skips its ticks (configuration's switch;
    # `rag-pipeline pause`/`resume` is the runtime one, a file in the data folder).
    ingestion_paused: bool = False
    qdrant: QdrantSettings = QdrantSettings()
    execution: ExecutionSettings = ExecutionSettings()
    api_limits: ApiLimits = ApiLimits()
    notifications: NotificationSettings | None = None
    automation: AutomationSettings = AutomationSettings()
    retention: RetentionSettings = RetentionSettings()
    serve: ServeSettings = ServeSettings()
    # Each registered source's own section (rag_pipeline/sources/<name>/settings.py), by name.
    sources: dict[str, SerializeAsAny[SourceSettings]] = {}

    @model_validator(mode="after")
    def _pin_models_given(self) -> Settings:
        # A model named when the settings are built (not from the environment, which says so itself) is meant.
        for name in ("dense_model", "bm25_tokenizer"):
            if name in self.model_fields_set and f"{name}_pinned" not in self.model_fields_set:
                object.__setattr__(self, f"{name}_pinned", True)
        return self

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read every configuration variable once (``env`` defaults to ``os.environ``), with the data folder's
        recorded language applied."""
        return _from_env(os.environ if env is None else env).with_language_applied()

    def has_embedded_index(self) -> bool:
        """Whether the data folder's embedded index already holds the collections (never with a Qdrant server)."""
        names = CollectionNames.with_prefix(self.qdrant.collection_prefix)
        return self.qdrant.url is None and (self.paths.qdrant / names.children).exists()

    def recorded_language(self) -> LanguageChoice | None:
        """The language choice recorded in the data folder (None before its first index)."""
        return read_choice(self.paths.language)

    def language_undecided(self) -> bool:
        """``auto`` with nothing recorded yet, and a model left to choose: the next index decides."""
        pinned = self.dense_model_pinned and self.bm25_tokenizer_pinned
        return self.language == "auto" and not pinned and self.recorded_language() is None

    def with_language(self, language: LanguageSetting) -> Settings:
        """These settings with ``language`` set (``--language``), its models applied."""
        return self.model_copy(update={"language": language}).with_language_applied()

    def with_language_applied(self) -> Settings:
        """The dense model and BM25 tokenizer of the language in force: the one set (english/cjk), else the
        recorded choice, else English; a model set explicitly (pinned) always stays."""
        recorded = self.recorded_language() if self.language == "auto" else None
        if recorded is not None:
            dense, tokenizer = recorded.dense_model, recorded.bm25_tokenizer
        else:
            dense, tokenizer = LANGUAGE_MODELS["english" if self.language == "auto" else self.language]
        update: dict[str, Any] = {}
        if not self.dense_model_pinned:
            update["dense_model"] = dense
        if not self.bm25_tokenizer_pinned:
            update["bm25_tokenizer"] = tokenizer
        return self.model_copy(update=update)

    @property
    def index_language(self) -> Language:
        """The language the configured models serve (english, cjk or korean): searches pick their learned
        fusion by it."""
        return language_of_models(self.dense_model, self.bm25_tokenizer)

    def ingestion_pause(self) -> IngestionPause | None:
        """The pause of scheduled ingestion in force (``rag-pipeline pause`` or RAG_INGESTION_PAUSED), None when off."""
        return current_pause(self.data_dir, self.ingestion_paused)

    @property
    def paths(self) -> DataPaths:
        return DataPaths(root=self.data_dir)

    @property
    def identity_links_file(self) -> Path:
        """Where the identity links are read from."""
        return self.identity_links or self.paths.identity_links

    def with_data_dir(self, data_dir: str | Path | None) -> Settings:
        """The same settings on another data folder (``--data-dir``); ``None`` keeps this one."""
        if data_dir is None:
            return self
        return self.model_copy(update={"data_dir": Path(data_dir).resolve()}).with_language_applied()

    def source(self, name: str) -> SourceSettings:
        """The settings section of source ``name`` (a ValueError names the registered sources otherwise)."""
        if name not in self.sources:
            raise ValueError(f"unknown source {name!r}: choose from {', '.join(self.sources)}")
        return self.sources[name]

    def section(self, name: str, model: type[SectionT]) -> SectionT:
        """The section of source ``name`` as the source's own settings model (for the source's own code)."""
        found = self.source(name)
        if not isinstance(found, model):
            raise TypeError(f"the {name} settings are a {type(found).__name__}, not a {model.__name__}")
        return found

    def with_source(self, name: str, **given: Any) -> Settings:
        """The same settings with values given on the command line for one source (None and (): keep)."""
        return self.model_copy(update={"sources": {**self.sources, name: self.source(name).given(**given)}})

    def offline(self) -> Settings:
        """The same settings reading only the offline sources (the demo never calls a live API)."""
        return self.model_copy(update={"sources": {n: s.offline() for n, s in self.sources.items()}})

    @property
    def live_sources(self) -> tuple[str, ...]:
        """Sources fed by their live API in this configuration."""
        return tuple(n for n, s in self.sources.items() if s.live)

    @property
    def synced_sources(self) -> tuple[str, ...]:
        """Live sources whose scheduled sync is switched on (the daemon syncs them by itself)."""
        return tuple(n for n in self.live_sources if self.automation.sync(n).enabled)


def operator_partition_start(env: Mapping[str, str] | None = None) -> str:
    """The partition start an operator set (``RAG_PARTITION_START`` in ``env``, default the process's environment),
    else the earliest the project admits: :attr:`Settings.partition_start`, and where a whole-export read draws the
    line between documents some partition holds and those none does (the data folder's per-source starts only move
    later than this, never earlier)."""
    return EnvValues(os.environ if env is None else env).get("RAG_PARTITION_START") or DEFAULT_PARTITION_START


def _user_cache(env: EnvValues) -> Path:
    """The user's cache folder (XDG_CACHE_HOME, else ~/.cache)."""
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()


def _source_sync(env: EnvValues, source: str, cron: str, requests_per_minute: int | None) -> SourceSyncSettings:
    """A live source's scheduled sync: RAG_<SOURCE>_SYNC_ENABLED, <SOURCE>_SYNC_CRON, <SOURCE>_INITIAL_HISTORY_DAYS
    and <SOURCE>_REQUESTS_PER_MINUTE (default: the source's own API budget)."""
    upper = source.upper()
    return SourceSyncSettings(
        enabled=env.flag(f"RAG_{upper}_SYNC_ENABLED", default=True),
        cron=env.cron(f"{upper}_SYNC_CRON", cron),
        initial_history_days=env.int(f"{upper}_INITIAL_HISTORY_DAYS", DEFAULT_INITIAL_HISTORY_DAYS, minimum=1)
        or DEFAULT_INITIAL_HISTORY_DAYS,
        requests_per_minute=env.int(f"{upper}_REQUESTS_PER_MINUTE", requests_per_minute, minimum=1),
    )


def _chunking(env: EnvValues) -> ChunkingConfig:
    """The chunk sizes, each a whole number, checked together (an overlap below its size, children within parents)."""
    default = ChunkingConfig()
    values = {
        "parent_tokens": env.int("PARENT_CHUNK_SIZE", default.parent_tokens, minimum=1),
        "parent_overlap": env.int("PARENT_CHUNK_OVERLAP", default.parent_overlap, minimum=0),
        "child_tokens": env.int("CHILD_CHUNK_SIZE", default.child_tokens, minimum=1),
        "child_overlap": env.int("CHILD_CHUNK_OVERLAP", default.child_overlap, minimum=0),
    }
    try:
        return ChunkingConfig(**values)
    except ValueError as exc:
        names = {"parent_tokens": "PARENT_CHUNK_SIZE", "parent_overlap": "PARENT_CHUNK_OVERLAP",
                 "child_tokens": "CHILD_CHUNK_SIZE", "child_overlap": "CHILD_CHUNK_OVERLAP"}  # fmt: skip
        message = str(exc.errors()[0]["msg"]) if hasattr(exc, "errors") else str(exc)
        for field, variable in names.items():
            message = message.replace(field, variable)
        raise SettingsError(f"chunk sizes: {message.removeprefix('Value error, ')}") from None


def _otlp_traces_endpoint(env: EnvValues) -> str | None:
    """Where spans go: the traces endpoint itself, else the base endpoint's /v1/traces (the OTLP/HTTP convention)."""
    traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    endpoint = traces or (f"{base.rstrip('/')}/v1/traces" if base else None)
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        name = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" if traces else "OTEL_EXPORTER_OTLP_ENDPOINT"
        raise SettingsError(f"{name} must be an http(s) URL (OTLP over HTTP), got {endpoint!r}")
    return endpoint


def _reranker_choice(env: EnvValues) -> Literal["learned", "llm", "none"]:
    choice: Literal["learned", "llm", "none"] = env.choice("RAG_RERANKER", ("learned", "llm", "none"), "learned")
    if choice == "llm" and not env.get("RAG_LLM_RERANK_MODEL"):
        raise SettingsError(
            "RAG_RERANKER=llm needs RAG_LLM_RERANK_MODEL, the chat model that grades candidates (and OPENAI_API_KEY, "
            "or OPENAI_BASE_URL for an OpenAI-compatible server)"
        )
    return choice


def _execution(env: EnvValues) -> ExecutionSettings:
    executor = env.choice("RAG_EXECUTOR", get_args(Executor), "auto")
    broker_set = bool(env.get("RAG_CELERY_BROKER_URL"))
    if executor == "celery" and not broker_set:
        raise SettingsError(
            "RAG_EXECUTOR=celery needs RAG_CELERY_BROKER_URL, the broker the workers listen on "
            "(e.g. redis://127.0.0.1:6379/0); see docs/guides/scaling.md"
        )
    timeout = env.int("RAG_CELERY_VISIBILITY_TIMEOUT", DEFAULT_CELERY_VISIBILITY_TIMEOUT, minimum=10)
    return ExecutionSettings(
        executor=executor,
        celery_broker_set=broker_set,
        celery_backend_set=bool(env.get("RAG_CELERY_BACKEND_URL")),
        celery_visibility_timeout=timeout or DEFAULT_CELERY_VISIBILITY_TIMEOUT,
    )


def _from_env(raw: Mapping[str, str]) -> Settings:
    env = EnvValues(raw)
    sources = {name: source.settings.from_env(env) for name, source in registered_sources().items()}
    notifications = None
    channel = env.get("RAG_NOTIFY_SLACK_CHANNEL")
    token_env = next((n for n in ("RAG_NOTIFY_SLACK_TOKEN", "SLACK_BOT_TOKEN") if env.get(n)), None)
    if channel and token_env:
        notifications = NotificationSettings(
            channel=channel,
            token_env=token_env,
            base_url=env.get("SLACK_API_BASE_URL"),
            webserver_url=env.get("DAGSTER_WEBSERVER_URL") or "http://127.0.0.1:3000",
        )
    home = env.get("DAGSTER_HOME")
    serve_token = env.get("RAG_SERVE_TOKEN")
    if serve_token and env.get("RAG_INGEST_TOKEN") == serve_token:
        # Every reader holds the readers' token: the same value would give them the ingestion API.
        raise SettingsError("RAG_INGEST_TOKEN must differ from RAG_SERVE_TOKEN (every reader holds that one)")
    raw_sync_cron = env.cron("RAG_RAW_SYNC_CRON", DEFAULT_RAW_SYNC_CRON)
    return Settings(
        data_dir=env.path("RAG_DATA_DIR", Path(".rag_data").resolve()),
        data_dir_from_env=bool(env.get("RAG_DATA_DIR")),
        # In a checkout the eval sets sit next to the package.
        eval_dir=env.path("RAG_EVAL_DIR", PACKAGE_DIR.parent / "eval_sets"),
        dagster_home=Path(home).resolve() if home else None,
        partition_start=operator_partition_start(raw),
        partition_start_explicit=bool(env.get("RAG_PARTITION_START")),
        dense_model=env.get("RAG_DENSE_MODEL") or DEFAULT_DENSE_MODEL,
        language=env.choice("RAG_LANGUAGE", LANGUAGE_SETTINGS, "auto"),
        dense_model_pinned=bool(env.get("RAG_DENSE_MODEL")),
        bm25_tokenizer_pinned=bool(env.get("RAG_BM25_TOKENIZER")),
        dense_backend=env.choice("RAG_DENSE_BACKEND", ("auto", "openvino", "torch"), "auto"),
        dense_device=env.choice("RAG_DENSE_DEVICE", ("auto", "cpu", "cuda", "mps"), "auto"),
        dense_trust_remote_code=env.flag("RAG_DENSE_TRUST_REMOTE_CODE", False),
        model_cache=env.path("RAG_MODEL_CACHE", _user_cache(env) / "rag_pipeline" / "models"),
        bm25_tokenizer=env.choice("RAG_BM25_TOKENIZER", BM25_TOKENIZERS, "word"),
        sparse_query=env.choice("RAG_SPARSE_QUERY", ("plain", "fielded"), "fielded"),
        learned_fusion=env.flag("RAG_LEARNED_FUSION", True),
        llm_rerank_model=env.get("RAG_LLM_RERANK_MODEL"),
        reranker=_reranker_choice(env),
        answer_model=env.get("RAG_ANSWER_MODEL"),
        rewrite_model=env.get("RAG_REWRITE_MODEL"),
        judge_model=env.get("RAG_JUDGE_MODEL"),
        min_score=env.float("RAG_MIN_SCORE", 0.0, minimum=0.0, maximum=1.0),
        agent=env.flag("RAG_AGENT", False),
        agent_max_iterations=env.int("RAG_AGENT_MAX_ITERATIONS", 4, minimum=1) or 4,
        answer_documents=env.int("RAG_ANSWER_DOCUMENTS", 5, minimum=1) or 5,
        answer_context_chars=env.int("RAG_ANSWER_CONTEXT_CHARS", 1500, minimum=100) or 1500,
        answer_temperature=env.float("RAG_ANSWER_TEMPERATURE", 0.0, minimum=0.0, maximum=2.0),
        answer_max_tokens=env.int("RAG_ANSWER_MAX_TOKENS", 800, minimum=16) or 800,
        answer_language=env.choice("RAG_ANSWER_LANGUAGE", ("auto", "en", "ko", "ja"), "auto"),
        eval_exact_dense=env.flag("RAG_EVAL_EXACT_DENSE", False),
        eval_workers=env.int("RAG_EVAL_WORKERS", 0, minimum=0) or 0,
        mined_max_queries=env.int("RAG_MINED_MAX_QUERIES", 1000, minimum=1) or 1000,
        mined_min_new_queries=env.int("RAG_MINED_MIN_NEW_QUERIES", 20, minimum=1) or 20,
        mined_run_as=env.choice("RAG_MINED_RUN_AS", ("authors", "everyone"), "authors"),
        identity_links=env.path("RAG_IDENTITY_LINKS", Path()) if env.get("RAG_IDENTITY_LINKS") else None,
        chunking=_chunking(env),
        max_document_chars=env.int("RAG_MAX_DOCUMENT_CHARS", DEFAULT_MAX_DOCUMENT_CHARS, minimum=1000)
        or DEFAULT_MAX_DOCUMENT_CHARS,
        backfill_batch_documents=env.int("RAG_BACKFILL_BATCH_DOCUMENTS", DEFAULT_BACKFILL_BATCH_DOCUMENTS, minimum=1)
        or DEFAULT_BACKFILL_BATCH_DOCUMENTS,
        store_wait_seconds=env.int("RAG_STORE_WAIT_SECONDS", DEFAULT_STORE_WAIT_SECONDS) or 0,
        ingestion_paused=env.flag("RAG_INGESTION_PAUSED", False),
        audit_mass_change_accounts=env.int("RAG_AUDIT_MASS_CHANGE_ACCOUNTS", 25, minimum=0) or 0,
        qdrant=QdrantSettings(
            url=env.get("QDRANT_URL"),
            api_key_set=bool(env.get("QDRANT_API_KEY")),
            shards=env.int("QDRANT_SHARDS", None, minimum=1),
            replicas=env.int("QDRANT_REPLICAS", None, minimum=1),
            hnsw_m=env.int("RAG_HNSW_M", DenseSearch.m, minimum=4) or DenseSearch.m,
            hnsw_ef_construct=env.int("RAG_HNSW_EF_CONSTRUCT", DenseSearch.ef_construct, minimum=4)
            or DenseSearch.ef_construct,
            hnsw_ef=env.int("RAG_HNSW_EF", DenseSearch.hnsw_ef, minimum=1) or DenseSearch.hnsw_ef,
            exact_dense=env.flag("RAG_DENSE_EXACT", False),
        ),
        execution=_execution(env),
        api_limits=ApiLimits(
            timeout_seconds=env.int("RAG_API_TIMEOUT_SECONDS", 30, minimum=1) or 30,
            page_cap=env.int("RAG_API_PAGE_CAP", 10_000, minimum=1) or 10_000,
            requests_per_partition=env.int("RAG_API_REQUEST_BUDGET", 5_000, minimum=1) or 5_000,
            seconds_per_partition=env.int("RAG_API_SECONDS_BUDGET", 3_600, minimum=1) or 3_600,
        ),
        notifications=notifications,
        sources=sources,
        automation=AutomationSettings(
            raw_sync_cron=raw_sync_cron,
            eval_cron=env.cron("RAG_EVAL_CRON", DEFAULT_EVAL_CRON),
            settle_hours=env.int("RAG_SYNC_SETTLE_HOURS", DEFAULT_SYNC_SETTLE_HOURS) or 0,
            max_range_days=env.int("RAG_SYNC_MAX_RANGE_DAYS", DEFAULT_SYNC_MAX_RANGE_DAYS, minimum=1)
            or DEFAULT_SYNC_MAX_RANGE_DAYS,
            syncs={
                name: _source_sync(env, name, raw_sync_cron, section.default_requests_per_minute())
                for name, section in sources.items()
            },
        ),
        retention=RetentionSettings(
            run_days=env.int("RAG_RETENTION_RUN_DAYS", 30, minimum=0) or 0,
            report_days=env.int("RAG_RETENTION_REPORT_DAYS", 90, minimum=0) or 0,
            cron=env.cron("RAG_RETENTION_CRON", "30 3 * * *"),
            enabled=env.flag("RAG_RETENTION_ENABLED", True),
        ),
        serve=ServeSettings(
            token=SecretStr(serve_token) if serve_token else None,
            trusted_proxy=env.flag("RAG_SERVE_TRUSTED_PROXY", False),
            allowed_hosts=env.names("RAG_SERVE_ALLOWED_HOSTS"),
            max_in_flight=env.int("RAG_SERVE_MAX_IN_FLIGHT", 64, minimum=1) or 64,
            rate_per_minute=env.int("RAG_SERVE_RATE_PER_MINUTE", 0) or 0,
            admins=tuple(a.lower() for a in env.names("RAG_SERVE_ADMINS")),
            audit_days=env.int("RAG_SERVE_AUDIT_DAYS", 0, minimum=0) or 0,
            feedback_days=env.int("RAG_FEEDBACK_DAYS", 0, minimum=0) or 0,
            ingest_token=SecretStr(ingest_token) if (ingest_token := env.get("RAG_INGEST_TOKEN")) else None,
            slack_signing_secret=SecretStr(v) if (v := env.get("RAG_SLACK_SIGNING_SECRET")) else None,
            jira_webhook_secret=SecretStr(v) if (v := env.get("RAG_JIRA_WEBHOOK_SECRET")) else None,
            confluence_webhook_secret=SecretStr(v) if (v := env.get("RAG_CONFLUENCE_WEBHOOK_SECRET")) else None,
            events_debounce_seconds=env.float("RAG_EVENTS_DEBOUNCE_SECONDS", 2.0, 0.0, 600.0),
            push_sources=env.names("RAG_PUSH_SOURCES"),
            push_max_body_bytes=env.int("RAG_PUSH_MAX_BODY_BYTES", 8 * 1024 * 1024, minimum=1024) or 8 * 1024 * 1024,
            push_max_documents=env.int("RAG_PUSH_MAX_DOCUMENTS", 500, minimum=1) or 500,
            otlp_endpoint=_otlp_traces_endpoint(env),
            otel_service_name=env.get("OTEL_SERVICE_NAME") or "rag-pipeline",
            cache_entries=env.int("RAG_SERVE_CACHE_ENTRIES", 1000, minimum=0) or 0,
            cache_seconds=env.int("RAG_SERVE_CACHE_SECONDS", 300, minimum=1) or 300,
            cache_redis_url=SecretStr(v) if (v := env.get("RAG_CACHE_REDIS_URL")) else None,
            auth=env.choice("RAG_SERVE_AUTH", ("token", "oidc"), "token"),
            oidc_issuer=env.get("RAG_OIDC_ISSUER"),
            oidc_audience=env.get("RAG_OIDC_AUDIENCE"),
            oidc_jwks_url=env.get("RAG_OIDC_JWKS_URL"),
            oidc_claim=env.get("RAG_OIDC_EMAIL_CLAIM") or "email",
            oidc_algorithms=env.names("RAG_OIDC_ALGORITHMS") or ("RS256", "ES256"),
            mcp_user=env.get("RAG_MCP_USER"),
            mcp_email=env.get("RAG_MCP_EMAIL"),
        ),
    )


# --- the .env file ----------------------------------------------------------------------------------------------
# Read into the environment before the settings are, by the CLI and the Dagster code location. The file is
# $RAG_ENV_FILE when set (it must exist), else ./.env when there is one. A variable already in the environment
# always wins over the file, so an explicit `RAG_DATA_DIR=... rag-pipeline ...` or a container's environment is
# never overridden. Values go into os.environ (not only into the settings) because the pipeline's secrets are read
# where they are used, by Dagster's EnvVar and the clients. Values are never printed.


def env_file_path(cwd: Path | None = None) -> Path | None:
    """The file to read: ``RAG_ENV_FILE`` (an error when it does not exist), else ``.env`` in ``cwd``, else None."""
    named = os.environ.get("RAG_ENV_FILE", "").strip()
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise SettingsError(f"RAG_ENV_FILE names {str(path)!r}, which is not a file")
        return path
    default = (cwd or Path.cwd()) / ".env"
    return default if default.is_file() else None


def load_env_file(cwd: Path | None = None) -> list[str]:
    """Set every variable of the ``.env`` file that the environment does not already have; the names set."""
    path = env_file_path(cwd)
    if path is None:
        return []
    try:
        values = dotenv_values(path, encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"the env file {str(path)!r} could not be read ({type(exc).__name__})") from None
    loaded = []
    for name, value in values.items():
        if value is not None and name not in os.environ:  # a bare NAME line has no value: nothing to set
            os.environ[name] = value
            loaded.append(name)
    return loaded


def secret(name: str) -> str | None:
    """A secret variable's value, read when it is needed (never kept in the settings, so it cannot reach a repr,
    a log or Dagster metadata); None when unset. The Dagster layer passes the same variables as ``EnvVar``."""
    return os.environ.get(name) or None
