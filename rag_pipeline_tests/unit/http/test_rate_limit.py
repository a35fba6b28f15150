"""The per-person request budget (issue 47, part 6): N requests in any 60 s per identity, Retry-After the seconds
until the oldest leaves the window, identities independent."""

from __future__ import annotations

import pytest

from rag_pipeline.http.rate_limit import PersonRateLimit


def test_a_person_over_the_budget_waits_until_the_window_moves_and_others_are_unaffected() -> None:
    now = [1000.0]
    limit = PersonRateLimit(3, clock=lambda: now[0])
    assert [limit.allow("alice@acme.test") for _ in range(3)] == [0, 0, 0]
    now[0] += 20
    assert limit.allow("alice@acme.test") == 40  # the first request leaves the window in 40 s
    assert limit.allow("bob@acme.test") == 0
    now[0] += 40
    assert limit.allow("alice@acme.test") == 0
    with pytest.raises(ValueError, match="RAG_SERVE_RATE_PER_MINUTE"):
        PersonRateLimit(0)
