"""Documents pushed by a system without a connector (``POST /v1/ingest/documents``, ``rag-pipeline push``): the
shape a caller sends, checked field by field, and turned into the project's one :class:`Document` shape.

A pushed source is *registered* by naming it in ``RAG_PUSH_SOURCES`` (``hr_wiki,handbook``): a lower-case name that
is not one of the connectors' sources (their documents are written by their own syncs and reconciled against their
APIs, which would remove what a push wrote). A document's id in the index is ``<source>:<id>``, so two pushed sources
never share an id. Every check answers with the field's path (``documents[3].acl``), and one bad document refuses
the whole batch: nothing of it is written, so a caller never has to find out which half went in.

No ACL, no write: a document must say who reads it (``public``, or at least one user or group). A re-push of an id
replaces the document (its version is ``updated`` unless given; an older version than the stored one is skipped, as
for every source)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator

from rag_pipeline.sources.document import Acl, Document, content_hash, utc_instant
from rag_pipeline.sources.identifiers import check_container_id

# A pushed source's name: it becomes the payload's ``source`` and the documents' id prefix.
SOURCE_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
# A document id: letters, digits and ``. _ : ~ -``, starting with a letter or digit, no ``..`` (never a path).
_DOCUMENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:~-]{0,199}")
MAX_TEXT_CHARS = 1_000_000
PUSH_PATH = "/v1/ingest/documents"
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_DOCUMENTS = 500
MAX_LIST_ITEMS = 1000
MAX_NAME_CHARS = 256


def _document_id(value: str) -> str:
    if _DOCUMENT_ID.fullmatch(value) is None or ".." in value:
        raise ValueError(
            "an id is 1-200 letters, digits, '.', '_', ':', '~' or '-', starting with a letter or digit "
            "(no '/', no '..': never a path)"
        )
    return value


def _container(value: str) -> str:
    return check_container_id(value, "container")


def _names(values: list[str]) -> list[str]:
    for value in values:
        if not value.strip() or len(value) > MAX_NAME_CHARS or not value.isprintable():
            raise ValueError(f"each name is 1-{MAX_NAME_CHARS} printable characters, not blank")
    return values


def _url(value: str | None) -> str | None:
    if value is not None and not re.fullmatch(r"https?://[^\s]{1,2000}", value):
        raise ValueError("a url is http:// or https:// without spaces")
    return value


DocumentId = Annotated[str, AfterValidator(_document_id)]
Names = Annotated[list[str], Field(max_length=MAX_LIST_ITEMS), AfterValidator(_names)]


class PushedAcl(BaseModel):
    """Who may read a pushed document (the shape of :class:`~rag_pipeline.sources.document.Acl`). Required, and it
    must admit someone: ``public``, or a user or a group."""

    model_config = ConfigDict(extra="forbid", strict=True)

    public: bool = False
    users: Names = []
    groups: Names = []
    restricted_to: Names = []

    @model_validator(mode="after")
    def _admits_someone(self) -> PushedAcl:
        if not (self.public or self.users or self.groups):
            raise ValueError("no ACL, no write: give public: true, or at least one of users or groups")
        return self

    def acl(self) -> Acl:
        return Acl(public=self.public, users=tuple(self.users), groups=tuple(self.groups),
                   restricted_to=tuple(self.restricted_to))  # fmt: skip


class PushedDocument(BaseModel):
    """One pushed document, in the project's document shape (its id without the source, its hash computed here)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: DocumentId
    container: Annotated[str, AfterValidator(_container)]
    title: str = Field(default="", max_length=1000)
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    url: Annotated[str | None, AfterValidator(_url)] = None
    authors: Names = []
    created: AwareDatetime | None = None
    updated: AwareDatetime
    version: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    acl: PushedAcl
    metadata: dict[str, Any] = {}

    @model_validator(mode="after")
    def _times_in_range(self) -> PushedDocument:
        for name in ("created", "updated"):
            value = getattr(self, name)
            if value is not None:
                utc_instant(value)  # a ValueError past what UTC can show
        return self

    def document(self, source: str) -> Document:
        """The project's :class:`Document`: id ``<source>:<id>``, version ``updated`` unless given."""
        updated = utc_instant(self.updated)
        created = utc_instant(self.created) if self.created is not None else updated
        return Document(
            id=f"{source}:{self.id}",
            source=source,
            container=self.container,
            title=self.title,
            text=self.text,
            url=self.url,
            authors=tuple(self.authors),
            created=created,
            updated=updated,
            version=self.version if self.version is not None else updated.timestamp(),
            content_hash=content_hash(self.text),
            acl=self.acl.acl(),
            metadata={**self.metadata, "pushed": True},
        )


class PushRequest(BaseModel):
    """``POST /v1/ingest/documents``: documents to write and ids to delete, of one registered pushed source."""

    model_config = ConfigDict(extra="forbid", strict=True)

    source: str = Field(min_length=1, max_length=64)
    documents: list[PushedDocument] = []
    deleted: list[DocumentId] = []


@dataclass(frozen=True)
class PushLimits:
    """The registered pushed sources (``RAG_PUSH_SOURCES``) and what one request may carry."""

    sources: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES  # RAG_PUSH_MAX_BODY_BYTES
    max_documents: int = DEFAULT_MAX_DOCUMENTS  # RAG_PUSH_MAX_DOCUMENTS (documents and deletions together)


@dataclass(frozen=True)
class FieldProblem:
    """One refused field: its path (``documents[3].acl``) and why."""

    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


class PushInvalid(ValueError):
    """A batch refused as a whole: ``status`` (4xx) and every problem found, each naming its field."""

    def __init__(self, status: int, problems: Sequence[FieldProblem]) -> None:
        first = problems[0] if problems else FieldProblem("body", "invalid request")
        super().__init__(f"{first.field}: {first.message}")
        self.status = status
        self.problems = list(problems) or [first]

    @property
    def field(self) -> str:
        return self.problems[0].field


