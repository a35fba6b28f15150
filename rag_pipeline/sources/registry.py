"""The registered sources: everything that differs between Slack, Jira and any other source, found by name.

A source is one :class:`Source` object in its own folder (``rag_pipeline/sources/<name>/source.py`` for the
built-in ones). The command line (``--source`` choices, ``index`` options, ``sync``), the settings (one section
per source, read by the source's own model), the index payload and the Dagster code location (through
``dagster_spec``, imported only by the Dagster layer) all take what they need from here, so shared code never
spells a source's name. A package adds a source without touching this project by registering its ``Source``
under the ``rag_pipeline.sources`` entry-point group::

    [project.entry-points."rag_pipeline.sources"]
    confluence = "my_package.confluence:SOURCE"
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict

from rag_pipeline.env_values import EnvValues

ENTRY_POINT_GROUP = "rag_pipeline.sources"
BUILT_IN = (
    "rag_pipeline.connectors.slack.source:SLACK",
    "rag_pipeline.connectors.jira.source:JIRA",
    "rag_pipeline.connectors.confluence.source:CONFLUENCE",
    "rag_pipeline.connectors.tools.source:TOOLS",
)


class SourceRegistryError(ValueError):
    """A registered source cannot be loaded or clashes with another; the message names the entry."""


@dataclass(frozen=True)
class InputCheck:
    """A path the offline read needs: what it is and what set it (checked before the first run)."""

    path: Path
    what: str  # "Slack export"
    option: str | None  # "--slack-export"; None where only the variable sets it
    variable: str  # "RAG_SLACK_EXPORT"

    def source_of(self, options: bool) -> str:
        """What the user gave it with, as an error names it."""
        return f"{self.option} / {self.variable}" if options and self.option else self.variable


class SourceSettings(BaseModel):
    """One source's settings section; each source subclasses it in its own folder and reads its variables in
    :meth:`from_env` (the environment is read by ``Settings.from_env`` alone, which passes it down)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def from_env(cls, env: EnvValues) -> Self:
        return cls()

    # By convention a section keeps its live API's settings in a field ``api``, None where it is not configured.

    @property
    def live(self) -> bool:
        """Whether the live API is configured (a live source syncs; its API resource is defined)."""
        return getattr(self, "api", None) is not None

    def offline(self) -> Self:
        """The same section without the live API (the demo reads the offline files only)."""
        return self.model_copy(update={"api": None}) if "api" in type(self).model_fields else self

    def inputs(self) -> tuple[InputCheck, ...]:
        """The paths the offline read needs."""
        return ()

    def api_address(self) -> tuple[str, str | None] | None:
        """The live API's address and the variable that sets it (None: the client's default), for errors."""
        return None

    def default_requests_per_minute(self) -> int | None:
        """The live API's request budget a scheduled sync plans with, unless a variable sets one."""
        return None

    def given(self, **values: Any) -> Self:
        """The section with the values given on the command line (None and () keep the current one)."""
        update = {k: v for k, v in values.items() if v not in (None, ())}
        unknown = set(update) - set(type(self).model_fields)
        if unknown:
            raise TypeError(f"not settings of {type(self).__name__}: {', '.join(sorted(unknown))}")
        return self.model_copy(update=update)


@dataclass(frozen=True)
class IndexOption:
    """An ``index`` option of a source, stored in its settings section's ``field``."""

    flag: str  # "--slack-export"
    field: str  # "export"
    help: str
    kind: Literal["path", "paths", "text"] = "text"  # paths: repeatable
    chooses_source: bool = False  # given alone, it narrows ``index`` to this source (a data path)
    directory: bool = False  # ``rag-pipeline directory`` takes it too (what the directory is read from)


@dataclass(frozen=True)
class PushedChanges:
    """How a source receives pushed changes (``POST /events/<source>``): the receiver, built from a secret, and the
    ServeSettings field holding that secret."""

    receiver: str  # "module:Class" (a ``rag_pipeline.sources.pushed.PushReceiver``)
    secret: str  # "jira_webhook_secret"

    @property
    def variable(self) -> str:
        """The variable that sets the secret (named while unset): the field's name behind ``RAG_``, as ServeSettings
        reads it."""
        return f"RAG_{self.secret.upper()}"


