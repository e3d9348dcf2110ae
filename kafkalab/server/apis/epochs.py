"""OffsetForLeaderEpoch (23): where did a leader epoch end in the leader's log?

Kafka: KafkaApis.handleOffsetForLeaderEpochRequest -> Partition.lastOffsetForLeaderEpoch.
Followers ask it before fetching, to find where to truncate (KIP-101, repeated
per KIP-279); consumers ask it to validate their position after a leader change
(KIP-320). Fenced by the asker's current leader epoch, answered by the leader
only.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.header import RequestHeader

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis

log = logging.getLogger(__name__)


def handle_offset_for_leader_epoch(apis: KafkaApis, header: RequestHeader, body: dict) -> Any:
    if not apis.hears(body["replica_id"]):
        return apis.unheard(body["replica_id"])
    topics = []
    for topic in body["topics"]:
        partitions = []
        for part in topic["partitions"]:
            out = {
                "error_code": 0,
                "partition": part["partition"],
                "leader_epoch": -1,
                "end_offset": -1,
            }
            try:
                p = apis.replica_manager.hosted_partition((topic["topic"], part["partition"]))
                epoch, end = p.last_offset_for_leader_epoch(
                    part["leader_epoch"], part["current_leader_epoch"]
                )
                out.update(leader_epoch=epoch, end_offset=end)
            except KafkaError as e:
                out["error_code"] = int(e.code)
            if body["replica_id"] < 0:  # a consumer checking its position (KIP-320)
                log.info(
                    "consumer offset validation: %s-%d epoch %d ends at %d (%s)",
                    topic["topic"],
                    part["partition"],
                    part["leader_epoch"],
                    out["end_offset"],
                    Errors(out["error_code"]).name,
                )
            partitions.append(out)
        topics.append({"topic": topic["topic"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
