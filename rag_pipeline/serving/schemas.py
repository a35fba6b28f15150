"""What the search service accepts: request bodies validated field by field, so a bad request is a 4xx that
names the field, never a traceback, and never reaches the index."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from rag_pipeline.retrieval.instants import NotAnInstant, utc_instant
from rag_pipeline.retrieval.results import Mode

MAX_QUERY_CHARS = 8000
MAX_TOP_K = 100
MAX_FILTER_VALUES = 50
_NAME_CHARS = 200


def _as_list(value: object) -> object:
    """One value or a list of them (``"source": "jira"`` and ``"source": ["jira"]`` alike)."""
    values = [value] if isinstance(value, str) else value
    if isinstance(values, list):
        for item in values:
            if isinstance(item, str):
                _encodable(item)
    return values


def _encodable(value: str) -> str:
    """JSON may carry a lone surrogate (``"\\ud800"``), which no UTF-8 text (a response, a log) can hold."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("contains a lone UTF-16 surrogate, which is not text") from None
    return value


def query_text(value: str) -> str:
    """A query as searches take it (document and tool search alike): not blank, at least MIN_QUERY_CHARS characters
    (the design's rule: one character matches too much to mean anything), no NUL, encodable."""
    if not value.strip():
        raise ValueError("query is empty")
    if len(value.strip()) < MIN_QUERY_CHARS:
        raise ValueError(f"query must be at least {MIN_QUERY_CHARS} characters")
    if "\x00" in value:
        raise ValueError("query contains a NUL character")
    return _encodable(value)


FilterValues = Annotated[
    Annotated[list[Annotated[str, Field(min_length=1, max_length=_NAME_CHARS)]], Field(max_length=MAX_FILTER_VALUES)]
    | None,
    BeforeValidator(_as_list),
]


def instant(value: str, field: str) -> str:
    """An ISO date or date-time as the index filters on it, read as the CLI reads ``--since``/``--until``."""
    try:
        return utc_instant(value)
    except NotAnInstant as exc:
        raise ValueError(f"{field} {exc}") from None


MIN_QUERY_CHARS = 2


class SearchRequest(BaseModel):
    """``POST /v1/search`` and the MCP ``search_documents`` tool: a query and its filters. The reader is not
    here: it comes from the caller's identity, never from the body."""

    # strict: "top_k": "10" or true is an error naming the field, not a number (JSON types are the contract).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="what to search for")
    mode: Mode = Field(
        # The search router over hybrid: identical to hybrid on every bundled eval set, far better on identifiers
        # (docs/notes/search_router.md), so it is what a caller gets without asking.
        "routed",
        description="routed (default: hybrid with exact identifiers first and the question's source and date hints), "
        "vector, bm25, hybrid, reranked or prf (hybrid with an RM3-expanded BM25 side)",
    )
    top_k: int = Field(10, ge=1, le=MAX_TOP_K, description="documents to return")
    source: FilterValues = Field(None, description="only these sources (slack, jira)")
    container: FilterValues = Field(None, description="only these channel ids / project keys")
    author: FilterValues = Field(None, description="only documents these people wrote in (display names)")
    path: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="only the containers under this path of the reader's tree (slack/#eng, jira/OPS): GET /v1/tree",
    )
    since: str | None = Field(None, description="documents active on or after this ISO date")
    until: str | None = Field(None, description="documents active before this ISO date")
    min_score: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="drop results less likely relevant than this: P(relevant) from the evaluation's calibration, "
        "0-1 (default: the service's RAG_MIN_SCORE); each result's `relevance` is that probability",
    )
    answer: bool = Field(
        False, description="also answer the query from the top documents, citing them (RAG_ANSWER_MODEL)"
    )
    rewrite: bool = Field(False, description="plan the search with the rewrite model first (RAG_REWRITE_MODEL)")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        return query_text(value)

    @field_validator("since", "until")
    @classmethod
    def _instant(cls, value: str | None, info: object) -> str | None:
        name = getattr(info, "field_name", "date")
        return None if value is None else instant(_encodable(value), name)


MAX_MESSAGES = 100


