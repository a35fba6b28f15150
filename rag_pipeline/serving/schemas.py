"""What the search service accepts: request bodies validated field by field, so a bad request is a 4xx that
names the field, never a traceback, and never reaches the index."""

from __future__ import annotations

from typing import Annotated

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


class SearchRequest(BaseModel):
    """``POST /v1/search`` and the MCP ``search_documents`` tool: a query and its filters. The reader is not
    here: it comes from the caller's identity, never from the body."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="what to search for")
    mode: Mode = Field("hybrid", description="vector, bm25, hybrid or reranked")
    top_k: int = Field(10, ge=1, le=MAX_TOP_K, description="documents to return")
    source: FilterValues = Field(None, description="only these sources (slack, jira)")
    container: FilterValues = Field(None, description="only these channel ids / project keys")
    author: FilterValues = Field(None, description="only documents these people wrote in (display names)")
    since: str | None = Field(None, description="documents active on or after this ISO date")
    until: str | None = Field(None, description="documents active before this ISO date")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is empty")
        if "\x00" in value:
            raise ValueError("query contains a NUL character")
        return _encodable(value)

    @field_validator("since", "until")
    @classmethod
    def _instant(cls, value: str | None, info: object) -> str | None:
        name = getattr(info, "field_name", "date")
        return None if value is None else instant(_encodable(value), name)
