"""The connectors' receivers of pushed changes, called directly: Confluence's and Jira's shared secret (signed,
URL token, header, wrong, none), the delivery id a retry shares, and which container each payload names; Slack's
event types mapped to the smallest sync. The HTTP face over them is tested in e2e/test_pushed_changes.py."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from slack_sdk.signature import SignatureVerifier

from rag_pipeline.connectors.confluence.webhooks import ConfluenceWebhooks
from rag_pipeline.connectors.jira.webhooks import JiraWebhooks, jira_targets
from rag_pipeline.connectors.slack.events import SlackEvents, targets_of
from rag_pipeline.sources.pushed import PushRefused, SyncTarget

SECRET = "confluence-shared-secret-1"


def _signed(body: bytes, secret: str = SECRET) -> dict[str, str]:
    return {"X-Hub-Signature": "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()}


@pytest.mark.parametrize("receiver", [ConfluenceWebhooks(SECRET), JiraWebhooks(SECRET)])
def test_webhooks_believe_only_their_secret(receiver: ConfluenceWebhooks | JiraWebhooks) -> None:
    body = json.dumps({"event": "page_updated", "page": {"id": "9", "spaceKey": "ENG"}}).encode()
    for headers, token in (({}, None), ({}, "wrong"), ({"X-Rag-Webhook-Token": "wrong"}, None),
                           (_signed(body, "wrong"), None), (_signed(body + b" "), None),
                           ({"X-Hub-Signature": "sha1=" + "0" * 40}, SECRET)):  # fmt: skip
        with pytest.raises(PushRefused) as refused:
            receiver.read(body, headers, token)
        assert refused.value.status == 401 and SECRET not in str(refused.value)
    for headers, token in ((_signed(body), None), ({}, SECRET), ({"X-Rag-Webhook-Token": SECRET}, None)):
        assert receiver.read(body, headers, token).delivery


def test_confluence_payloads_name_their_space() -> None:
    receiver = ConfluenceWebhooks(SECRET)
    cases = {
        ("page_removed", json.dumps({"page": {"id": "1", "space": {"key": "OPS"}}})): [
            SyncTarget("OPS", "page_removed")
        ],
        ("comment_created", json.dumps({"comment": {"parent": {"spaceKey": "ENG"}}})): [
            SyncTarget("ENG", "comment_created")
        ],
        ("content_permissions_updated", json.dumps({"content": {"space": {"key": "HR"}}})): [
            SyncTarget("HR", "content_permissions_updated")
        ],
        ("group_updated", json.dumps({"group": {"name": "eng"}})): [SyncTarget(None, "group_updated")],
        ("page_created", json.dumps({"page": {"spaceKey": "bad key; drop"}})): [],
    }
    for (event, body), expected in cases.items():
        change = receiver.read(body.encode(), {"X-Event-Key": event}, SECRET)
        assert change.targets == expected, event
    again = receiver.read(b'{"page": {"spaceKey": "ENG"}}', {"X-Atlassian-Webhook-Identifier": "abc"}, SECRET)
    assert again.delivery == "abc"  # a retry of Confluence's carries the same identifier


def test_jira_payloads_name_their_project() -> None:
    assert jira_targets({"webhookEvent": "jira:issue_deleted", "issue": {"key": "OPS-12"}}) == [
        SyncTarget("OPS", "jira:issue_deleted")
    ]
    assert jira_targets({"webhookEvent": "comment_created", "issue": {"fields": {"project": {"key": "hr"}}}}) == [
        SyncTarget("HR", "comment_created")
    ]
    assert jira_targets({"webhookEvent": "project_updated", "project": {"key": "FIN"}}) == [
        SyncTarget("FIN", "project_updated")
    ]
    assert jira_targets({"webhookEvent": "user_updated", "user": {"accountId": "x"}}) == [
        SyncTarget(None, "user_updated")
    ]
    assert jira_targets({"webhookEvent": "jira:issue_updated"}) == []
    # A key that would read as an option of the targeted sync's command line names nothing.
    assert jira_targets({"webhookEvent": "project_updated", "project": {"key": "--start"}}) == []


def test_slack_event_types_map_to_the_smallest_sync() -> None:
    # A message changes content alone (its sync leaves the directory); a join message, like any other event, may
    # change who reads.
    # A new top-level message only adds (its sync skips the reconciliation); a reply, an edit, a deletion do not.
    assert targets_of({"type": "message", "channel": "C1", "text": "hi"}) == [
        SyncTarget("C1", "message", touches_directory=False, adds_only=True)
    ]
    assert targets_of({"type": "message", "channel": "C1", "ts": "2.0", "thread_ts": "1.0"}) == [
        SyncTarget("C1", "message", touches_directory=False)
    ]
    assert targets_of({"type": "message", "subtype": "message_deleted", "channel": "C1"}) == [
        SyncTarget("C1", "message_deleted", touches_directory=False)
    ]
    assert targets_of({"type": "message", "subtype": "channel_join", "channel": "C1", "user": "U1"}) == [
        SyncTarget("C1", "channel_join")
    ]
    assert targets_of({"type": "channel_rename", "channel": {"id": "C2", "name": "x"}}) == [
        SyncTarget("C2", "channel_rename")
    ]
    assert targets_of({"type": "member_left_channel", "channel": "G3", "user": "U1"}) == [
        SyncTarget("G3", "member_left_channel")
    ]
    assert targets_of({"type": "user_change", "user": {"id": "U1"}}) == [SyncTarget(None, "user_change")]
    assert targets_of({"type": "reaction_added"}) == [] and targets_of({"type": "message", "channel": "../x"}) == []


def test_slack_signatures_use_the_signing_secret_and_the_window() -> None:
    now = [1_800_000_000.0]
    events = SlackEvents("signing-secret", clock=lambda: now[0])
    body = json.dumps({"type": "event_callback", "event_id": "Ev1", "event": {"type": "message", "channel": "C1"}})
    stamp = str(int(now[0]))
    signature = SignatureVerifier("signing-secret").generate_signature(timestamp=stamp, body=body) or ""
    headers = {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature}
    assert events.read(body.encode(), headers).targets == [
        SyncTarget("C1", "message", touches_directory=False, adds_only=True)
    ]
    with pytest.raises(PushRefused, match="replay"):
        events.read(body.encode(), headers)
    assert events.read(body.encode(), {**headers, "X-Slack-Retry-Num": "1"}).delivery == "Ev1"  # deduped upstream
    now[0] += 301
    later = SlackEvents("signing-secret", clock=lambda: now[0])
    with pytest.raises(PushRefused, match="five minutes"):
        later.read(body.encode(), headers)
