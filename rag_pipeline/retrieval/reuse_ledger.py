"""What work reused inside an evaluation's shared work first cost, so each search's latency still counts it.

An evaluation's arms share searches, rerank signals and feature matrices (``Retriever.shared_work``): the reranked
arm reuses the hybrid arm's list and its own training candidates. Its latency must still be that of a search
served alone, so whatever reuses work notes the seconds that work took when it was first done, and the evaluation
adds them to the search that reused it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_LEDGER: ContextVar[list[float] | None] = ContextVar("reused_seconds", default=None)


def note_reused(seconds: float) -> None:
    """Work that took ``seconds`` when first done was reused now (counted only inside :func:`counting_reused`)."""
    ledger = _LEDGER.get()
    if ledger is not None:
        ledger[0] += seconds


@contextmanager
def counting_reused() -> Iterator[Callable[[], float]]:
    """Within the block, the seconds of reused work add up; the yielded function reads the sum so far."""
    ledger = [0.0]
    token = _LEDGER.set(ledger)
    try:
        yield lambda: ledger[0]
    finally:
        _LEDGER.reset(token)
