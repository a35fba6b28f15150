"""What every face answers a refused request with: a status, the field at fault and a message.

The use cases raise a subclass (an identity that cannot be used, a whois/explain not allowed, an active set that
cannot take a tool, a request the HTTP service will not answer); the faces turn any of them into their own error
(HTTP's ``{"error", "field"}``, an MCP tool error, a CLI exit code) without knowing which one it is; and the field
a face names when a request model refuses the arguments it was given (:func:`first_invalid`)."""

from __future__ import annotations

from pydantic import ValidationError


class Refusal(Exception):
    """A request refused: ``status`` (an HTTP status; the CLI maps it to its exit code) with a message naming
    ``field`` (the header, parameter or argument at fault; None where no one field is)."""

    def __init__(self, status: int, field: str | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.field = field


def first_invalid(exc: ValidationError, nowhere: str = "arguments") -> tuple[str, str]:
    """The first field a request model refused, dotted (``filters.since``; ``nowhere`` where the error names no
    field), and pydantic's message for it: what a face names when it refuses the arguments it was given."""
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first.get("loc", ())) or nowhere
    return field, str(first.get("msg", "invalid value"))
