"""How ``rag-pipeline`` reports failures: one ``error: <message>`` line for what a person can fix, and a
traceback only with ``--debug``.

Exit status: 2 for usage and configuration (an option, an environment variable, a path the user gave, an
index built with another model), 1 for runtime failures (a service that cannot be reached, a run that
failed, a source of which nothing could be read, anything unexpected). ``explain`` sorts an exception into
one of those or into "unexpected".
"""

from __future__ import annotations

import sys
import urllib.error
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from pydantic import ValidationError
from rich.console import Console

from rag_pipeline.composition import IndexMissing
from rag_pipeline.evaluation.beir import BeirFormatError
from rag_pipeline.index.index_info import IndexModelMismatch
from rag_pipeline.index.store_lock import StoreBusyError
from rag_pipeline.retrieval.rerank.cross_encoder import CrossEncoderLoadError
from rag_pipeline.settings import SettingsError
from rag_pipeline.sources.identifiers import InvalidIdentifier
from rag_pipeline.sources.problems import SourceError, UnreadableSource

USAGE = 2
FAILURE = 1
INTERRUPTED = 130  # what shells report for Ctrl-C (128 + SIGINT)

# Appended to an unexpected error's line when the traceback was not printed.
DEBUG_HINT = "rerun with --debug for the traceback"

# Configuration and input problems: the message already says what to change.
_USAGE_ERRORS: tuple[type[BaseException], ...] = (
    IndexMissing,
    SettingsError,
    SourceError,
    InvalidIdentifier,
    IndexModelMismatch,
    BeirFormatError,
    CrossEncoderLoadError,
)
# Path problems; reported with the path, since the path is what the user gave and can fix.
_PATH_ERRORS: tuple[type[OSError], ...] = (
    FileNotFoundError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
    FileExistsError,
)
_READ_ONLY_FILE_SYSTEM = 30  # errno EROFS: not a PermissionError subclass, same remedy


class CommandError(Exception):
    """A failure a person can fix: printed as one ``error:`` line, exit status ``code``, no traceback."""

    def __init__(self, message: str, code: int = USAGE) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Explanation:
    """The one line to print and the exit status; ``expected`` is False for what looks like a bug."""

    message: str
    code: int
    expected: bool = True


def one_line(text: str) -> str:
    """``text`` on one line: multi-line messages (pydantic, tracebacks in messages) would break the contract."""
    return " ".join(text.split())


