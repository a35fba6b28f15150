"""What an issue's resolution says about it, in four classes a ranking model can learn from.

Jira sites name their resolutions freely (the defaults are Fixed, Won't Fix, Duplicate, Incomplete, Cannot
Reproduce, Done, Won't Do, Declined), so the names are folded into classes: an issue closed as a duplicate
points at another issue; a fixed or done one is usually the canonical report of its problem; an open one is
still live; every other resolution (won't fix, invalid, cannot reproduce, a site's own) is "other".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from rag_pipeline.sources.registry import RerankFeature

UNRESOLVED = "Unresolved"  # what Jira shows for an issue without a resolution

ResolutionClass = Literal["duplicate", "fixed", "unresolved", "other"]

_FIXED = frozenset({"fixed", "done", "resolved", "completed", "complete", "implemented", "delivered", "released"})
_DUPLICATE = frozenset({"duplicate", "duplicated", "duplicate issue"})


def resolution_class(name: str | None) -> ResolutionClass | None:
    """The class of a resolution name; ``None`` for a document whose source has no resolutions."""
    if name is None:
        return None
    folded = " ".join(name.lower().split())
    if folded == UNRESOLVED.lower() or not folded:
        return "unresolved"
    if folded in _DUPLICATE:
        return "duplicate"
    if folded in _FIXED:
        return "fixed"
    return "other"


def _is(kind: ResolutionClass) -> Callable[[Any], float]:
    def value(candidate: Any) -> float:
        return 1.0 if resolution_class(candidate.resolution) == kind else 0.0

    return value


# The reranker's columns from a candidate's resolution: an issue closed as a duplicate is rarely the report a
# searcher wants; a fixed one usually is the canonical one (registered as Jira's ``rerank_features``).
RESOLUTION_FEATURES = (
    RerankFeature("is_resolved_duplicate", _is("duplicate")),
    RerankFeature("is_resolved_fixed", _is("fixed")),
    RerankFeature("is_unresolved", _is("unresolved")),
)
