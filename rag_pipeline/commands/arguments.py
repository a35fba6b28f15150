"""Validators for command-line values, so a bad value stops at parsing with one line naming the option.

Each is an argparse ``type=`` callable: it takes the string and returns the value, or raises
``argparse.ArgumentTypeError``, which argparse reports as ``argument --top-k: must be at least 1, got -1``.
They also accept values already converted, so a check can run again on parsed arguments.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import NoReturn

from rag_pipeline.commands.errors import USAGE, CommandError, print_error
from rag_pipeline.retrieval.instants import NotAnInstant, utc_instant


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one ``error:`` line, like every other failure of the
    command (argparse's default prints the whole usage block first), with a pointer to ``--help``."""

    def error(self, message: str) -> NoReturn:
        print_error(f"{message} (see `{self.prog} --help`)")
        sys.exit(USAGE)


def at_least(minimum: int) -> Callable[[str | int], int]:
    """A whole number ``>= minimum``."""

    def check(value: str | int) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {value!r}") from None
        if number < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {number}")
        return number

    return check


positive_int = at_least(1)
non_negative_int = at_least(0)


def probability(value: str) -> float:
    """A number from 0 to 1 (a calibrated relevance threshold)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {value!r}") from None
    if not 0.0 <= number <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {value}")
    return number


def query_text(value: str) -> str:
    """A search query with something to search for (an empty one has no terms and no meaningful vector)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("the query is empty")
    return value


def author_name(value: str) -> str:
    """An author to filter on, matched exactly as the index holds it (an empty one could match nothing)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("the author is empty")
    return value


def iso_day(value: str) -> str:
    """A UTC day as ``YYYY-MM-DD``."""
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a day as YYYY-MM-DD, got {value!r}") from None


def iso_instant(value: str) -> str:
    """A day or an ISO 8601 date-time as the index filters on it (``retrieval/instants.py``). Checked here so
    that a bad value names its flag: the engines' own parsers fail deep inside the search with a message that
    names neither the flag nor the value."""
    try:
        return utc_instant(value)
    except NotAnInstant as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _existing(value: str | Path, kind: str, is_kind: Callable[[Path], bool]) -> Path:
    path = Path(value)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{path}: no such {kind}")
    if not is_kind(path):
        raise argparse.ArgumentTypeError(f"{path} is not a {kind}")
    return path


def existing_file(value: str | Path) -> Path:
    """A path to a file that exists (checked before anything is loaded or opened)."""
    return _existing(value, "file", Path.is_file)


def existing_folder(value: str | Path) -> Path:
    """A path to a folder that exists."""
    return _existing(value, "folder", Path.is_dir)


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    """``--data-dir``, as every command that reads or writes the data folder takes it."""
    parser.add_argument("--data-dir", default=None, help="data folder (default: $RAG_DATA_DIR or ./.rag_data)")


def writable_folder(path: Path, what: str, given_by: str) -> Path:
    """``path`` as a folder this process can write, created if missing; else a usage error naming ``what``
    and the option or variable that gave it. Checked before a run, whose first write would otherwise fail
    deep inside Dagster's instance setup."""
    if path.exists() and not path.is_dir():
        raise CommandError(f"the {what} {path} ({given_by}) is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        # Permission bits alone do not tell (root, ACLs, read-only mounts): try a real write.
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        reason = (exc.strerror or type(exc).__name__).lower()
        raise CommandError(f"the {what} {path} ({given_by}) cannot be written: {reason}") from exc
    return path


def existing_input(path: Path, what: str, given_by: str) -> Path:
    """``path`` if it exists, else a usage error naming ``what`` and the option or variable that gave it."""
    if not path.exists():
        raise CommandError(f"the {what} {path} ({given_by}) does not exist")
    return path


def data_folder_given_by(option: str | None, from_env: bool) -> str:
    """Where the data folder came from, as an error names it: the option, the variable, or the default."""
    if option is not None:
        return "--data-dir"
    if from_env:
        return "RAG_DATA_DIR"
    return "the default; set --data-dir or RAG_DATA_DIR"


def existing_data_folder(path: Path, given_by: str) -> Path:
    """``path`` if it is a folder, else a usage error naming it: for the commands that only read what an index run
    wrote, which would otherwise create an empty data folder (and caches in it) for a mistyped path."""
    if path.is_dir():
        return path
    if path.exists():
        raise CommandError(f"the data folder {path} ({given_by}) is a file, not a folder")
    raise CommandError(
        f"no data folder at {path} ({given_by}): run `rag-pipeline demo` or `rag-pipeline index` first to build "
        "one, or check --data-dir / RAG_DATA_DIR"
    )
