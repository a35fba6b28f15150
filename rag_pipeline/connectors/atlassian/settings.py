"""The live REST API settings an Atlassian site's section holds, read from ``<PREFIX>_*`` variables.

Every Atlassian connector is configured the same way (``<PREFIX>_URL`` turns it on; ``_CLOUD``, ``_USERNAME``,
``_API_TOKEN``, ``_PAT``, ``_SITE``, ``_PAGE_SIZE`` and ``_OVERLAP_MINUTES`` shape it), so the reading lives here
once and each connector's ``settings`` module names only its prefix and its own extra fields.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict

from rag_pipeline.env_values import EnvValues

DEFAULT_OVERLAP_MINUTES = 15


class AtlassianApiSettings(BaseModel):
    """An Atlassian site's live REST API (present when ``<PREFIX>_URL`` is set). Secrets stay EnvVars in the
    Dagster layer: only whether each is set is recorded here, so no settings object, log line or error can carry
    one."""

    model_config = ConfigDict(frozen=True)

    url: str
    cloud: bool = True
    username: str | None = None
    api_token_set: bool = False
    pat_set: bool = False
    site: str | None = None
    page_size: int = 100
    overlap_minutes: int = DEFAULT_OVERLAP_MINUTES

    @classmethod
    def from_prefixed_env(cls, env: EnvValues, prefix: str, **extra: Any) -> Self | None:
        """The API settings from ``<prefix>_URL`` and its companions (None when the URL is unset); ``extra``: the
        connector's own fields, read by the caller."""
        url = env.get(f"{prefix}_URL")
        if not url:
            return None
        has_pat, has_token = bool(env.get(f"{prefix}_PAT")), bool(env.get(f"{prefix}_API_TOKEN"))
        page_size = cls.model_fields["page_size"].default
        return cls(
            url=url,
            # Cloud unless only a personal access token (Server/Data Center) is given.
            cloud=env.flag(f"{prefix}_CLOUD", default=not (has_pat and not has_token)),
            username=env.get(f"{prefix}_USERNAME"),
            api_token_set=has_token,
            pat_set=has_pat,
            site=env.get(f"{prefix}_SITE"),
            page_size=env.int(f"{prefix}_PAGE_SIZE", page_size, minimum=1) or page_size,
            overlap_minutes=env.int(f"{prefix}_OVERLAP_MINUTES", DEFAULT_OVERLAP_MINUTES) or 0,
            **extra,
        )
