"""Confluence's settings section: the dump read offline, whose site it is, its directory file, and the live REST
API (present when ``CONFLUENCE_URL`` is set)."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict

from rag_pipeline.env_values import EnvValues
from rag_pipeline.sources.registry import InputCheck, SourceSettings

DEFAULT_PAGE_SIZE = 50
DEFAULT_OVERLAP_MINUTES = 15


class ConfluenceApiSettings(BaseModel):
    """The live Confluence connector. Secrets stay EnvVars in the Dagster layer: only whether each is set is
    recorded here, so no settings object, log line or error can carry one."""

    model_config = ConfigDict(frozen=True)

    url: str
    cloud: bool = True
    username: str | None = None
    api_token_set: bool = False
    pat_set: bool = False
    site: str | None = None
    page_size: int = DEFAULT_PAGE_SIZE
    overlap_minutes: int = DEFAULT_OVERLAP_MINUTES
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
        api = None
        url = env.get("CONFLUENCE_URL")
        if url:
            has_pat, has_token = bool(env.get("CONFLUENCE_PAT")), bool(env.get("CONFLUENCE_API_TOKEN"))
            api = ConfluenceApiSettings(
                url=url,
                # Cloud unless only a personal access token (Data Center) is given, as for Jira.
                cloud=env.flag("CONFLUENCE_CLOUD", default=not (has_pat and not has_token)),
                username=env.get("CONFLUENCE_USERNAME"),
                api_token_set=has_token,
                pat_set=has_pat,
                site=env.get("CONFLUENCE_SITE"),
                page_size=env.int("CONFLUENCE_PAGE_SIZE", DEFAULT_PAGE_SIZE, minimum=1) or DEFAULT_PAGE_SIZE,
                overlap_minutes=env.int("CONFLUENCE_OVERLAP_MINUTES", DEFAULT_OVERLAP_MINUTES) or 0,
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
