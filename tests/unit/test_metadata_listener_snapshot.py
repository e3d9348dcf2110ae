"""A broker that read a controller's metadata log part way switches to a controller
that loaded a KRaft snapshot (its log starts with the image, not the history): its
fetch from inside that stretch is answered OFFSET_OUT_OF_RANGE, it starts over at the
log start, its image becomes the controller's, and a topic deleted in the history it
never read is removed from the broker as a RemoveTopicRecord would."""

from __future__ import annotations

import asyncio

import pytest
from test_metadata_listener import Fetchers, Timers

from kafkalab.controller.quorum_controller import QuorumController
from kafkalab.errors import Errors
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.controller_server import ControllerApis, MetadataLogChanges
from kafkalab.server.events import EventLog
from kafkalab.server.metadata_listener import BrokerMetadataListener
from kafkalab.storage import LogConfig, LogManager


class ControllerConnection:
    """The broker's connection, answered by a controller's Fetch handler in-process."""

    def __init__(self, controller: QuorumController, tmp_path) -> None:
        self.apis = ControllerApis(
            controller, MetadataLogChanges(controller, EventLog(tmp_path, "controller"))
        )
        self.answers: list[int] = []

    async def request(self, _key, _version, body):
        response = self.apis._fetch_now(body)
        part = response["responses"][0]["partitions"][0]
        if hasattr(part["records"], "read"):  # a slice of the segment: what the wire sends
            part["records"] = part["records"].read()
        self.answers.append(part["error_code"])
        return response

    def close(self) -> None:
        pass


def churn(c: QuorumController) -> None:
    for i in range(30):
        c.create_topic(f"churn-{i}", 1, 1)
        c.delete_topic(f"churn-{i}")


@pytest.mark.parametrize("where", ["below the log start", "inside the snapshot"])
def test_a_broker_starts_over_at_a_snapshot_and_drops_what_it_no_longer_lists(tmp_path, where):
    a = QuorumController(tmp_path / "a")
    for b in (1, 2, 3):
        a.heartbeat(b, a.register_broker(b, "h", 9000 + b, f"i{b}", 0), 0)
    a.create_topic("kept", 2, 3)
    a.create_topic("doomed", 2, 3)
    if where == "inside the snapshot":
        churn(a)
    rm = ReplicaManager(LogManager(tmp_path / "logs", LogConfig()), Timers(), broker_id=1)
    broker = BrokerMetadataListener(
        1, ControllerConnection(a, tmp_path), rm, Fetchers(), EventLog(tmp_path, "broker-1")
    )
    asyncio.run(broker.catch_up())
    assert {tp[0] for tp in rm.partitions} == {"kept", "doomed"}
    read_up_to = broker.next_offset

    # history the broker never reads: a deletion, a new topic, and much churn
    a.delete_topic("doomed")
    a.create_topic("new", 1, 3)
    if where == "below the log start":
        churn(a)
    b = QuorumController(tmp_path / "b")
    b.load_snapshot(a.snapshot_records())
    if where == "below the log start":
        assert read_up_to < b.log.log_start_offset
    else:
        assert b.log.log_start_offset < read_up_to < b.snapshot_end_offset

    broker.controller = ControllerConnection(b, tmp_path)
    asyncio.run(broker.catch_up())
    assert broker.controller.answers[0] == Errors.OFFSET_OUT_OF_RANGE
    assert broker.next_offset == b.metadata_offset == a.metadata_offset
    assert set(broker.image.topics) == set(a.topics) == {"kept", "new"}
    assert {tp[0] for tp in rm.partitions} == {"kept", "new"}
    assert broker.image.brokers.keys() == a.brokers.keys()
    # and it goes on with the records after the snapshot, at the same offsets as on a
    epoch = b.register_broker(4, "h", 9004, "i4", 0)
    assert epoch == a.register_broker(4, "h", 9004, "i4", 0)
    asyncio.run(broker.catch_up())
    assert broker.image.brokers[4].broker_epoch == epoch
