"""The reader's tree below the containers (the user-scoped tools design's ``query_tree_list`` with ``root_path`` and
``max_depth``): sources, containers, then the documents in each container and, for Confluence, pages nested under
their parent pages; each node with its kind, level, path, path relative to the root asked for, and counts; the
nodes listed depth first and paged (``offset`` + ``limit``), so a container of 50,000 threads comes a page at a time.

Everything is read with the reader's own ACL filter, the one every search uses: a container is a node only when the
reader may read one of its documents (a private channel's name never reaches a non-member), and a document is a
node only when the reader may read it. A Confluence page whose parent page the reader may not read (or that is not
indexed) hangs from its nearest readable ancestor, or from its space, so a restricted page's title never shows: a
page's name is the last part of its title path, never the ancestors' titles it carries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field

from rag_pipeline.index.store import VectorStore
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.retriever import search_filter
from rag_pipeline.retrieval.tree import ContainerNode, normalized, reader_tree

# Confluence page titles are indexed as "Space › Parent › Page": the page's own name is the last part.
TITLE_SEPARATOR = " › "
# Levels below a root: a Confluence tree deeper than this is rare, and every level is one more pass over the nodes.
MAX_TREE_DEPTH = 32
MAX_TREE_LIMIT = 500
DEFAULT_TREE_LIMIT = 100
# Without root_path and max_depth, the view is the old two levels: sources and their containers.
DEFAULT_TREE_DEPTH = 1
SOURCE_LEVEL, CONTAINER_LEVEL, DOCUMENT_LEVEL = 0, 1, 2
# The parent payload fields a document node needs (``ancestors``: Confluence page ids, root first).
DOCUMENT_FIELDS = ("document_id", "source", "container", "title", "url", "updated", "ancestors", "content_type")


class TreeView(BaseModel):
    """Which part of the reader's tree to list: the node at ``root_path`` (all sources when None) and
    ``max_depth`` levels below it, the depth-first listing cut into pages of ``limit`` from ``offset``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    root_path: str | None = Field(None, min_length=1, max_length=1000)
    max_depth: int = Field(DEFAULT_TREE_DEPTH, ge=0, le=MAX_TREE_DEPTH)
    offset: int = Field(0, ge=0)
    limit: int = Field(DEFAULT_TREE_LIMIT, ge=1, le=MAX_TREE_LIMIT)


@dataclass
class TreeNode:
    """One node of the reader's tree. ``documents``: the readable documents at or under it; ``children``: the
    nodes right under it (whether or not ``max_depth`` lists them), None for a container whose documents the view
    did not read (listed at the depth limit: counting them would read every document)."""

    kind: str  # source, container, document, page
    level: int
    path: str
    relative_path: str
    name: str
    source: str
    container: str | None
    documents: int
    children: int | None
    latest: str | None
    document_id: str | None = None
    url: str | None = None
    below: list[TreeNode] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["below"]
        return out


@dataclass(frozen=True)
class TreePage:
    """One page of the depth-first listing under the root."""

    view: TreeView
    nodes: list[TreeNode]
    total: int

    def to_dict(self) -> dict[str, Any]:
        end = self.view.offset + len(self.nodes)
        return {
            "root_path": self.view.root_path,
            "max_depth": self.view.max_depth,
            "offset": self.view.offset,
            "limit": self.view.limit,
            "total": self.total,
            "next_offset": end if end < self.total else None,
            "nodes": [n.as_dict() for n in self.nodes],
        }


def document_segment(document_id: str) -> str:
    """A document's step in a path: the id's last part (a Jira key, a Slack thread's ts, a Confluence page id),
    escaped so a path never gains a separator from it."""
    return quote(document_id.rsplit(":", 1)[-1], safe="@#.-_~")


def _in_page_tree(payload: dict[str, Any]) -> bool:
    """A page of a page hierarchy: its source records its ``ancestors`` (Confluence pages; a blog post records an
    empty list and its ``content_type``, and is a plain document)."""
    return "ancestors" in payload and payload.get("content_type") in (None, "page")


def _document_name(payload: dict[str, Any]) -> str:
    title = str(payload.get("title") or payload["document_id"])
    # Only a page's own name: the ancestors' titles in its title path ("Space › Parent › Page") are not the node's
    # to show.
    return title.rsplit(TITLE_SEPARATOR, 1)[-1] if "ancestors" in payload else title


def _sorted_nodes(nodes: Iterable[TreeNode]) -> list[TreeNode]:
    return sorted(nodes, key=lambda n: (-n.documents, n.path) if n.level <= CONTAINER_LEVEL else (n.name, n.path))


