"""Confluence's settings section: the dump read offline, whose site it is, its directory file, and the live REST
API (present when ``CONFLUENCE_URL`` is set)."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from rag_pipeline.connectors.atlassian.settings import AtlassianApiSettings
from rag_pipeline.env_values import EnvValues
from rag_pipeline.sources.registry import InputCheck, SourceSettings

DEFAULT_PAGE_SIZE = 50


class ConfluenceApiSettings(AtlassianApiSettings):
    """The live Confluence connector (``CONFLUENCE_URL``, ``CONFLUENCE_CLOUD``, ``CONFLUENCE_USERNAME``,
    ``CONFLUENCE_API_TOKEN``, ``CONFLUENCE_PAT``, ``CONFLUENCE_SITE``, ``CONFLUENCE_PAGE_SIZE``,
    ``CONFLUENCE_OVERLAP_MINUTES``), plus the spaces discovery keeps or skips."""

    page_size: int = DEFAULT_PAGE_SIZE
    space_allow: tuple[str, ...] = ()
    space_deny: tuple[str, ...] = ()


class ConfluenceSettings(SourceSettings):
    """RAG_CONFLUENCE_DUMP, CONFLUENCE_SITE, RAG_CONFLUENCE_DIRECTORY; CONFLUENCE_URL and its credentials for the
    live API."""

    # JSON lines of REST content objects (and optional space records), .gz or not; no bundled dump.
    dump: Path | None = None
    site: str | None = None  # CONFLUENCE_SITE, --confluence-site: whose data the dump is where it does not say
    # A CSV of accounts and their groups (account_id,email,groups) for dumps that hold no membership.
    directory: Path | None = None
    api: ConfluenceApiSettings | None = None

    @classmethod
    def from_env(cls, env: EnvValues) -> Self:
        api = ConfluenceApiSettings.from_prefixed_env(
            env,
            "CONFLUENCE",
            space_allow=env.names("CONFLUENCE_SPACE_ALLOW"),
            space_deny=env.names("CONFLUENCE_SPACE_DENY"),
        )
        return cls(
            dump=env.optional_path("RAG_CONFLUENCE_DUMP"),
            site=env.get("CONFLUENCE_SITE"),
            directory=env.optional_path("RAG_CONFLUENCE_DIRECTORY"),
            api=api,
        )

    def inputs(self) -> tuple[InputCheck, ...]:
        found = []
        if self.dump is not None:
            found.append(InputCheck(self.dump, "Confluence dump", "--confluence-dump", "RAG_CONFLUENCE_DUMP"))
        if self.directory is not None:
            found.append(
                InputCheck(
                    self.directory, "Confluence directory file", "--confluence-directory", "RAG_CONFLUENCE_DIRECTORY"
                )
            )
        return tuple(found)

    def api_address(self) -> tuple[str, str | None] | None:
        return (self.api.url, "CONFLUENCE_URL") if self.api is not None else None

    def default_requests_per_minute(self) -> int | None:
        # Like Jira: Confluence Cloud's limits are cost-based per app and user, not a fixed rate a plan could use;
        # the client follows Retry-After instead. A variable still sets a budget where a site needs one.
        return None
