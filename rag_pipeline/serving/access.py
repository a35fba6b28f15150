"""The ``whois`` and ``explain`` use cases, for callers of the service (HTTP and MCP) and the CLI's operator
(:data:`OPERATOR`) alike.

A caller asks about themselves; an admin (a personal token with the ``admin`` scope, or an identity listed in
``RAG_SERVE_ADMINS``) may name another person. About oneself, a document one may not read is answered like a
missing one (404), as ``/v1/documents`` does, so ``explain`` cannot be used to probe for hidden documents or
learn which private channel holds them; an admin is told why it is hidden.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rag_pipeline.directory.explain import explain
from rag_pipeline.directory.people import Links, Person, UnknownPerson, find_person
from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.index.store import IndexedAcl
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.serving.identity import Reader
from rag_pipeline.serving.refusal import Refusal

# The query parameter (HTTP) and tool argument (MCP) naming another person.
PERSON_FIELD = "person"
# Whoever runs `rag-pipeline whois`/`explain` on the machine that holds the data folder: asks about other people
# as an admin does (the folder is theirs), and is nobody the directory knows.
OPERATOR = Reader(principal=Principal(user_id=None), email=None, groups_from="none", admin=True)


class AccessRefused(Refusal):
    """A whois/explain request this caller may not make, or about something unknown: ``status`` with a message
    naming ``field``."""

    field: str


class AccessQueries:
    """Answers ``whois`` and ``explain`` from the directory at ``directory`` and the index's ACLs
    (``document_acl(document_id)``: the document's indexed ACL, None when it is not indexed)."""

    def __init__(
        self,
        directory: str | Path | None,
        links: str | Path | None,
        document_acl: Callable[[str], IndexedAcl | None],
    ) -> None:
        self.store = DirectoryStore(directory) if directory is not None else None
        self.links_path = Path(links) if links is not None else None
        self._document_acl = document_acl

    def _person(self, identifier: str, field: str) -> Person:
        if self.store is None:
            raise AccessRefused(404, field, "this service has no principal directory to look people up in")
        try:
            return find_person(self.store, identifier, Links.read(self.links_path))
        except UnknownPerson as exc:  # the same words on every face
            raise AccessRefused(404, field, str(exc)) from None

    def _target(self, reader: Reader, person: str | None) -> Person:
        """The person asked about: ``person`` (admins only) or the caller."""
        if person is not None:
            if not reader.admin:
                raise AccessRefused(
                    403,
                    PERSON_FIELD,
                    "asking about another person needs the admin scope (a personal token with scope admin, or an "
                    "identity in RAG_SERVE_ADMINS); leave person out to ask about yourself",
                )
            return self._person(person.strip(), PERSON_FIELD)
        own = reader.email or reader.principal.user_id
        if not own:
            raise AccessRefused(404, "X-User-Id", "this caller has no identity the directory could know")
        return self._person(own, "X-User-Email" if reader.email else "X-User-Id")

    def whois(self, reader: Reader, person: str | None = None) -> dict[str, object]:
        """The person's accounts, groups (with the grant behind each), private channels and sync instants."""
        return self._target(reader, person).describe()

    def explain(self, document_id: str, reader: Reader, person: str | None = None) -> dict[str, object]:
        """Whether the person may read the document, and the grant or restriction that decides it."""
        target = self._target(reader, person)
        acl = self._document_acl(document_id)
        missing = AccessRefused(404, "document_id", f"document {document_id!r} not found")
        if acl is None:
            raise missing
        assert self.store is not None  # a target was found in it
        explanation = explain(target, document_id, acl, self.store)
        payload = acl.as_payload()
        # About oneself, hidden reads as missing; the caller's own reader must admit it too (a trusted proxy's
        # groups may be narrower than the directory's).
        if person is None and not (explanation.visible and reader.principal.admits(payload)):
            raise missing
        return {"person": target.name, **explanation.as_json()}
