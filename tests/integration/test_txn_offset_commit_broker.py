"""TxnOffsetCommit on a real broker (in-process, real sockets and files): the offsets
are written to __consumer_offsets as a transactional batch of the producer, stay
invisible (UNSTABLE_OFFSET_COMMIT with require_stable) until the transaction's
marker is written and the group coordinator told, and a restarted broker loading
the partition honours the COMMIT and ABORT markers and keeps an open transaction's
offsets pending.

The markers are written here as the transaction coordinator's WriteTxnMarkers
handler writes them (ReplicaManager.append_records with origin COORDINATOR, then
GroupCoordinator.complete_transaction through the CoordinatorRuntime), so the group
side is checked on its own; test_transactions_clients.py runs it
end to end with real clients."""

from __future__ import annotations

import asyncio

import pytest

from kafkalab.client.admin import Admin
from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.records import iter_batches
from kafkalab.records.control_record import ControlRecordType, build_end_txn_marker_batch
from kafkalab.server.broker import BrokerThread
from kafkalab.storage.unified_log import AppendOrigin

GROUP = "txn-group"
OFFSETS = "__consumer_offsets"


def props(log_dir) -> dict:
    return {
        "log.dirs": str(log_dir),
        "offsets.topic.num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
    }


def txn_offset_commit(admin: Admin, producer_id: int, offsets: dict) -> dict:
    body = {
        "transactional_id": f"tx-{producer_id}",
        "group_id": GROUP,
        "producer_id": producer_id,
        "producer_epoch": 0,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": t,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": o,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
            for (t, p), o in offsets.items()
        ],
    }
    r = admin.coordinator(GROUP).request(ApiKeys.TXN_OFFSET_COMMIT, body)
    return {
        (t["name"], p["partition_index"]): p["error_code"]
        for t in r["topics"]
        for p in t["partitions"]
    }


def offset_fetch(admin: Admin, partitions: list, stable: bool) -> dict:
    conn = admin.coordinator(GROUP)
    assert conn.version(ApiKeys.OFFSET_FETCH) >= 7  # require_stable is sent
    r = conn.request(
        ApiKeys.OFFSET_FETCH,
        {
            "group_id": GROUP,
            "topics": [{"name": t, "partition_indexes": [p]} for t, p in partitions],
            "require_stable": stable,
        },
    )
    return {
        (t["name"], p["partition_index"]): (p["committed_offset"], Errors(p["error_code"]))
        for t in r["topics"]
        for p in t["partitions"]
    }


def end_transaction(broker: BrokerThread, producer_id: int, committed: bool) -> None:
    """What WriteTxnMarkers does on the group coordinator's broker."""
    b = broker.broker

    async def write_marker():
        marker = ControlRecordType.COMMIT if committed else ControlRecordType.ABORT
        batch = build_end_txn_marker_batch(producer_id, 0, marker, 0)
        result = b.replica_manager.append_records(
            OFFSETS, 0, batch, required_acks=-1, origin=AppendOrigin.COORDINATOR
        )
        assert result.error == Errors.NONE
        await b.group_coordinator.complete_transaction(0, producer_id, committed)

    asyncio.run_coroutine_threadsafe(write_marker(), broker._loop).result(timeout=30)


def batches_on_disk(log_dir) -> list:
    segment = sorted((log_dir / f"{OFFSETS}-0").glob("*.log"))[0]
    return list(iter_batches(segment.read_bytes()))


@pytest.fixture
def log_dir(tmp_path):
    return tmp_path


def test_offsets_wait_for_the_marker_and_survive_a_restart(log_dir):
    a, b, c = ("in", 0), ("in", 1), ("in", 2)
    with BrokerThread(props(log_dir)) as broker, Admin(broker.bootstrap_servers) as admin:
        admin.create_topic("in", 3)  # offsets of a topic the broker lacks are refused
        assert txn_offset_commit(admin, 5000, {a: 10}) == {a: 0}
        assert offset_fetch(admin, [a], stable=False) == {a: (-1, Errors.NONE)}
        assert offset_fetch(admin, [a], stable=True) == {a: (-1, Errors.UNSTABLE_OFFSET_COMMIT)}
        end_transaction(broker, 5000, committed=True)
        assert offset_fetch(admin, [a], stable=True) == {a: (10, Errors.NONE)}

        assert txn_offset_commit(admin, 5001, {b: 20}) == {b: 0}
        end_transaction(broker, 5001, committed=False)
        assert txn_offset_commit(admin, 5002, {c: 30}) == {c: 0}  # left open
        expected = {
            a: (10, Errors.NONE),
            b: (-1, Errors.NONE),
            c: (-1, Errors.UNSTABLE_OFFSET_COMMIT),
        }
        assert offset_fetch(admin, [a, b, c], stable=True) == expected

    on_disk = [
        (h.producer_id, h.is_transactional, h.is_control_batch)
        for h in (batch.header for batch in batches_on_disk(log_dir))
        if h.producer_id >= 0
    ]
    assert on_disk == [
        (5000, True, False),
        (5000, True, True),
        (5001, True, False),
        (5001, True, True),
        (5002, True, False),
    ]

    with BrokerThread(props(log_dir)) as broker, Admin(broker.bootstrap_servers) as admin:
        assert offset_fetch(admin, [a, b, c], stable=True) == expected  # loaded from the log
        end_transaction(broker, 5002, committed=True)
        assert offset_fetch(admin, [c], stable=True) == {c: (30, Errors.NONE)}
