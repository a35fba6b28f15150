"""Slack's settings section: the export read offline, whose workspace it is, and the live Web API."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict

from rag_pipeline.env_values import EnvValues
from rag_pipeline.sources.registry import InputCheck, SourceSettings

BUNDLED_SLACK_EXPORT = Path(__file__).resolve().parents[2] / "data" / "slack_ubuntu" / "export"
BUNDLED_SLACK_TEAM = "T0UBUNTU"
BUNDLED_SLACK_DOMAIN = "ubuntu.slack.com"
# Slack's Tier 3 (conversations.history/replies) allows ~50 requests/minute; apps outside the Marketplace
# created since May 2025 get 1 request/minute with at most 15 items per page.
SLACK_TIER3_REQUESTS_PER_MINUTE = 50
SLACK_NON_MARKETPLACE_REQUESTS_PER_MINUTE = 1
SLACK_NON_MARKETPLACE_PAGE_SIZE = 15
# slack-sdk's own default when SLACK_API_BASE_URL is unset.
SLACK_API_URL = "https://slack.com/api/"


class SlackApiSettings(BaseModel):
    """The live Slack connector (present when ``SLACK_BOT_TOKEN`` is set; the token itself stays an EnvVar)."""

    model_config = ConfigDict(frozen=True)

    base_url: str | None = None
    page_size: int = 200
    lookback_days: int = 30


class SlackSettings(SourceSettings):
    """RAG_SLACK_EXPORT, SLACK_TEAM_ID, SLACK_WORKSPACE_DOMAIN; SLACK_BOT_TOKEN and its options for the live API."""

    export: Path = BUNDLED_SLACK_EXPORT
    # Whose data the export is where it does not say (SLACK_TEAM_ID, SLACK_WORKSPACE_DOMAIN; --slack-team,
    # --slack-domain); the offline_* properties add the bundled data's.
    team: str | None = None
    domain: str | None = None
    api: SlackApiSettings | None = None

    @classmethod
    def from_env(cls, env: EnvValues) -> Self:
        api = None
        if env.get("SLACK_BOT_TOKEN"):
            api = SlackApiSettings(
                base_url=env.get("SLACK_API_BASE_URL"),
                page_size=env.int("SLACK_PAGE_SIZE", 200, minimum=1) or 200,
                lookback_days=env.int("SLACK_LOOKBACK_DAYS", 30) or 0,
            )
        return cls(
            export=env.path("RAG_SLACK_EXPORT", BUNDLED_SLACK_EXPORT),
            team=env.get("SLACK_TEAM_ID"),
            domain=env.get("SLACK_WORKSPACE_DOMAIN"),
            api=api,
        )

    # The bundled data names no workspace: its identity is the default for it alone; a team's own export gets
    # its identity from its data or the settings, or its read fails naming the flag.
    @property
    def offline_team(self) -> str | None:
        return self.team or (BUNDLED_SLACK_TEAM if self.export == BUNDLED_SLACK_EXPORT else None)

    @property
    def offline_domain(self) -> str | None:
        return self.domain or (BUNDLED_SLACK_DOMAIN if self.export == BUNDLED_SLACK_EXPORT else None)

    def inputs(self) -> tuple[InputCheck, ...]:
        return (InputCheck(self.export, "Slack export", "--slack-export", "RAG_SLACK_EXPORT"),)

    def api_address(self) -> tuple[str, str | None] | None:
        base_url = self.api.base_url if self.api is not None else None
        return (base_url, "SLACK_API_BASE_URL") if base_url else (SLACK_API_URL, None)

    def default_requests_per_minute(self) -> int | None:
        # A page size of 15 is the non-Marketplace regime, whose limit is 1 request a minute.
        page_size = self.api.page_size if self.api else 200
        if page_size <= SLACK_NON_MARKETPLACE_PAGE_SIZE:
            return SLACK_NON_MARKETPLACE_REQUESTS_PER_MINUTE
        return SLACK_TIER3_REQUESTS_PER_MINUTE
