"""``serving/result_cache.py``: the lookup counting both result caches (per-process and Redis) share."""

from __future__ import annotations

import threading

from rag_pipeline.serving.result_cache import LookupCounts, ResultCache


def test_an_empty_but_cached_value_is_a_hit_and_only_none_is_a_miss() -> None:
    counts = LookupCounts()
    assert counts.counted([]) == [] and counts.counted(0) == 0 and counts.counted("") == ""
    assert counts.counted(None) is None
    assert (counts.hits, counts.misses) == (3, 1)


def test_the_per_process_cache_counts_through_lookup_counts_and_keeps_an_empty_result() -> None:
    cache: ResultCache[list[str]] = ResultCache(10, 300)
    cache.put("no results", [])
    assert cache.get("no results") == [] and cache.get("never stored") is None
    assert (cache.hits, cache.misses) == (1, 1)


def test_lookups_from_many_threads_lose_no_count() -> None:
    counts = LookupCounts()

    def look() -> None:
        for i in range(2_000):
            counts.counted(None if i % 2 else i)

    threads = [threading.Thread(target=look) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (counts.hits, counts.misses) == (8_000, 8_000)
