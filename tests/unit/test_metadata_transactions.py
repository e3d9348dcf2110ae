"""A controller's write of several records is one metadata transaction in Raft's log
(KIP-868: BeginTransactionRecord, the records, EndTransactionRecord), now that each
metadata record is a Raft entry of its own (issue 25): a standby applies it whole at
its end, never the part the high watermark has passed, and drops one that a new
epoch cut short (its leader died before the rest reached this voter), as the
AbortTransactionRecord Kafka's new active controller writes for it would."""

from __future__ import annotations

from kafkalab.controller.quorum_controller import QuorumController
from kafkalab.raft.kafka_raft_client import LeaderChangeMessage
from kafkalab.raft.raft_log import LogEntry, RaftLog
from kafkalab.server.quorum_meta_log_listener import QuorumMetaLogListener

KEPT, CUT = "00000000-0000-0000-0000-00000000000a", "00000000-0000-0000-0000-00000000000b"


def topic(name: str, topic_id: str) -> list[dict]:
    return [
        {"type": "TopicRecord", "name": name, "topic_id": topic_id},
        {
            "type": "PartitionRecord",
            "topic_id": topic_id,
            "partition": 0,
            "replicas": [1],
            "isr": [1],
            "leader": 1,
            "leader_epoch": 0,
            "partition_epoch": 0,
        },
    ]


BEGIN, END = {"type": "BeginTransactionRecord"}, {"type": "EndTransactionRecord"}
REGISTER = {
    "type": "RegisterBrokerRecord",
    "broker_id": 1,
    "host": "h",
    "port": 9001,
    "incarnation_id": "00000000-0000-0000-0000-000000000001",
    "broker_epoch": 2,
    "endpoints": [["PLAINTEXT", "h", 9001]],
}


class Manager:
    """The part of KafkaRaftManager a standby's listener reads: Raft's log and its
    high watermark."""

    node_id = 2

    def __init__(self, entries: list[LogEntry]) -> None:
        self.log = RaftLog(entries)
        self.high_watermark = 0

    def clock(self) -> int:
        return 0

    def add_listener(self, listener) -> None:
        pass


def raft_log() -> list[LogEntry]:
    records = [
        (1, LeaderChangeMessage(1, (1, 2, 3), (1, 2))),
        *((1, r) for r in (BEGIN, *topic("kept", KEPT), END)),  # offsets 1-4: whole
        *((1, r) for r in (BEGIN, *topic("cut", CUT)[:1])),  # 5-6: its end never came
        (2, LeaderChangeMessage(3, (1, 2, 3), (2, 3))),  # 7: a new leader, epoch 2
        (2, REGISTER),  # 8: one record, no transaction
    ]
    return [LogEntry(offset, epoch, r) for offset, (epoch, r) in enumerate(records)]


def test_a_transaction_is_applied_whole_at_its_end_and_one_cut_by_a_new_epoch_is_dropped(
    tmp_path,
):
    controller = QuorumController(tmp_path / "controller")
    manager = Manager(raft_log())
    listener = QuorumMetaLogListener(controller, manager, None)  # type: ignore[arg-type]

    manager.high_watermark = 3  # inside the first transaction: nothing of it yet
    listener._apply_committed()
    assert (listener.applied, controller.metadata_offset, controller.topics) == (1, 0, {})

    manager.high_watermark = 5  # past its EndTransactionRecord: all of it, one batch
    listener._apply_committed()
    assert listener.applied == 5 and list(controller.topics) == ["kept"]
    assert [r["type"] for _, r in controller.records_since(0)] == [
        "TopicRecord",
        "PartitionRecord",
    ]

    manager.high_watermark = 9  # the cut transaction, then epoch 2's record
    listener._apply_committed()
    assert listener.applied == 9
    assert list(controller.topics) == ["kept"]  # "cut" never applied
    assert controller.brokers[1].broker_epoch == 2
    assert controller.log.high_watermark == controller.metadata_offset == 3
    controller.close()