def error_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling (``raise X from None`` keeps the
    context, which is how a source's one-line error still tells that the network was the cause)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def redact_url(url: str) -> str:
    """The URL without credentials (``user:token@host`` never reaches a terminal or a log)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def connection_failure(exc: BaseException) -> tuple[str | None, str] | None:
    """(URL if known, reason) when ``exc`` is a failure to reach a server, else None.

    Covers what the clients the project uses raise: slack-sdk (``urllib.error.URLError``), atlassian-python-api
    and the Jira reader (``requests``), openai and qdrant-client (``httpx``, wrapped by each client)."""
    import httpx
    import requests

    if isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
        request = exc.request
        url = request.url if request is not None and request.url else None
        return url, _reason(exc)
    if isinstance(exc, httpx.TransportError):
        try:
            url = str(exc.request.url)
        except RuntimeError:  # httpx raises when the error carries no request
            url = None
        return url, _reason(exc)
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        reason = exc.reason
        text = reason.strerror if isinstance(reason, OSError) and reason.strerror else str(reason)
        return None, text
    # BrokenPipeError is a ConnectionError too, but it means stdout was closed (`... | head`), not a server.
    if isinstance(exc, ConnectionError | TimeoutError) and not isinstance(exc, BrokenPipeError):
        return None, exc.strerror or type(exc).__name__
    return None


def _reason(exc: BaseException) -> str:
    """The innermost cause's text: clients wrap 'Connection refused' in several layers of retry messages."""
    for inner in reversed(list(error_chain(exc))):
        if isinstance(inner, OSError) and inner.strerror:
            return inner.strerror
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def find_connection_failure(exc: BaseException) -> tuple[str | None, str] | None:
    """The first connection failure in ``exc``'s chain (see :func:`connection_failure`)."""
    for inner in error_chain(exc):
        found = connection_failure(inner)
        if found is not None:
            return found
    return None


def _user_exception(exc: BaseException) -> tuple[BaseException, str | None]:
    """Dagster's wrapper around a step's own error, unwrapped (with the step's key when there is one).

    In-process runs with ``raise_on_error=True`` re-raise the step's exception itself in Dagster 1.13; the
    wrappers still appear for resource initialisation and in other execution paths."""
    import dagster as dg

    step = None
    while isinstance(exc, dg.DagsterUserCodeExecutionError) and exc.user_exception is not None:
        step = getattr(exc, "step_key", None) or step
        exc = exc.user_exception
    return exc, step


def explain(exc: BaseException, urls: Mapping[str, str] | None = None) -> Explanation:
    """The one line and exit status for ``exc``; unexpected errors say so (the caller adds the ``--debug``
    hint). ``urls`` maps configured server addresses to the variable that sets each, so a connection
    failure names the variable to check."""
    import dagster as dg

    exc, step = _user_exception(exc)
    where = f" (step {step})" if step else ""
    if isinstance(exc, CommandError):
        return Explanation(one_line(str(exc)), exc.code)
    reached = find_connection_failure(exc)
    if reached is not None:
        url, reason = reached
        if isinstance(exc, SourceError):  # the source's sentence already says which variable to check
            return Explanation(one_line(f"{exc}{where}"), FAILURE)
        target = redact_url(url) if url else "the configured server"
        variable = next((v for prefix, v in (urls or {}).items() if url and url.startswith(prefix.rstrip("/"))), None)
        if variable:
            target += f" ({variable})"
        return Explanation(one_line(f"could not connect to {target}: {reason}{where}"), FAILURE)
    if isinstance(exc, UnreadableSource):  # the data failed, not the command line: nothing to index
        return Explanation(one_line(f"{exc}{where}"), FAILURE)
    if isinstance(exc, _USAGE_ERRORS):
        return Explanation(one_line(f"{exc}{where}"), USAGE)
    if isinstance(exc, _PATH_ERRORS) or (isinstance(exc, OSError) and exc.errno == _READ_ONLY_FILE_SYSTEM):
        return Explanation(one_line(f"{describe_os_error(exc)}{where}"), USAGE)
    if isinstance(exc, StoreBusyError):  # another process held the index past the configured wait
        return Explanation(one_line(f"{exc}{where}"), FAILURE)
    if isinstance(exc, dg.Failure) and exc.description:
        return Explanation(one_line(f"{exc.description}{where}"), FAILURE)
    text = one_line(str(exc)) or "(no message)"
    return Explanation(f"unexpected {type(exc).__name__}: {text}{where}", FAILURE, expected=False)


def describe_os_error(exc: OSError) -> str:
    """``<path>: <reason>`` (both paths for a rename), without Python's ``[Errno N]`` prefix."""
    reason = (exc.strerror or type(exc).__name__).lower()
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    return f"{' -> '.join(paths)}: {reason}" if paths else reason


def validation_summary(exc: ValidationError) -> str:
    """A pydantic error as ``field: problem; ...`` on one line (its ``str`` spans several lines with URLs)."""
    parts = []
    for error in exc.errors():
        location = ".".join(str(p) for p in error["loc"])
        parts.append(f"{location}: {error['msg']}" if location else error["msg"])
    return "; ".join(parts)


def compact(exc: BaseException) -> str:
    """``exc``'s message with a pydantic validation error it wraps reduced to one line."""
    text = str(exc)
    cause = exc.__cause__
    if isinstance(cause, ValidationError) and text.endswith(str(cause)):
        text = text[: len(text) - len(str(cause))] + validation_summary(cause)
    return one_line(text)


def print_error(message: str) -> None:
    """``error: <message>`` on stderr: red on a terminal, never wrapped, never read as rich markup."""
    console = Console(stderr=True, soft_wrap=True)
    console.print(f"error: {message}", style="red", markup=False, highlight=False)


def print_traceback(exc: BaseException) -> None:
    import traceback

    traceback.print_exception(exc, file=sys.stderr)