@dataclass(frozen=True)
class PushBatch:
    """A checked batch: its source, the documents as pushed and the ids to delete (both without the source)."""

    source: str
    pushed: list[PushedDocument]
    deleted_ids: list[str]

    def documents(self) -> list[Document]:
        """The documents in the project's shape."""
        return [d.document(self.source) for d in self.pushed]

    def deleted(self) -> list[str]:
        """The index ids to delete, ``<source>:<id>``."""
        return [f"{self.source}:{d}" for d in self.deleted_ids]

    def lines(self) -> str:
        """The batch as JSON lines (what :func:`batch_from_lines` reads back)."""
        lines = [d.model_dump_json(exclude_defaults=True) for d in self.pushed]
        lines += [json.dumps({"id": d, "deleted": True}) for d in self.deleted_ids]
        return "".join(f"{line}\n" for line in lines)


def field_path(location: Iterable[int | str]) -> str:
    """Pydantic's ``loc`` as a path a person reads: ``("documents", 3, "acl")`` -> ``documents[3].acl``."""
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "body"


def problems_of(error: ValidationError, prefix: str = "") -> list[FieldProblem]:
    """Each of pydantic's errors as a :class:`FieldProblem` (the message without pydantic's "Value error, ")."""
    found = []
    for item in error.errors(include_url=False, include_input=False):
        location = [part for part in item.get("loc", ()) if not str(part).startswith("function-after")]
        if item.get("type") == "json_invalid":
            return [FieldProblem("body", "the body is not valid JSON")]
        message = str(item.get("msg", "invalid value")).removeprefix("Value error, ")
        found.append(FieldProblem(prefix + field_path(location) if location else prefix or "body", message))
    return found


def check_source(source: str, registered: Sequence[str], connectors: Sequence[str]) -> str:
    """``source`` when it is a registered pushed source; :class:`PushInvalid` (422, ``source``) otherwise."""
    if source in connectors:
        raise PushInvalid(422, [FieldProblem("source", f"{source!r} is written by its connector's sync, not pushed")])
    if source not in registered:
        known = ", ".join(registered) or "none: set RAG_PUSH_SOURCES"
        raise PushInvalid(422, [FieldProblem("source", f"unknown pushed source {source[:64]!r} (registered: {known})")])
    return source


def pushed_source_names(names: Iterable[str], connectors: Sequence[str]) -> tuple[str, ...]:
    """The configured pushed sources (``RAG_PUSH_SOURCES``), or a ValueError naming a name that cannot be one."""
    found = []
    for name in names:
        if SOURCE_NAME.fullmatch(name) is None:
            raise ValueError(
                f"RAG_PUSH_SOURCES: {name[:40]!r} is not a source name (a-z, 0-9, '_', 1-32, a letter first)"
            )
        if name in connectors:
            raise ValueError(f"RAG_PUSH_SOURCES: {name!r} is a connector's source; name the pushing system instead")
        found.append(name)
    return tuple(dict.fromkeys(found))


def checked_batch(
    payload: bytes | str,
    registered: Sequence[str],
    connectors: Sequence[str],
    max_documents: int,
) -> PushBatch:
    """The request checked whole: its shape (every problem named), its source, at most ``max_documents`` documents
    and deletions together, and no id twice; :class:`PushInvalid` otherwise, and then nothing is written."""
    try:
        request = PushRequest.model_validate_json(payload)
    except ValidationError as exc:
        # An unknown source first: its documents' problems would be beside the point.
        given = _given_source(payload)
        if isinstance(given, str):
            check_source(given, registered, connectors)
        raise PushInvalid(400 if any(p.field == "body" for p in problems_of(exc)) else 422, problems_of(exc)) from None
    source = check_source(request.source, registered, connectors)
    count = len(request.documents) + len(request.deleted)
    if count > max_documents:
        raise PushInvalid(
            413, [FieldProblem("documents", f"{count} documents and deletions; at most {max_documents} per request")]
        )
    seen: dict[str, str] = {}
    twice = []
    named = [(f"documents[{i}].id", d.id) for i, d in enumerate(request.documents)]
    named += [(f"deleted[{i}]", d) for i, d in enumerate(request.deleted)]
    for where, doc_id in named:
        if doc_id in seen:
            twice.append(FieldProblem(where, f"id {doc_id!r} is given twice (first at {seen[doc_id]})"))
        seen.setdefault(doc_id, where)
    if twice:
        raise PushInvalid(422, twice)
    return PushBatch(source, list(request.documents), list(request.deleted))


def _given_source(payload: bytes | str) -> object:
    """The body's ``source``, where the body is a JSON object (None otherwise)."""
    try:
        body = json.loads(payload)
    except ValueError:
        return None
    return body.get("source") if isinstance(body, dict) else None


def batch_from_lines(text: str, source: str) -> str:
    """A JSON-lines file (``rag-pipeline push FILE``) as a request: each line a document, or ``{"id": …,
    "deleted": true}`` for a deletion; :class:`PushInvalid` naming the line that is not a JSON object."""
    documents: list[Any] = []
    deleted: list[Any] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            raise PushInvalid(400, [FieldProblem(f"line {number}", "not valid JSON")]) from None
        if not isinstance(value, dict):
            raise PushInvalid(400, [FieldProblem(f"line {number}", "not a JSON object")])
        if value.get("deleted") is True and set(value) <= {"id", "deleted"}:
            deleted.append(value.get("id"))
        else:
            documents.append(value)
    return json.dumps({"source": source, "documents": documents, "deleted": deleted})
