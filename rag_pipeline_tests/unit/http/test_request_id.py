"""``rag_pipeline.http.request_id``: a caller's plain ``X-Request-Id`` is kept, anything that could forge a log
line is replaced by a new id, and every log record carries the id of the request being answered (with the
caller's trace id when it sent one)."""

from __future__ import annotations

import logging

import pytest

from rag_pipeline.http.request_id import CURRENT, HEADER, RequestIdFilter, request_id_from
from rag_pipeline.serving.tracing import CURRENT_TRACE


@pytest.mark.parametrize("sent", ["abc-123", "ticket.42:retry_2", "a" * 64, "  padded-id  "])
def test_a_plain_id_is_kept(sent: str) -> None:
    assert request_id_from(sent) == sent.strip()


@pytest.mark.parametrize("sent", [None, "", "a" * 65, "line\nforged", "spaces inside", 'quote"d', "ü"])
def test_anything_else_gets_a_new_id(sent: str | None) -> None:
    made = request_id_from(sent)
    assert made != sent and len(made) == 32 and set(made) <= set("0123456789abcdef")
    assert request_id_from(sent) != made  # new every time


def _record() -> logging.LogRecord:
    return logging.LogRecord("rag", logging.INFO, "", 0, "answered", None, None)


def test_every_record_carries_the_current_request_id_and_trace() -> None:
    check = RequestIdFilter()
    outside = _record()
    assert check.filter(outside) and outside.request_id == "-"  # type: ignore[attr-defined]
    token = CURRENT.set("req-1")
    try:
        inside = _record()
        check.filter(inside)
        assert inside.request_id == "req-1"  # type: ignore[attr-defined]
        trace = CURRENT_TRACE.set("4bf92f3577b34da6a3ce929d0e0e4736")
        try:
            traced = _record()
            check.filter(traced)
            assert traced.request_id == "req-1 trace=4bf92f3577b34da6a3ce929d0e0e4736"  # type: ignore[attr-defined]
        finally:
            CURRENT_TRACE.reset(trace)
    finally:
        CURRENT.reset(token)
    assert HEADER == "X-Request-Id"
