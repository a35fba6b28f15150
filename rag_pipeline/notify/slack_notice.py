"""A notification as a Slack message (Block Kit with a plain-text fallback), posted with slack-sdk."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from rag_pipeline.connectors.slack.api import SlackAccessError, describe_slack_error

MAX_DETAILS = 10
MAX_DETAIL_CHARS = 300


@dataclass(frozen=True)
class Notice:
    """What happened (``title``), where (``fields``: asset, partition, ...), the specifics
    (``details``: error lines, metric deltas) and a link to the Dagster run."""

    title: str
    fields: Mapping[str, str] = field(default_factory=dict)
    details: Sequence[str] = ()
    link: str | None = None

    def text(self) -> str:
        """The plain-text fallback (notifications, screen readers, clients without blocks)."""
        lines = [self.title, *(f"{k}: {v}" for k, v in self.fields.items()), *self._details()]
        if self.link:
            lines.append(self.link)
        return "\n".join(lines)

    def blocks(self) -> list[dict[str, Any]]:
        """Block Kit: a header, the fields, the details as a quote, the run link."""
        blocks: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": self.title[:150]}}]
        if self.fields:
            blocks.append(
                {
                    "type": "section",
                    "fields": [{"type": "mrkdwn", "text": f"*{k}*\n{v}"} for k, v in list(self.fields.items())[:10]],
                }
            )
        details = self._details()
        if details:
            quoted = "\n".join(f"> {line}" for line in details)
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": quoted[:3000]}})
        if self.link:
            blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"<{self.link}|Open the run>"}]})
        return blocks

    def _details(self) -> list[str]:
        lines = [d if len(d) <= MAX_DETAIL_CHARS else d[: MAX_DETAIL_CHARS - 1] + "…" for d in self.details]
        if len(lines) > MAX_DETAILS:
            lines = [*lines[:MAX_DETAILS], f"… and {len(lines) - MAX_DETAILS} more"]
        return lines


def post_notice(client: WebClient, channel: str, notice: Notice) -> str:
    """Post the notice to a channel (id or name); returns the message ts."""
    try:
        response = client.chat_postMessage(channel=channel, text=notice.text(), blocks=notice.blocks())
    except SlackApiError as exc:
        raise SlackAccessError(describe_slack_error(exc, "chat.postMessage", channel)) from None
    return str(response["ts"])


def run_link(webserver_url: str | None, run_id: str) -> str | None:
    """The Dagster UI page of a run."""
    return f"{webserver_url.rstrip('/')}/runs/{run_id}" if webserver_url else None
