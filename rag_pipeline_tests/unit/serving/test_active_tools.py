"""Each caller's active tool set (serving/active_tools.py): it starts as the critical set, takes only indexed
tools and no more than its bound (a refusal adds nothing), is kept per caller and session, drops the least
recently used set past the number of sets, expires when untouched, and survives a round trip through its file."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.serving.active_tools import (
    ActiveSetLimits,
    ActiveSetRefused,
    ActiveToolSets,
    CallerKey,
    load_sets,
    save_sets,
)

KNOWN = {"a", "b", "c", "d", "critical"}
CRITICAL = ("critical",)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_set_starts_critical_takes_known_tools_and_refuses_past_its_bound() -> None:
    sets = ActiveToolSets(ActiveSetLimits(max_tools=3))
    me = CallerKey("U1")
    assert sets.active(me, CRITICAL) == ["critical"]
    assert sets.activate(me, ["a", "a"], KNOWN, CRITICAL) == ["critical", "a"]
    with pytest.raises(ActiveSetRefused) as unknown:
        sets.activate(me, ["b", "zzz"], KNOWN, CRITICAL)
    assert unknown.value.status == 404 and unknown.value.field == "names" and "'zzz'" in str(unknown.value)
    with pytest.raises(ActiveSetRefused) as full:
        sets.activate(me, ["b", "c"], KNOWN, CRITICAL)
    assert full.value.status == 409 and "at most 3" in str(full.value)
    assert sets.active(me, CRITICAL) == ["critical", "a"]  # neither refusal added anything
    assert sets.deactivate(me, ["a", "not-active"], CRITICAL) == ["critical"]
    sets.activate(me, ["b"], KNOWN, CRITICAL)
    assert sets.reset(me, CRITICAL) == ["critical"]


def test_sets_are_per_caller_and_session_and_the_least_recently_used_goes_first() -> None:
    sets = ActiveToolSets(ActiveSetLimits(max_sets=2))
    one, two, three = CallerKey("U1", "s1"), CallerKey("U1", "s2"), CallerKey("U2", "s1")
    sets.activate(one, ["a"], KNOWN, ())
    sets.activate(two, ["b"], KNOWN, ())
    assert sets.active(one, ()) == ["a"]  # touched: two is now the least recently used
    sets.activate(three, ["c"], KNOWN, ())
    assert len(sets) == 2
    assert sets.active(one, ()) == ["a"] and sets.active(three, ()) == ["c"]
    assert sets.active(two, ()) == []  # dropped, so it starts again


def test_an_untouched_set_expires_and_a_touched_one_does_not() -> None:
    clock = Clock()
    sets = ActiveToolSets(ActiveSetLimits(ttl_seconds=60), clock=clock)
    kept, left = CallerKey("U1"), CallerKey("U2")
    sets.activate(kept, ["a"], KNOWN, CRITICAL)
    sets.activate(left, ["b"], KNOWN, CRITICAL)
    clock.now += 50
    sets.active(kept, CRITICAL)
    clock.now += 50  # 100 s after left's last use, 50 after kept's
    assert sets.active(kept, CRITICAL) == ["critical", "a"]
    assert sets.active(left, CRITICAL) == ["critical"]


def test_sets_survive_their_file_and_expire_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "sets.json"
    limits = ActiveSetLimits(max_tools=5)
    sets = ActiveToolSets(limits)
    me = CallerKey.of(Principal(user_id="U1"), "s1")
    sets.activate(me, ["a", "b"], KNOWN, CRITICAL)
    save_sets(path, sets)
    assert load_sets(path, limits).active(me, CRITICAL) == ["critical", "a", "b"]
    assert load_sets(path, ActiveSetLimits(ttl_seconds=1e-9)).active(me, CRITICAL) == ["critical"]
    path.write_text("{not json")
    assert load_sets(path, limits).active(me, CRITICAL) == ["critical"]  # an unreadable file: fresh sets
