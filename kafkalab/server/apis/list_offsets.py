"""ListOffsets (2): the offset for a timestamp, or the earliest / latest offset.

Kafka: KafkaApis.handleListOffsetRequest -> ReplicaManager.fetchOffsetForTimestamp
-> Partition.fetchOffsetForTimestamp. Who may answer depends on the asker's
replica id, as in Kafka:

    -1 (a consumer)        the leader only (NOT_LEADER_OR_FOLLOWER elsewhere);
                           latest = the HW (the LSO under read_committed)
    -2 (a debugging tool)  any replica, from its own log; latest = its LEO
    >= 0 (a broker)        the leader only; latest = the LEO

v4+ requests carry the leader epoch the client believes current, and are fenced
by it (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH). The answer carries the
leader epoch of the offset found (KIP-320), or the current one for latest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalab.errors import KafkaError
from kafkalab.protocol.header import RequestHeader
from kafkalab.storage.unified_log import FetchIsolation

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis

CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2
READ_COMMITTED = 1


def handle_list_offsets(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    replica_id = body["replica_id"]
    if replica_id == CONSUMER_REPLICA_ID:
        committed = header.api_version >= 2 and body["isolation_level"] == READ_COMMITTED
        isolation = FetchIsolation.TXN_COMMITTED if committed else FetchIsolation.HIGH_WATERMARK
    else:
        isolation = FetchIsolation.LOG_END
    topics = []
    for topic in body["topics"]:
        partitions = [
            list_offset(apis, header.api_version, topic["name"], part, replica_id, isolation)
            for part in topic["partitions"]
        ]
        topics.append({"name": topic["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def list_offset(
    apis: KafkaApis,
    version: int,
    topic: str,
    part: dict,
    replica_id: int,
    isolation: FetchIsolation,
) -> dict:
    index = part["partition_index"]
    out = {
        "partition_index": index,
        "error_code": 0,
        "old_style_offsets": [],
        "timestamp": -1,
        "offset": -1,
        "leader_epoch": -1,
    }
    try:
        partition = apis.replica_manager.hosted_partition((topic, index))
        found = partition.fetch_offset_for_timestamp(
            part["timestamp"],
            isolation,
            part["current_leader_epoch"] if version >= 4 else -1,
            fetch_only_from_leader=replica_id != DEBUGGING_REPLICA_ID,
        )
    except KafkaError as e:
        out["error_code"] = int(e.code)
        return out
    if found is not None:
        out.update(timestamp=found.timestamp, offset=found.offset, leader_epoch=found.leader_epoch)
        if version == 0:
            out["old_style_offsets"] = [found.offset]
    return out


__all__ = ["CONSUMER_REPLICA_ID", "DEBUGGING_REPLICA_ID", "handle_list_offsets"]
