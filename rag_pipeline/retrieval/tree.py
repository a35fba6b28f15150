"""The reader's map of what they can search (the design's ``query_tree_list``): sources, then containers (channels,
projects) with their document counts and newest activity, only where the reader may read a document.

The tree is read from the index with the reader's own ACL filter, the one every search uses, so a container shows
up only when the reader may read at least one of its documents: a private channel's name never reaches a
non-member. Each container has a path, ``<source>/<name>`` (``slack/#general``, ``jira/OPS``), which filters the
tree by prefix and a search by the same prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from rag_pipeline.index.store import ContainerSummary, VectorStore
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.retriever import search_filter


@dataclass(frozen=True)
class ContainerNode:
    """One container the reader may search in."""

    source: str
    container: str
    name: str
    path: str
    documents: int
    latest: str | None


def container_name(summary: ContainerSummary) -> str:
    """A person's name for the container: the ``#channel`` a title starts with ("#general: …"), else its id (a
    project key is already a name)."""
    head, sep, _ = summary.sample_title.partition(":")
    return head if sep and head.startswith("#") and " " not in head else summary.container


def normalized(prefix: str | None) -> str:
    return (prefix or "").strip().strip("/").lower()


def reader_tree(store: VectorStore, reader: Principal, prefix: str | None = None) -> list[ContainerNode]:
    """The containers ``reader`` may read a document in, under ``prefix`` (a path's beginning, any case)."""
    if reader.all_documents:
        raise ValueError("the tree is a reader's: it never lists without access control")
    nodes = []
    # A search's own filter with no scope: the reader's ACL, and no tool catalog (tool search lists tools).
    for summary in store.containers(search_filter(reader)):
        name = container_name(summary)
        path = f"{summary.source}/{name}"
        nodes.append(ContainerNode(summary.source, summary.container, name, path, summary.documents, summary.latest))
    wanted = normalized(prefix)
    return [n for n in nodes if not wanted or n.path.lower().startswith(wanted)]


def path_scope(
    nodes: list[ContainerNode], sources: Sequence[str] | None, containers: Sequence[str] | None
) -> tuple[list[str], list[str]] | None:
    """The sources and containers a search under a path covers: the path's containers (``nodes``, the reader's own
    tree) within the caller's own ``sources``/``containers`` filters, which a path narrows and never replaces; None
    when nothing is left."""
    kept = [n for n in nodes if (not sources or n.source in sources) and (not containers or n.container in containers)]
    if not kept:
        return None
    return sorted({n.source for n in kept}), sorted({n.container for n in kept})


def tree_json(nodes: list[ContainerNode]) -> list[dict[str, object]]:
    """Sources, each with its containers (largest first) and totals."""
    sources: dict[str, list[ContainerNode]] = {}
    for node in nodes:
        sources.setdefault(node.source, []).append(node)
    return [
        {
            "source": source,
            "documents": sum(n.documents for n in members),
            "latest": max((n.latest for n in members if n.latest), default=None),
            "containers": [asdict(n) for n in sorted(members, key=lambda n: (-n.documents, n.path))],
        }
        for source, members in sorted(sources.items())
    ]