def _container_documents(container: TreeNode, payloads: Sequence[dict[str, Any]]) -> list[TreeNode]:
    """The document nodes of one container, pages under their nearest readable parent page; the top ones."""
    by_id: dict[str, dict[str, Any]] = {}
    for payload in payloads:  # a long document has several parents: one node
        by_id.setdefault(str(payload["document_id"]), payload)
    parent_of: dict[str, str | None] = {}
    for doc_id, payload in by_id.items():
        prefix = doc_id.rsplit(":", 1)[0]
        ancestors = [f"{prefix}:{a}" for a in payload.get("ancestors") or []]
        # The nearest ancestor the reader may read; an unreadable one is skipped, never named.
        parent_of[doc_id] = next((a for a in reversed(ancestors) if a in by_id and a != doc_id), None)
    kids: dict[str | None, list[str]] = {}
    for doc_id, parent in parent_of.items():
        kids.setdefault(parent, []).append(doc_id)

    def build(doc_id: str, under: TreeNode, seen: frozenset[str]) -> TreeNode:
        payload = by_id[doc_id]
        segment = document_segment(doc_id)
        kind = "page" if _in_page_tree(payload) else "document"
        node = TreeNode(
            kind, under.level + 1, f"{under.path}/{segment}", "", _document_name(payload), container.source,
            container.container, 1, 0, str(payload["updated"]) if payload.get("updated") else None, doc_id,
            payload.get("url") if isinstance(payload.get("url"), str) else None,
        )  # fmt: skip
        # ``seen`` guards against an ancestor cycle in bad data: a page is never its own descendant.
        node.below = _sorted_nodes(build(k, node, seen | {doc_id}) for k in kids.get(doc_id, []) if k not in seen)
        node.children = len(node.below)
        node.documents += sum(b.documents for b in node.below)
        node.latest = max((x for x in [node.latest, *(b.latest for b in node.below)] if x), default=None)
        return node

    return _sorted_nodes(build(d, container, frozenset()) for d in kids.get(None, []))


def _skeleton(containers: Sequence[ContainerNode]) -> list[TreeNode]:
    """Sources with their containers, counts from the containers' summary (no documents read)."""
    sources: dict[str, TreeNode] = {}
    for c in containers:
        source = sources.setdefault(
            c.source, TreeNode("source", SOURCE_LEVEL, c.source, "", c.source, c.source, None, 0, 0, None)
        )
        node = TreeNode(
            "container", CONTAINER_LEVEL, c.path, "", c.name, c.source, c.container, c.documents, None, c.latest
        )
        source.below.append(node)
        source.documents += c.documents
        source.latest = max((x for x in (source.latest, c.latest) if x), default=None)
    for source in sources.values():
        source.below = _sorted_nodes(source.below)
        source.children = len(source.below)
    return sorted(sources.values(), key=lambda s: s.path)


def _nearest(nodes: Sequence[TreeNode], wanted: str) -> TreeNode | None:
    """The node at ``wanted``, else the deepest one above it (None when no source is on the way)."""
    for node in nodes:
        path = node.path.lower()
        if path == wanted:
            return node
        if wanted.startswith(path + "/"):
            return _nearest(node.below, wanted) or node
    return None


def listing_and_view(
    store: VectorStore, reader: Principal, prefix: str | None, view: TreeView
) -> tuple[list[ContainerNode], TreePage]:
    """The containers under ``prefix`` (``GET /v1/tree``'s ``sources``) and the page ``view`` asks for, from one
    read of the reader's containers."""
    containers = reader_tree(store, reader)
    wanted = normalized(prefix)
    listed = [n for n in containers if not wanted or n.path.lower().startswith(wanted)]
    return listed, reader_tree_view(store, reader, view, containers)


def reader_tree_view(
    store: VectorStore, reader: Principal, view: TreeView, known: Sequence[ContainerNode] | None = None
) -> TreePage:
    """The page of the reader's tree that ``view`` asks for (an unknown or unreadable root: no nodes);
    ``known``: the reader's whole :func:`reader_tree` where the caller has it already."""
    if reader.all_documents:
        raise ValueError("the tree is a reader's: it never lists without access control")
    sources = _skeleton(reader_tree(store, reader) if known is None else known)
    wanted = normalized(view.root_path)
    anchors = sources if not wanted else [n for n in [_nearest(sources, wanted)] if n is not None]
    if not anchors:
        return TreePage(view, [], 0)
    deeper = bool(wanted) and anchors[0].path.lower() != wanted
    # Documents are read only when the view reaches them, and only in the containers under the root.
    if deeper or anchors[0].level + view.max_depth >= DOCUMENT_LEVEL:
        containers = [c for a in anchors for c in _containers_under(a)]
        if containers:
            _attach_documents(store, reader, containers)
    if wanted:
        found = _nearest(sources, wanted)
        if found is None or found.path.lower() != wanted:
            return TreePage(view, [], 0)
        anchors = [found]
    deepest = anchors[0].level + view.max_depth
    listed: list[TreeNode] = []
    for root in anchors:
        _walk(root, root.path if wanted else "", deepest, listed)
    end = view.offset + view.limit
    return TreePage(view, listed[view.offset : end], len(listed))


def _containers_under(node: TreeNode) -> list[TreeNode]:
    if node.kind == "container":
        return [node]
    if node.kind == "source":
        return list(node.below)
    return []


def _attach_documents(store: VectorStore, reader: Principal, containers: Sequence[TreeNode]) -> None:
    """Read the readable documents of ``containers`` (one scroll, the reader's filter) and hang them below."""
    flt = search_filter(
        reader,
        sources=sorted({c.source for c in containers}),
        containers=sorted({str(c.container) for c in containers}),
    )
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for payload in store.parent_payloads(flt, DOCUMENT_FIELDS):
        grouped.setdefault((str(payload.get("source")), str(payload.get("container"))), []).append(payload)
    for container in containers:
        container.below = _container_documents(container, grouped.get((container.source, str(container.container)), []))
        container.children = len(container.below)


def _walk(node: TreeNode, root_path: str, deepest: int, out: list[TreeNode]) -> None:
    node.relative_path = node.path[len(root_path) :].lstrip("/") if root_path else node.path
    out.append(node)
    if node.level < deepest:
        for below in node.below:
            _walk(below, root_path, deepest, out)
