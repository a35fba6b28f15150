"""Progress of long steps: a line at least every tenth of the work or every 30 s, with rate and ETA, also on the
``rag_pipeline.progress`` logger (which the CLI turns into a bar)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from rag_pipeline.vectors.cache import EmbeddingCache, embed_with_cache
from rag_pipeline.vectors.progress import PROGRESS_FIELD, ProgressUpdate, ThroughputReporter


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_reports_every_tenth_every_30_seconds_and_at_the_end(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    lines: list[str] = []
    reporter = ThroughputReporter("embedding", lambda u: lines.append(u.line()), clock=clock)
    caplog.set_level(logging.INFO, logger="rag_pipeline.progress")
    # 1,000 chunks in batches of 50 at 20 chunks/s: a batch every 2.5 s.
    for done in range(50, 1001, 50):
        clock.now += 2.5
        reporter(done, 1000)
    assert [u.done for u in reporter.updates] == [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]
    assert lines[0] == "embedding: 100/1,000 (10%), 20.0/s, ETA 45s"
    assert lines[-1] == "embedding: 1,000/1,000 (100%), 20.0/s"
    # Slow batches of a huge job: time, not share, triggers the report.
    slow = ThroughputReporter("embedding", clock=clock)
    clock.now, slow.started, slow._last_time = 0.0, 0.0, 0.0
    for done in range(256, 2561, 256):
        clock.now += 12.0
        slow(done, 100_000)
    assert [u.done for u in slow.updates] == [768, 1536, 2304]
    assert slow.updates[0].line() == "embedding: 768/100,000 (1%), 21.3/s, ETA 1h 17m"
    # Every report is also on the logger, with its figures attached.
    updates = [getattr(r, PROGRESS_FIELD) for r in caplog.records if hasattr(r, PROGRESS_FIELD)]
    assert len(updates) == 13 and all(isinstance(u, ProgressUpdate) for u in updates)


def test_the_rate_counts_from_when_the_work_starts_not_from_when_the_reporter_was_made() -> None:
    """A step makes its title reporter before embedding its chunks (minutes): the demo once printed
    "jira embedding (titles): 256/2,928 (9%), 0.3/s, ETA 2h 24m" for work that took 20 s."""
    clock = FakeClock()
    titles = ThroughputReporter("titles", clock=clock)
    clock.now += 800.0  # the chunks
    titles(0, 1000)  # the producer: starting now
    clock.now += 10.0
    titles(250, 1000)
    assert titles.updates[0].line() == "titles: 250/1,000 (25%), 25.0/s, ETA 30s"


def test_embedding_announces_its_start_after_the_cache_lookup(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    encode = lambda texts: np.ones((len(texts), 4), dtype=np.float32)  # noqa: E731
    embed_with_cache(["a", "b"], "m", encode, cache)
    calls: list[tuple[int, int]] = []
    texts = ["a", "b", *[f"text {i}" for i in range(5)]]
    embed_with_cache(texts, "m", encode, cache, batch_size=2, on_progress=lambda d, t: calls.append((d, t)))
    assert calls == [(0, 5), (2, 5), (4, 5), (5, 5)]  # only the 5 texts not cached are counted
    calls.clear()
    embed_with_cache(texts, "m", encode, cache, on_progress=lambda d, t: calls.append((d, t)))
    assert calls == []  # all cached: no work, no progress
