"""Request ids: every HTTP request (the API, the OpenAI-compatible routes, /mcp) has one, taken from the caller's
``X-Request-Id`` when it is a plain id and made otherwise, returned on the response (errors included) and put in
every line the service logs while answering it, so a caller's report and the operator's log meet."""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar

from rag_pipeline.serving.tracing import CURRENT_TRACE

HEADER = "X-Request-Id"
# A caller's id is kept only when it cannot forge a log line or smuggle anything: letters, digits and . _ : -.
_ACCEPTED = re.compile(r"[A-Za-z0-9._:-]{1,64}")
CURRENT: ContextVar[str] = ContextVar("rag_request_id", default="-")


def request_id_from(sent: str | None) -> str:
    """The caller's id when it is a plain one, else a new one (32 hex digits)."""
    if sent is not None and _ACCEPTED.fullmatch(sent.strip()):
        return sent.strip()
    return uuid.uuid4().hex


class RequestIdFilter(logging.Filter):
    """Gives every record ``request_id``: the id of the request being answered, or ``-`` outside one."""

    def filter(self, record: logging.LogRecord) -> bool:
        trace_id = CURRENT_TRACE.get()
        # The caller's W3C trace id beside the request id, when it sent a traceparent.
        record.request_id = CURRENT.get() if trace_id == "-" else f"{CURRENT.get()} trace={trace_id}"
        return True