@dataclass(frozen=True)
class LiveApi:
    """What ``sync`` needs to know of a source's live API."""

    required: tuple[str, str]  # the variable that turns it on, and what it holds (named when it is unset)
    label: str  # "Slack Web API": how an unreachable server is named
    containers_flag: str  # "--channel": the sync option naming containers
    containers_help: str
    container_prefix: str = ""  # "#": how a container is shown
    push: PushedChanges | None = None  # None: the source takes no pushed changes


def _no_payload(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class RerankFeature:
    """A column of the learned reranker's features that a source contributes (Jira: its resolution classes),
    computed from a candidate (a ``SearchResult``; typed loosely so the kernel does not import retrieval)."""

    name: str
    value: Callable[[Any], float]


@dataclass(frozen=True)
class RetrievalFacts:
    """What shared retrieval code asks a source instead of spelling its name (all optional).

    ``fusion`` / ``cjk_fusion``: the fields of :class:`rag_pipeline.retrieval.fusion.SourceFusion` learned for a
    search of this source alone (English index / CJK index; None: the shared default). ``rerank_features``: its
    columns of the reranker's features; ``rerank_indicator``: whether an ``is_<name>`` column marks its candidates.
    Both change the reranker's feature list, so a trained model is refused until retrained (the model file records
    the list). ``thread_level_bm25``: chat threads scored as whole threads by BM25 in a CJK index.
    ``query_words``: a regular expression that names the source in a question ("jira", "지라"): the router
    prefers the source when a question names exactly one. ``document_id``: a regular expression matching its
    document ids, so the router looks them up exactly.
    """

    fusion: Mapping[str, float] | None = None
    cjk_fusion: Mapping[str, float] | None = None
    rerank_features: tuple[RerankFeature, ...] = ()
    rerank_indicator: bool = False
    thread_level_bm25: bool = False
    query_words: str | None = None


@dataclass(frozen=True)
class AccessFacts:
    """What the directory, ``explain`` and the ACL refresh ask a source (all optional).

    ``describe_group``: an ACL group of this source (split at ':') in words, None where it is not one of its own.
    ``restricted_part``: what ``explain`` calls the restriction (``Acl.restricted_to``) that hides a document.
    ``document_container``: the container (a Slack channel) a document id names, for ``explain`` to name it.
    ``guest_note``: why a guest account of this source is not admitted by these groups (None: nothing to say).
    ``refresh_acls``: "module:function" ``(VectorStore, scope, DirectoryChange) -> [document ids]`` rewriting
    the ACLs of indexed documents whose containers' readers a directory sync changed; loaded only when called.
    """

    describe_group: Callable[[Sequence[str]], str | None] | None = None
    # What a document's ``restricted_to`` part is called when it hides the document ("a restricted Jira comment").
    restricted_part: str = "a restricted part of the document"
    document_container: Callable[[str], str | None] | None = None
    guest_note: Callable[[str, Sequence[str]], str | None] | None = None
    refresh_acls: str | None = None


@dataclass(frozen=True)
class MiningFacts:
    """What the eval-set miners (:mod:`rag_pipeline.evaluation.mining`) ask a source (all optional).

    ``handles``: the strings other documents name one of its documents by (an issue key, a permalink), from the
    document's record (``Document.to_record`` with ``metadata`` parsed); ``references``: those handles as they occur in
    any text (the shared link miner finds a cross-source link without knowing the source). ``author_account``: the
    ``source:account id`` of the person who wrote the document (its question), resolved through the principal
    directory so a mined query runs as its author. ``query_text``: the part of a document that asks (a Jira issue's
    summary and description, without its comments; None: the whole text). ``miners``: ``module:function`` references
    returning the source's own miners (Jira's typed links, Slack's threads), loaded only when mining.
    """

    handles: Callable[[Mapping[str, Any]], Sequence[str]] | None = None
    references: Callable[[str], Sequence[tuple[int, int, str]]] | None = None
    author_account: Callable[[Mapping[str, Any]], str | None] | None = None
    query_text: Callable[[Mapping[str, Any]], str] | None = None
    miners: tuple[str, ...] = ()


@dataclass(frozen=True)
class Source:
    """One source: its name, labels, settings section, command-line options, index payload and Dagster spec."""

    name: str  # the payload's ``source``, the asset group, the ``--source`` choice
    title: str  # "Slack"
    containers_label: str  # "channels": how its containers are named in summaries and metadata
    settings: type[SourceSettings]
    # "module:function" building its Dagster ``SourceSpec`` from the Settings; imported by the Dagster layer only,
    # so the domain never imports dagster.
    dagster_spec: str
    index_options: tuple[IndexOption, ...] = ()
    index_examples: tuple[str, ...] = ()
    live_api: LiveApi | None = None
    # Extra payload fields from a document's ``metadata`` (Jira: resolution and links); filterable in searches.
    payload: Callable[[Mapping[str, Any]], dict[str, Any]] = field(default=_no_payload)
    # How the data folder's recorded identity of this source reads in a summary.
    describe_identity: Callable[[Mapping[str, Any]], str] | None = None
    # "documents": searched by document search; "tool_catalog": a catalog of tool definitions, searched only by tool
    # search (its points share the index but never answer a document search, a tree listing or an evaluation).
    kind: Literal["documents", "tool_catalog"] = "documents"
    retrieval: RetrievalFacts = field(default_factory=RetrievalFacts)
    access: AccessFacts = field(default_factory=AccessFacts)
    mining: MiningFacts = field(default_factory=MiningFacts)
    # Extra names a live sync's summary carries for compatibility, {"threads_updated": "documents_updated"}.
    sync_metadata_aliases: Mapping[str, str] = field(default_factory=dict)

    def identity_line(self, identity: Mapping[str, Any]) -> str:
        if self.describe_identity is not None:
            return self.describe_identity(identity)
        return str(identity.get("described") or ", ".join(f"{k} {v}" for k, v in identity.items()))


def load_object(reference: str) -> Any:
    """The object a ``module:attribute`` reference names."""
    module, _, attribute = reference.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise SourceRegistryError(f"source entry {reference!r} cannot be loaded: {exc}") from exc


@cache
def registered_sources() -> dict[str, Source]:
    """Every source, the built-in ones first, then those registered by installed packages (by name)."""
    found: dict[str, Source] = {}
    loaded = [(ref, load_object(ref)) for ref in BUILT_IN]
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        where = f"{ep.name} = {ep.value}"
        try:
            loaded.append((where, ep.load()))
        except (ImportError, AttributeError) as exc:
            raise SourceRegistryError(f"source entry {where!r} cannot be loaded: {exc}") from exc
    for where, source in loaded:
        if not isinstance(source, Source):
            raise SourceRegistryError(f"source entry {where!r} is a {type(source).__name__}, not a Source")
        if source.name in found:
            raise SourceRegistryError(f"source entry {where!r} registers {source.name!r} a second time")
        found[source.name] = source
    return found


def source_names() -> tuple[str, ...]:
    """The registered sources' names, in order (the ``--source`` choices)."""
    return tuple(registered_sources())


def get_source(name: str) -> Source:
    """The registered source ``name``; a ValueError listing the registered ones otherwise."""
    sources = registered_sources()
    if name not in sources:
        raise ValueError(f"unknown source {name!r}: choose from {', '.join(sources)}")
    return sources[name]


def tool_sources() -> tuple[str, ...]:
    """The registered sources holding tool definitions: left out of document searches unless asked for."""
    return tuple(name for name, source in registered_sources().items() if source.kind == "tool_catalog")


def tool_catalog_source() -> str:
    """The registered source of tool definitions that tool search reads (its settings: RAG_TOOL_SEARCH_*)."""
    found = tool_sources()
    if not found:
        raise SourceRegistryError("no tool catalog source is registered (kind='tool_catalog')")
    return found[0]


def document_sources() -> tuple[str, ...]:
    """The registered sources of documents (what a document search, the agent and the evaluation may name)."""
    return tuple(name for name, source in registered_sources().items() if source.kind == "documents")


def searched_sources_phrase() -> str:
    """What the search covers, as prompts and tool descriptions name it: every registered document source by its
    title ("Slack, Jira and Confluence"), plugins included, never a fixed list."""
    sources = registered_sources()
    titles = [sources[name].title for name in document_sources()]
    if len(titles) <= 1:
        return "".join(titles) or "the indexed sources"
    return f"{', '.join(titles[:-1])} and {titles[-1]}"


def describe_group(group: str) -> str | None:
    """An ACL group in the words of the source that owns it (its first part); None where none does."""
    parts = group.split(":")
    found = registered_sources().get(parts[0])
    describe = found.access.describe_group if found is not None else None
    return describe(parts) if describe is not None else None


def document_payload(source: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The source's extra payload fields for one document (none for a source that is not registered)."""
    found = registered_sources().get(source)
    return found.payload(metadata) if found is not None else {}
