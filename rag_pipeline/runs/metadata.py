"""Reading what an in-process run reported: materialization metadata and step failures."""

from __future__ import annotations

from typing import Any

import dagster as dg


def materialization_metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    """The metadata values of an asset's materialization in a run ({} when it did not materialize)."""
    events = result.asset_materializations_for_node(asset)
    return {k: v.value for k, v in events[0].metadata.items()} if events else {}


def step_metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    """The materialization's metadata, or a failed step's ``dg.Failure`` metadata."""
    materialized = materialization_metadata(result, asset)
    if materialized:
        return materialized
    for event in result.all_events:
        if event.is_step_failure and event.step_key == asset and event.step_failure_data.user_failure_data:
            return {k: v.value for k, v in event.step_failure_data.user_failure_data.metadata.items()}
    return {}


def failure_message(result: dg.ExecuteInProcessResult) -> str | None:
    """The first failed step's message: its ``dg.Failure`` description, else the error."""
    for event in result.all_events:
        if event.is_step_failure:
            data = event.step_failure_data
            if data.user_failure_data and data.user_failure_data.description:
                return data.user_failure_data.description
            return data.error.message.strip() if data.error else None
    return None