class ChatMessage(BaseModel):
    """One message of an OpenAI chat request; content as a string or as text parts."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        parts = self.content or []
        return "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    include_usage: bool = False


class ChatRequest(BaseModel):
    """``POST /v1/chat/completions`` as OpenAI's clients send it. Parameters this service does not use
    (temperature, top_p, user...) are accepted and ignored so that any client works; ``n`` must be 1."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    model: str | None = Field(None, description="the answer model (RAG_ANSWER_MODEL) or 'rag-pipeline'")
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=1, description="one answer per request")
    max_iterations: int | None = Field(
        None, ge=1, description="the agent's tool rounds at most for this answer (RAG_AGENT; up to "
        "RAG_AGENT_MAX_ITERATIONS)"
    )  # fmt: skip

    @field_validator("messages")
    @classmethod
    def _has_question(cls, value: list[ChatMessage]) -> list[ChatMessage]:
        users = [m for m in value if m.role == "user"]
        if not users:
            raise ValueError("no user message: the last user message is the question")
        question = users[-1].text()
        if not question.strip():
            raise ValueError("the last user message is empty")
        if len(question) > MAX_QUERY_CHARS:
            raise ValueError(f"the last user message is over {MAX_QUERY_CHARS} characters")
        for message in value:
            _encodable(message.text())
        return value

    def turns(self) -> list[tuple[str, str]]:
        """(role, text) of the user and assistant messages, oldest first (system prompts are the service's own)."""
        return [(m.role, m.text()) for m in self.messages if m.role in ("user", "assistant")]


MAX_TOOLS = 50
# A description cut shorter than this says nothing a name does not; longer than this is no cut.
MIN_DESCRIPTION_CHARS = 20
MAX_DESCRIPTION_CHARS = 10_000


class ToolSearchRequest(BaseModel):
    """``POST /v1/tools/search`` and the MCP ``search_tools`` tool: a task described in words."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="the task the tools are for")
    top_k: int | None = Field(
        None, ge=1, le=MAX_TOOLS, description="tools to return besides the critical ones (RAG_TOOL_SEARCH_TOP_K)"
    )
    mode: Literal["multi-signal", "vector", "bm25", "hybrid"] = Field(
        "multi-signal",
        description="multi-signal (default: the design's 0.5 semantic + 0.3 usage + 0.2 success), or one arm alone",
    )
    categories: list[Annotated[str, Field(min_length=1, max_length=_NAME_CHARS)]] | None = Field(
        None, min_length=1, max_length=MAX_FILTER_VALUES, description="only tools tagged with one of these"
    )
    min_similarity: float | None = Field(
        None, ge=0.0, le=1.0, description="drop tools less similar to the task than this cosine (0-1; dense arms)"
    )
    include_full_params: bool = Field(True, description="false: leave each tool's parameter schema out")
    max_description_length: int | None = Field(
        None, ge=MIN_DESCRIPTION_CHARS, le=MAX_DESCRIPTION_CHARS, description="cut descriptions to this many characters"
    )
    exclude_active: bool = Field(True, description="leave out the tools the caller's active set holds already")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        return query_text(value)


class ActiveToolsRequest(BaseModel):
    """``POST /v1/tools/active`` (activate) and ``/v1/tools/active/deactivate``: tools by the names tool search
    returned."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    names: list[Annotated[str, Field(min_length=1, max_length=_NAME_CHARS)]] = Field(
        min_length=1, max_length=MAX_TOOLS, description="tool names, as tool search returns them"
    )


class FeedbackRequest(BaseModel):
    """``POST /v1/feedback``: how relevant a document the reader was shown is to what they asked."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    query: str = Field(min_length=1, max_length=2000, description="the question the reader searched")
    document_id: str = Field(min_length=1, max_length=1000, description="a document id a search returned")
    grade: int = Field(ge=0, le=2, description="0 not relevant, 1 relevant, 2 exactly what was needed")

    @field_validator("query", "document_id")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


class ToolOutcomeRequest(BaseModel):
    """``POST /v1/tools/{name}/outcome``: whether calling the tool worked (feeds tool search's usage and success)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    success: bool = Field(description="whether the call did what the agent needed")
    calls: int = Field(1, ge=1, le=1000, description="calls this outcome stands for")
