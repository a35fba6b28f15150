"""ACL group names of an Atlassian site, ``<source>:<site>:<kind>:<name>``, and how ``explain`` words them.

Light on purpose: the source registry imports each connector's ``describe_group``, so this module imports nothing
beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence


def site_group_builder(source: str, kind: str) -> Callable[[str, str], str]:
    """The function naming the ACL group of one ``kind`` on a site: ``(site, name) -> "<source>:<site>:<kind>:<name>"``
    (the strings the index payload and the principal directory share)."""

    def group(site: str, name: str) -> str:
        return f"{source}:{site}:{kind}:{name}"

    group.__name__ = f"{kind}_group"
    group.__doc__ = f"ACL group ``{source}:<site>:{kind}:<name>``."
    return group


def describe_site_group(parts: Sequence[str], source: str, phrases: Mapping[str, str]) -> str | None:
    """A group of ``source`` (split on ``:``) in words: ``phrases`` by kind, each a template of ``{name}`` and
    ``{site}``; None when it is not one of the source's groups or its kind has no phrase."""
    if len(parts) < 4 or parts[0] != source:
        return None
    site, kind, name = parts[1], parts[2], ":".join(parts[3:])
    phrase = phrases.get(kind)
    return phrase.format(name=name, site=site) if phrase is not None else None
