"""Membership changes of a private channel reach the ACL of its already indexed threads.

The index is built from the Slack Web API emulator through the real slack-sdk client (a small 4-d encoder
stands in for the dense model, which the ACL path must never need); then members are removed from and
added to the private channel in the emulator, reconciliation runs, and searches as those users show the
change. Both engines (qdrant-edge, qdrant-client's local mode as the server double) for the domain code;
the Dagster asset and the ``search`` command on the embedded default.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.connectors.slack.reconcile import plan_channel
from rag_pipeline.connectors.slack.threads import thread_document_id
from rag_pipeline.defs.slack.resources import SlackResource
from rag_pipeline.index.index_info import claim_dense_model
from rag_pipeline.index.store import SearchFilter, VectorStore
from rag_pipeline.reconciliation.reconcile import IndexWriters, apply_plans
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.retriever import Retriever
from rag_pipeline.text.chunking import Chunker
from rag_pipeline.vectors.sparse import Bm25Encoder
from rag_pipeline_tests.kit import slack_fixtures as F
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.pipeline import resources, spec
from rag_pipeline_tests.kit.slack_index import (
    TOKEN,
    UNLOADABLE_MODEL,
    HashEncoder,
    index_threads,
    point_payloads,
    read_threads,
    reader,
)

VPN_QUERY = "rotating the VPN certificates"  # the private channel's thread with replies
VPN_THREAD = thread_document_id(F.CRAFTED_TEAM, F.PRIVATE_CHANNEL, F.PRIVATE_THREAD_ROOT_TS)


def _found(store: VectorStore, user: str) -> set[str]:
    """Documents a BM25 search for the VPN thread returns when ``user`` runs it."""
    response = Retriever(store, Bm25Encoder()).search(VPN_QUERY, "bm25", Principal(user_id=user), top_k=10)
    return {r.document_id for r in response.results}


def _no_writers() -> IndexWriters:
    raise AssertionError("an ACL change must not re-chunk or re-embed anything")


def _set_members(emu: SlackEmulator, members: list[str]) -> None:
    with emu.workspace.lock:
        emu.workspace.channel(F.PRIVATE_CHANNEL).members = members


def test_membership_changes_update_the_acl_of_indexed_threads_in_place(store: VectorStore) -> None:
    with SlackEmulator(F.crafted_workspace()) as emu:
        private = read_threads(emu, F.PRIVATE_CHANNEL)
        general = read_threads(emu, F.GENERAL_CHANNEL)
        index_threads(store, private + general)
        private_ids, general_ids = sorted(d.id for d in private), sorted(d.id for d in general)
        assert VPN_THREAD in private_ids and len(private_ids) == 2 and general_ids
        # Before: Carol (a member) finds the thread, Bob (not a member) does not.
        assert VPN_THREAD in _found(store, F.CAROL) and VPN_THREAD not in _found(store, F.BOB)
        before = point_payloads(store, private_ids + general_ids)

        _set_members(emu, [F.ALICE, F.BOB, F.BOT_USER])  # Carol leaves, Bob joins
        api = reader(emu)
        # The default lookback (30 days before now) re-reads none of these March 2024 threads: the ACL is still
        # compared for every indexed thread of the channel.
        plans = [
            plan_channel(api, channel, store.indexed_documents(SearchFilter(containers=(channel,))), 30)
            for channel in (F.PRIVATE_CHANNEL, F.GENERAL_CHANNEL)
        ]
        assert [p.checked for p in plans] == [0, 0]
        result = apply_plans(store, plans, _no_writers)

        assert result.acl_updated == private_ids
        assert result.rewritten == [] and result.removed == []
        assert VPN_THREAD not in _found(store, F.CAROL) and VPN_THREAD in _found(store, F.BOB)
        assert VPN_THREAD in _found(store, F.ALICE)
        after = point_payloads(store, private_ids + general_ids)
        assert after.keys() == before.keys()
        for point_id, payload in after.items():
            if payload["document_id"] in general_ids:  # the unchanged channel: not a byte of payload changed
                assert payload == before[point_id]
            else:  # the private channel: the same points, versions and texts, the new readers
                assert payload["acl"] == {"public": False, "users": [F.ALICE, F.BOB, F.BOT_USER], "groups": []}
                assert {**payload, "acl": None} == {**before[point_id], "acl": None}
        # Stored ACL and the index's view of the documents agree: a second run changes nothing, and neither does
        # Slack listing the same members in another order.
        _set_members(emu, [F.BOT_USER, F.BOB, F.ALICE])
        api = reader(emu)
        again = [
            plan_channel(api, channel, store.indexed_documents(SearchFilter(containers=(channel,))), 30)
            for channel in (F.PRIVATE_CHANNEL, F.GENERAL_CHANNEL)
        ]
        assert [p.acl_updates for p in again] == [{}, {}]
        assert apply_plans(store, again, _no_writers).acl_updated == []


def test_a_rewritten_thread_gets_the_new_acl_with_its_new_content(store: VectorStore) -> None:
    """A thread both changed and re-permissioned is rewritten once (with the new ACL), not also patched."""
    with SlackEmulator(F.crafted_workspace()) as emu:
        private = read_threads(emu, F.PRIVATE_CHANNEL)
        index_threads(store, private)
        emu.workspace.delete(F.PRIVATE_CHANNEL, F.PRIVATE_REPLY_TSS[1])  # a deleted reply: content changes
        _set_members(emu, [F.ALICE, F.BOT_USER])  # Carol leaves
        indexed = store.indexed_documents(SearchFilter(containers=(F.PRIVATE_CHANNEL,)))
        plan = plan_channel(reader(emu), F.PRIVATE_CHANNEL, indexed, 100_000)
        assert [d.id for d in plan.rewrite] == [VPN_THREAD]
        assert set(plan.rewrite[0].acl.users) == {F.ALICE, F.BOT_USER}
        other = thread_document_id(F.CRAFTED_TEAM, F.PRIVATE_CHANNEL, F.PRIVATE_ROOT_TS)
        assert list(plan.acl_updates) == [other]
        encoder = HashEncoder()
        result = apply_plans(store, [plan], IndexWriters(Chunker(), encoder, Bm25Encoder()))
        assert result.rewritten == [VPN_THREAD] and result.acl_updated == [other]
        assert encoder.embedded > 0  # only the rewritten thread was embedded
        assert VPN_THREAD not in _found(store, F.CAROL)
        assert all(
            set(p["acl"]["users"]) == {F.ALICE, F.BOT_USER} for p in point_payloads(store, [VPN_THREAD, other]).values()
        )


def test_reconciliation_asset_reports_acl_updates_and_search_follows(tmp_path: Path, monkeypatch, capsys) -> None:
    """The Dagster asset on the embedded index, then the ``search`` command as the removed and the added user."""
    from rag_pipeline.cli import main

    monkeypatch.setenv("RAG_DENSE_MODEL", UNLOADABLE_MODEL)
    monkeypatch.delenv("QDRANT_URL", raising=False)
    live = spec("slack").live
    assert live is not None
    with SlackEmulator(F.crafted_workspace()) as emu:
        res = resources(tmp_path, live=False)
        res["slack"] = res["slack_source"] = SlackResource(token=TOKEN, base_url=emu.base_url)
        qdrant = res["qdrant"]
        assert qdrant.engine == "qdrant-edge"
        private = read_threads(emu, F.PRIVATE_CHANNEL)
        general = read_threads(emu, F.GENERAL_CHANNEL)
        with qdrant.open() as store:
            store.create_collections(HashEncoder.dimension)
            claim_dense_model(store, UNLOADABLE_MODEL)
            index_threads(store, private + general)
            general_before = point_payloads(store, [d.id for d in general])

        def search_as(user: str) -> set[str]:
            argv = ["search", VPN_QUERY, "--mode", "bm25", "--user", user, "--json", "--data-dir", str(tmp_path)]
            assert main(argv) == 0
            return {r["document_id"] for r in json.loads(capsys.readouterr().out)["results"]}

        assert VPN_THREAD in search_as(F.CAROL) and VPN_THREAD not in search_as(F.BOB)
        _set_members(emu, [F.ALICE, F.BOB, F.BOT_USER])
        with dg.instance_for_test() as instance:
            instance.add_dynamic_partitions("slack_channels", [F.GENERAL_CHANNEL, F.PRIVATE_CHANNEL])
            run = dg.materialize([live.reconciliation], instance=instance, resources=res)
        assert run.success
        meta = {k: v.value for k, v in run.asset_materializations_for_node("slack_reconciliation")[0].metadata.items()}
        assert meta["documents_acl_updated"] == len(private) == 2
        assert meta["documents_rewritten"] == 0 and meta["documents_removed"] == 0
        assert meta["changes"].count("acl updated") == 2 and VPN_THREAD in meta["changes"]
        assert VPN_THREAD not in search_as(F.CAROL) and VPN_THREAD in search_as(F.BOB)
        with qdrant.open() as store:
            assert point_payloads(store, [d.id for d in general]) == general_before


@pytest.mark.parametrize("members", [[F.ALICE, F.CAROL, F.BOT_USER], [F.CAROL, F.BOT_USER, F.ALICE]])
def test_unchanged_members_plan_no_acl_update(members: list[str], store: VectorStore) -> None:
    with SlackEmulator(F.crafted_workspace()) as emu:
        index_threads(store, read_threads(emu, F.PRIVATE_CHANNEL))
        _set_members(emu, members)
        indexed = store.indexed_documents(SearchFilter(containers=(F.PRIVATE_CHANNEL,)))
        assert all(d.acl is not None and d.acl.users == {F.ALICE, F.CAROL, F.BOT_USER} for d in indexed.values())
        assert plan_channel(reader(emu), F.PRIVATE_CHANNEL, indexed, 30).acl_updates == {}
