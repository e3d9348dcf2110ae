"""KRaft's metadata records, declared as data: the records the QuorumController writes
to `__cluster_metadata` (Kafka: metadata/src/main/resources/common/metadata/*.json,
`"type": "metadata"`; each an ApiMessage with an apiKey of its own, Kafka's
MetadataRecordType).

Field for field as Kafka declares them (names in snake_case; every version Kafka
declares, all flexible from v0). `METADATA_RECORDS` lists them by apiKey with
Kafka's MetadataRecordType name and their valid versions; which version kafkalab
writes is the serde's choice (kafkalab/controller/metadata_record_serde.py).

    0   RegisterBrokerRecord    v0-3    5   PartitionChangeRecord   v0-2
    2   TopicRecord             v0      7   FenceBrokerRecord       v0
    3   PartitionRecord         v0-2    8   UnfenceBrokerRecord     v0
    4   ConfigRecord            v0      9   RemoveTopicRecord       v0
    23  BeginTransactionRecord  v0      15  ProducerIdsRecord       v0
    24  EndTransactionRecord    v0      25  AbortTransactionRecord  v0

One record is kafkalab's own, not Kafka's: METADATA_SNAPSHOT_RECORD (apiKey 10000,
far outside Kafka's range), the marker at the start of a metadata log that holds a
KRaft snapshot's image rather than its history (QuorumController.load_snapshot):
EndOffset, the metadata log offset the image is at.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalab.protocol.schema import NULL, Message
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.types import BOOL, INT8, INT16, INT32, INT64, STRING, UINT16, UUID, ArrayOf

_INT32S = ArrayOf(INT32)

REGISTER_BROKER_RECORD = Message(
    0,
    "RegisterBrokerRecord",
    [
        F("broker_id", INT32),
        F("is_migrating_zk_broker", BOOL, "2+"),
        F("incarnation_id", UUID),
        F("broker_epoch", INT64),
        F(
            "end_points",
            [
                F("name", STRING),
                F("host", STRING),
                F("port", UINT16),
                F("security_protocol", INT16),
            ],
        ),
        F(
            "features",
            [
                F("name", STRING),
                F("min_supported_version", INT16),
                F("max_supported_version", INT16),
            ],
        ),
        F("rack", STRING, nullable="0+", default=NULL),
        F("fenced", BOOL, default=True),
        F("in_controlled_shutdown", BOOL, "1+"),
        F("log_dirs", ArrayOf(UUID), "3+", tag=0),
    ],
    flexible_from=0,
)

TOPIC_RECORD = Message(2, "TopicRecord", [F("name", STRING), F("topic_id", UUID)], flexible_from=0)

PARTITION_RECORD = Message(
    3,
    "PartitionRecord",
    [
        F("partition_id", INT32, default=-1),
        F("topic_id", UUID),
        F("replicas", _INT32S),
        F("isr", _INT32S),
        F("removing_replicas", _INT32S),
        F("adding_replicas", _INT32S),
        F("leader", INT32, default=-1),
        F("leader_recovery_state", INT8, default=0, tag=0),
        F("leader_epoch", INT32, default=-1),
        F("partition_epoch", INT32, default=-1),
        F("directories", ArrayOf(UUID), "1+"),
        F("eligible_leader_replicas", _INT32S, "2+", nullable="2+", default=NULL, tag=1),
        F("last_known_elr", _INT32S, "2+", nullable="2+", default=NULL, tag=2),
    ],
    flexible_from=0,
)

CONFIG_RECORD = Message(
    4,
    "ConfigRecord",
    [
        F("resource_type", INT8),
        F("resource_name", STRING),
        F("name", STRING),
        F("value", STRING, nullable="0+"),
    ],
    flexible_from=0,
)

PARTITION_CHANGE_RECORD = Message(
    5,
    "PartitionChangeRecord",
    [
        F("partition_id", INT32, default=-1),
        F("topic_id", UUID),
        F("isr", _INT32S, nullable="0+", default=NULL, tag=0),
        F("leader", INT32, default=-2, tag=1),
        F("replicas", _INT32S, nullable="0+", default=NULL, tag=2),
        F("removing_replicas", _INT32S, nullable="0+", default=NULL, tag=3),
        F("adding_replicas", _INT32S, nullable="0+", default=NULL, tag=4),
        F("leader_recovery_state", INT8, default=-1, tag=5),
        F("directories", ArrayOf(UUID), "1+", nullable="1+", default=NULL, tag=8),
        F("eligible_leader_replicas", _INT32S, "2+", nullable="2+", default=NULL, tag=6),
        F("last_known_elr", _INT32S, "2+", nullable="2+", default=NULL, tag=7),
    ],
    flexible_from=0,
)

FENCE_BROKER_RECORD = Message(
    7, "FenceBrokerRecord", [F("id", INT32), F("epoch", INT64)], flexible_from=0
)

UNFENCE_BROKER_RECORD = Message(
    8, "UnfenceBrokerRecord", [F("id", INT32), F("epoch", INT64)], flexible_from=0
)

REMOVE_TOPIC_RECORD = Message(9, "RemoveTopicRecord", [F("topic_id", UUID)], flexible_from=0)

PRODUCER_IDS_RECORD = Message(
    15,
    "ProducerIdsRecord",
    [
        F("broker_id", INT32),
        F("broker_epoch", INT64, default=-1),
        F("next_producer_id", INT64),
    ],
    flexible_from=0,
)

BEGIN_TRANSACTION_RECORD = Message(
    23,
    "BeginTransactionRecord",
    [F("name", STRING, nullable="0+", default=NULL, tag=0)],
    flexible_from=0,
)

END_TRANSACTION_RECORD = Message(24, "EndTransactionRecord", [], flexible_from=0)

ABORT_TRANSACTION_RECORD = Message(
    25,
    "AbortTransactionRecord",
    [F("reason", STRING, nullable="0+", default=NULL, tag=0)],
    flexible_from=0,
)

#: kafkalab's own record type (not Kafka's): see the module docstring.
METADATA_SNAPSHOT_RECORD_API_KEY = 10000
METADATA_SNAPSHOT_RECORD = Message(
    METADATA_SNAPSHOT_RECORD_API_KEY,
    "MetadataSnapshotRecord",
    [F("end_offset", INT64)],
    flexible_from=0,
)


@dataclass(frozen=True)
class MetadataRecordType:
    """One record type (Kafka: MetadataRecordType): its schema, Kafka's enum name
    (what kafka-dump-log prints as "type") and the versions Kafka declares."""

    message: Message
    type_name: str
    lowest_version: int
    highest_version: int

    @property
    def api_key(self) -> int:
        return self.message.api_key

    @property
    def name(self) -> str:
        return self.message.name


METADATA_RECORDS: dict[int, MetadataRecordType] = {
    t.api_key: t
    for t in (
        MetadataRecordType(REGISTER_BROKER_RECORD, "REGISTER_BROKER_RECORD", 0, 3),
        MetadataRecordType(TOPIC_RECORD, "TOPIC_RECORD", 0, 0),
        MetadataRecordType(PARTITION_RECORD, "PARTITION_RECORD", 0, 2),
        MetadataRecordType(CONFIG_RECORD, "CONFIG_RECORD", 0, 0),
        MetadataRecordType(PARTITION_CHANGE_RECORD, "PARTITION_CHANGE_RECORD", 0, 2),
        MetadataRecordType(FENCE_BROKER_RECORD, "FENCE_BROKER_RECORD", 0, 0),
        MetadataRecordType(UNFENCE_BROKER_RECORD, "UNFENCE_BROKER_RECORD", 0, 0),
        MetadataRecordType(REMOVE_TOPIC_RECORD, "REMOVE_TOPIC_RECORD", 0, 0),
        MetadataRecordType(PRODUCER_IDS_RECORD, "PRODUCER_IDS_RECORD", 0, 0),
        MetadataRecordType(BEGIN_TRANSACTION_RECORD, "BEGIN_TRANSACTION_RECORD", 0, 0),
        MetadataRecordType(END_TRANSACTION_RECORD, "END_TRANSACTION_RECORD", 0, 0),
        MetadataRecordType(ABORT_TRANSACTION_RECORD, "ABORT_TRANSACTION_RECORD", 0, 0),
        MetadataRecordType(METADATA_SNAPSHOT_RECORD, "KAFKALAB_METADATA_SNAPSHOT_RECORD", 0, 0),
    )
}
