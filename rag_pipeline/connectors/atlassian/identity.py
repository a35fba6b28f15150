"""Whose Atlassian dump this is: the site host its records' URLs name, else the site the user gives."""

from __future__ import annotations

from collections import Counter
from urllib.parse import urlparse

from rag_pipeline.sources.identity import one_value, settle


def url_host(value: object) -> str | None:
    """The host of an absolute http(s) URL a record holds (None for anything else: a relative link, a non-string)."""
    return urlparse(value).hostname if isinstance(value, str) and value.startswith("http") else None


def resolve_site(found: Counter[str], site: str | None, where: str, flag: str, variable: str, example: str) -> str:
    """The site of a dump: the host its data names (``found``, a majority counting as one), else ``site``; a
    contradiction or no site at all names ``flag`` and ``variable``."""
    named = one_value(found, "site", where, f"{flag} ({variable})")
    return settle(named, site, where, "site", flag, variable, example)
