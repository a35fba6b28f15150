"""The vector store interface every engine implements, and the types it speaks."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from rag_pipeline.vectors.sparse import SparseVector

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "bm25"
# A document's title embedded on its own, carried by the document's first child point only: one point per
# document, so a search on it ranks documents, not chunks (field-aware dense retrieval from the index side).
TITLE_VECTOR = "title"
# Qdrant's default RRF constant is 2; the literature (and our evaluation) uses 60.
RRF_K = 60

# Payload fields that filters use; engines that support payload indexes create these.
KEYWORD_FIELDS = (
    "document_id",
    "source",
    "container",
    "parent_id",
    "acl.users",
    "acl.groups",
    "acl.restricted_to",
    "authors",
    "belongs_to",
    # The routed mode looks a link up exactly (retrieval/router.py): without an index, a full payload scan.
    "url",
)
BOOL_FIELDS = ("acl.public",)
DATETIME_FIELDS = ("created", "updated")
FLOAT_FIELDS = ("version",)


@dataclass(frozen=True)
class DenseSearch:
    """How dense queries are answered: the engine's HNSW graph (default) or an exact scan of every point.

    ``m`` and ``ef_construct`` shape the graph when a collection is created (Qdrant's defaults); ``hnsw_ef`` is
    the candidate list per query (more: higher recall, slower). Segments smaller than
    ``full_scan_threshold_kb`` of vectors, and filters matching fewer points than that, are scanned exactly by
    the engine anyway, so small indexes and narrow ACLs lose nothing to HNSW."""

    exact: bool = False
    # 128: at 100k-300k text-like points it keeps 0.986-0.996 of the exact top 10 (0.96-0.975 under a 10 % ACL);
    # 256 keeps 0.99 under the ACL but nearly doubles the filtered hybrid query (9.5 -> 17.6 ms p50 at 100k).
    hnsw_ef: int = 128
    m: int = 16
    ef_construct: int = 100
    full_scan_threshold_kb: int = 10_000
    # The title vector's own threshold. Only one point in several carries it, so its vectors stay under the
    # collection's threshold long after the graph pays off, and the engine then answers a filtered title search
    # by walking every point the filter matches (2.1 ms vs 0.55 ms unfiltered on the demo's 20k Jira points).
    title_full_scan_threshold_kb: int = 1_000
    # The extra graph links per large payload value (source, big groups and containers, the dates) the engine
    # builds beside the main graph: None keeps the engine's default (= m). 0 builds none: a graph build at a
    # million children several times faster (bench/search_million.py), filtered searches kept by the main graph
    # and the payload indexes (a narrow ACL is scanned exactly anyway). Embedded engine only.
    payload_m: int | None = None
    # Dense vectors also kept as int8 (scalar quantization, in RAM) and searched so, the top candidates rescored
    # on the float vectors: "none" or "int8". Fixed when the collection is created. Embedded engine only.
    quantization: Literal["none", "int8"] = "none"

    def describe(self) -> str:
        """What a report says about the dense search it ran with."""
        if self.exact:
            return "exact"
        extra = "".join(
            (
                f", payload_m={self.payload_m}" if self.payload_m is not None else "",
                f", {self.quantization} quantization" if self.quantization != "none" else "",
            )
        )
        return f"hnsw (m={self.m}, ef_construct={self.ef_construct}, ef={self.hnsw_ef}{extra})"


@dataclass(frozen=True)
class CollectionNames:
    """Names of the child (searchable) and parent (text) collections."""

    children: str = "rag_children"
    parents: str = "rag_parents"

    @classmethod
    def with_prefix(cls, prefix: str) -> CollectionNames:
        return cls(children=f"{prefix}_children", parents=f"{prefix}_parents")


@dataclass
class StorePoint:
    """One point: id, payload and (for children) dense and sparse vectors; a document's first child also
    carries the title vector (:data:`TITLE_VECTOR`)."""

    id: str
    payload: dict[str, Any]
    dense: Sequence[float] | None = None
    sparse: SparseVector | None = None
    title: Sequence[float] | None = None


@dataclass(frozen=True)
class DensePrefetch:
    """One more dense list in a hybrid search: ``vector`` searched against the named vector ``using``
    (:data:`DENSE_VECTOR`: child chunks; :data:`TITLE_VECTOR`: document titles)."""

    vector: Sequence[float]
    using: str = DENSE_VECTOR


# For :meth:`VectorStore.remember_fields`: every payload field.
ALL_PAYLOAD = "*"


@dataclass(frozen=True)
class Hit:
    """A scored search result."""

    id: str
    score: float
    payload: dict[str, Any]


@dataclass(frozen=True)
class PointRef:
    """Where a document's point is, and which version of the document wrote it."""

    id: str
    document_id: str
    version: float


@dataclass(frozen=True)
class IndexedAcl:
    """The ``acl`` payload of a document's points, order-free (Slack lists a channel's members in no fixed
    order, so two listings of the same members must compare equal)."""

    public: bool = False
    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    # A restricted Jira comment's own restriction: a reader must also hold one of these (see ``Acl``).
    restricted_to: frozenset[str] = frozenset()

    @classmethod
    def from_payload(cls, value: Any) -> IndexedAcl | None:
        """The ``acl`` payload value as written (``{"public", "users", "groups"[, "restricted_to"]}``); None when
        absent."""
        if not isinstance(value, dict):
            return None
        return cls(
            public=bool(value.get("public")),
            users=frozenset(str(u) for u in value.get("users") or ()),
            groups=frozenset(str(g) for g in value.get("groups") or ()),
            restricted_to=frozenset(str(g) for g in value.get("restricted_to") or ()),
        )

    def as_payload(self) -> dict[str, Any]:
        """The payload shape :meth:`Principal.admits` reads."""
        payload: dict[str, Any] = {"public": self.public, "users": sorted(self.users), "groups": sorted(self.groups)}
        if self.restricted_to:
            payload["restricted_to"] = sorted(self.restricted_to)
        return payload


@dataclass(frozen=True)
class IndexedDocument:
    """A document as the index holds it: the version, content hash and ACL its points were written with."""

    document_id: str
    version: float
    content_hash: str
    acl: IndexedAcl | None = None


@dataclass(frozen=True)
class AclCondition:
    """The reader a search runs as: a point matches when it is public, names one of the user's ids, or names one
    of the groups. Engines put this in every prefetch and in the final query."""

    user_ids: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class SearchFilter:
    """Engine-neutral filter: every given condition must hold (and the ACL, when given, must admit)."""

    document_ids: tuple[str, ...] | None = None
    sources: tuple[str, ...] | None = None
    # Sources left out (tool definitions, which only tool search reads).
    excluded_sources: tuple[str, ...] | None = None
    containers: tuple[str, ...] | None = None
    # Documents with any of these authors (payload ``authors``: the names a source gives, e.g. Slack display
    # names, Jira display names).
    authors: tuple[str, ...] | None = None
    acl: AclCondition | None = None
    # ISO-8601 bounds on the document's last activity (payload ``updated``): [updated_from, updated_to).
    updated_from: str | None = None
    updated_to: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Condition:
    """One payload condition: ``any_of`` (match any), ``value`` (match exactly), a datetime range, or
    ``is_empty`` (the field is missing or an empty list)."""

    key: str
    any_of: tuple[Any, ...] | None = None
    value: Any = None
    gte: str | None = None
    lt: str | None = None
    is_empty: bool = False


@dataclass(frozen=True)
class FilterSpec:
    """``must`` conditions all hold; when ``should`` is non-empty at least one of them holds too; and when ``also``
    is non-empty, at least one of it holds as well (a second OR group, ANDed: the ACL's restriction); none of
    ``must_not`` holds."""

    must: tuple[Condition, ...] = ()
    should: tuple[Condition, ...] = ()
    also: tuple[Condition, ...] = ()
    must_not: tuple[Condition, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.must and not self.should and not self.also and not self.must_not


def filter_spec(flt: SearchFilter | None) -> FilterSpec:
    """Translate a :class:`SearchFilter` into conditions; each engine builds its own types from them."""
    if flt is None:
        return FilterSpec()
    must = [
        Condition(key, any_of=tuple(values))
        for key, values in (
            ("document_id", flt.document_ids),
            ("source", flt.sources),
            ("container", flt.containers),
            ("authors", flt.authors),
        )
        if values is not None
    ]
    if flt.updated_from is not None or flt.updated_to is not None:
        must.append(Condition("updated", gte=flt.updated_from, lt=flt.updated_to))
    must.extend(Condition(key, value=value) for key, value in flt.extra.items())
    should: list[Condition] = []
    also: list[Condition] = []
    if flt.acl is not None:
        should.append(Condition("acl.public", value=True))
        if flt.acl.user_ids:
            should.append(Condition("acl.users", any_of=tuple(flt.acl.user_ids)))
        if flt.acl.groups:
            should.append(Condition("acl.groups", any_of=tuple(flt.acl.groups)))
        # A restricted comment admits only readers who also hold one of its restriction's groups; every other
        # document has no restriction (the field is absent), which IsEmpty matches.
        also.append(Condition("acl.restricted_to", is_empty=True))
        if flt.acl.groups:
            also.append(Condition("acl.restricted_to", any_of=tuple(flt.acl.groups)))
    must_not = (Condition("source", any_of=flt.excluded_sources),) if flt.excluded_sources else ()
    return FilterSpec(tuple(must), tuple(should), tuple(also), must_not)


@dataclass(frozen=True)
class Fusion:
    """How hybrid search merges the dense and sparse candidate lists inside Qdrant.

    ``rrf``: Σ 1 / (k + rank_i) (rank from 0) with k pinned to 60 (Qdrant's own default is 2); ``weights``
    (dense, sparse) gives Qdrant's weighted RRF, Σ 1 / ((rank_i + 1) / w_i + k − 1): a weight stretches or
    shrinks its list's ranks. ``dbsf``: distribution-based score fusion (each list's
    scores normalised by mean ± 3σ, then summed).
    """

    method: Literal["rrf", "dbsf"] = "rrf"
    k: int = RRF_K
    # (dense, sparse, then one per extra prefetch in the order the search lists them)
    weights: tuple[float, ...] | None = None


DEFAULT_FUSION = Fusion()


def describe_fusion(fusion: Fusion) -> str:
    """``rrf(k=60)``, ``rrf(k=10, weights=1.2/0.8)`` or ``dbsf``: how reports name a fusion."""
    if fusion.method == "dbsf":
        return "dbsf"
    weights = ", weights=" + "/".join(f"{w:g}" for w in fusion.weights) if fusion.weights else ""
    return f"rrf(k={fusion.k}{weights})"


# Reads the points of a collection matching a filter, with only the named payload fields: each engine's scroll.
Scroll = Callable[[str, SearchFilter | None, list[str]], Iterable[Any]]
# Documents per filter when listing points by document id (keeps each filter's match list small).
_IDS_PER_FILTER = 512


def id_batches(document_ids: Sequence[str]) -> Iterator[tuple[str, ...]]:
    """``document_ids`` in slices small enough for one filter each."""
    for i in range(0, len(document_ids), _IDS_PER_FILTER):
        yield tuple(document_ids[i : i + _IDS_PER_FILTER])


def scroll_point_refs(scroll: Scroll, collection: str, document_ids: Sequence[str]) -> list[PointRef]:
    """Every point of ``collection`` belonging to ``document_ids``, with the version that wrote it."""
    refs: list[PointRef] = []
    for batch in id_batches(document_ids):
        records = scroll(collection, SearchFilter(document_ids=batch), ["document_id", "version"])
        refs.extend(PointRef(str(r.id), r.payload["document_id"], float(r.payload["version"])) for r in records)
    return refs


@dataclass
class ContainerSummary:
    """One container (a channel, a project) as far as a filter lets see it: its documents and newest activity,
    and the first title read (what names a channel whose id means nothing to a person)."""

    source: str
    container: str
    documents: int = 0
    latest: str | None = None
    sample_title: str = ""


def scroll_containers(scroll: Scroll, parents: str, flt: SearchFilter | None) -> list[ContainerSummary]:
    """Every (source, container) with a parent point matching ``flt``: documents counted once each (a long
    document has several parents), the newest ``updated``."""
    found: dict[tuple[str, str], ContainerSummary] = {}
    seen: set[str] = set()
    for record in scroll(parents, flt, ["document_id", "source", "container", "updated", "title"]):
        payload = record.payload
        key = (str(payload.get("source", "")), str(payload.get("container", "")))
        summary = found.setdefault(key, ContainerSummary(*key, sample_title=str(payload.get("title") or "")))
        if payload["document_id"] not in seen:
            seen.add(payload["document_id"])
            summary.documents += 1
        updated = payload.get("updated")
        if updated and (summary.latest is None or str(updated) > summary.latest):
            summary.latest = str(updated)
    return sorted(found.values(), key=lambda c: (c.source, c.container))


def scroll_indexed_documents(scroll: Scroll, parents: str, flt: SearchFilter | None) -> dict[str, IndexedDocument]:
    """Every document with a parent point matching ``flt``, by id, as the index holds it."""
    records = scroll(parents, flt, ["document_id", "version", "content_hash", "acl"])
    return {
        r.payload["document_id"]: IndexedDocument(
            r.payload["document_id"],
            float(r.payload["version"]),
            r.payload["content_hash"],
            IndexedAcl.from_payload(r.payload.get("acl")),
        )
        for r in records
    }


class VectorStore(Protocol):
    """What the pipeline needs from a Qdrant engine. Implemented by the embedded qdrant-edge engine
    and by qdrant-client (server, or its local mode as the server-API test double)."""

    engine: str
    names: CollectionNames
    dense_search: DenseSearch

    def create_collections(self, dense_dimension: int) -> None: ...

    def dense_vector_names(self) -> frozenset[str]:
        """The named dense vectors the child collection holds (empty before it exists); indexes created
        before :data:`TITLE_VECTOR` existed lack it until they are re-created (Qdrant cannot add a named vector to
        a collection), and writes to them drop it."""
        ...

    def optimize(self) -> bool:
        """Build search structures over what was written (blocking where the engine does not do it in the
        background); True when anything changed."""
        ...

    def index_info(self) -> dict[str, Any]:
        """What the index records about how it was built (e.g. ``dense_model``); {} before the first write."""
        ...

    def record_index_info(self, info: dict[str, Any]) -> None:
        """Merge ``info`` into the index's record (the child collection must exist)."""
        ...

    def upsert(self, collection: str, points: Sequence[StorePoint]) -> None: ...

    def delete_ids(self, collection: str, ids: Sequence[str]) -> None: ...

    def delete_documents(self, collection: str, document_ids: Sequence[str]) -> None: ...

    def set_document_payload(self, collection: str, document_ids: Sequence[str], payload: dict[str, Any]) -> None:
        """Replace the top-level ``payload`` keys on every point of ``document_ids`` (other keys and the
        vectors stay): an ACL change without re-embedding."""
        ...

    def document_points(self, collection: str, document_ids: Sequence[str]) -> list[PointRef]: ...

    def indexed_documents(self, flt: SearchFilter | None = None) -> dict[str, IndexedDocument]:
        """Every document with a parent point matching ``flt``, by id."""
        ...

    def parent_payloads(self, flt: SearchFilter | None, fields: Sequence[str]) -> list[dict[str, Any]]:
        """The named payload fields of every parent point matching ``flt`` (a document may have several)."""
        ...

    def containers(self, flt: SearchFilter | None = None) -> list[ContainerSummary]:
        """Every (source, container) with a document matching ``flt`` (a reader's ACL: what they may see)."""
        ...

    def count(self, collection: str, flt: SearchFilter | None = None) -> int: ...

    def retrieve(self, collection: str, ids: Sequence[str], fields: Sequence[str] | None = None) -> list[Hit]:
        """The points of ``ids`` that exist, with ``fields`` of their payload (all when None)."""
        ...

    def search_dense(
        self, vector: Sequence[float], limit: int, flt: SearchFilter | None = None, fields: Sequence[str] | None = None
    ) -> list[Hit]:
        """The nearest children; ``fields``: the payload fields to read (all when None: reading every field of
        every hit costs as much as the search itself)."""
        ...

    def search_sparse(
        self, vector: SparseVector, limit: int, flt: SearchFilter | None = None, fields: Sequence[str] | None = None
    ) -> list[Hit]:
        """The best BM25 children; ``fields`` as for :meth:`search_dense`."""
        ...

    def search_hybrid(
        self,
        dense: Sequence[float],
        sparse: SparseVector,
        limit: int,
        prefetch_limit: int = 50,
        flt: SearchFilter | None = None,
        fusion: Fusion = DEFAULT_FUSION,
        extra: Sequence[DensePrefetch] = (),
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Dense and sparse prefetches fused, plus one prefetch per ``extra`` (e.g. the query's title line
        against the chunks, the query against document titles); ``fusion.weights`` then has an entry for
        each, after dense and sparse. ``fields`` as for :meth:`search_dense`."""
        ...

    def remember_fields(self, fields: Sequence[str]) -> None:
        """Keep these payload fields of every child in memory where that makes searches reading no other field
        cheaper (the embedded engine: many deep searches over one open store, as an evaluation runs); a no-op
        elsewhere. Writes through the store drop what was kept."""
        ...

    def close(self) -> None: ...
