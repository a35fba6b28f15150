"""What the live sources' ``defs/<name>/spec.py`` share: an Atlassian API resource made from its settings, and the
check that the containers a command names are among those the API lists."""

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, TypeVar

import dagster as dg

from rag_pipeline.connectors.atlassian.settings import AtlassianApiSettings
from rag_pipeline.defs.chain.live_spec import api_limits
from rag_pipeline.settings import ApiLimits
from rag_pipeline.sources.problems import SourceError

Resource = TypeVar("Resource", bound=dg.ConfigurableResource)


def atlassian_api_resource(
    resource: Callable[..., Resource],
    api: AtlassianApiSettings,
    limits: ApiLimits | None,
    prefix: str,
    **fields: Any,
) -> Resource:
    """The live connector of an Atlassian product from its settings; the secrets stay EnvVars, resolved only inside a
    run (Cloud: ``<prefix>_API_TOKEN``, Server/Data Center: ``<prefix>_PAT``). ``limits`` bound every read
    (timeouts, page cap, per-partition budgets); ``fields``: the product's own config fields."""
    return resource(
        url=api.url,
        cloud=api.cloud,
        username=api.username,
        api_token=dg.EnvVar(f"{prefix}_API_TOKEN") if api.api_token_set else None,
        personal_access_token=dg.EnvVar(f"{prefix}_PAT") if api.pat_set else None,
        site=api.site,
        page_size=api.page_size,
        overlap_minutes=api.overlap_minutes,
        **fields,
        **api_limits(limits),
    )


def require_listed(wanted: Sequence[str], known: Collection[str], shown: Iterable[str], what: str, advice: str) -> None:
    """Raise a :class:`SourceError` naming the ``wanted`` containers not ``known`` to the API, the containers it
    lists (``shown``) and what to change. ``what``: "Jira project(s) {} not found among the projects the API user
    can browse", its ``{}`` the missing ones."""
    missing = [k for k in wanted if k not in known]
    if missing:
        listed = ", ".join(sorted(shown)) or "none"
        raise SourceError(f"{what.format(', '.join(missing))} ({listed}); {advice}")
