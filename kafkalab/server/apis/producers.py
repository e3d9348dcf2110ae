"""DescribeProducers (61): the producers a partition's leader knows, and their open transactions.

Kafka: KafkaApis.handleDescribeProducersRequest -> ReplicaManager.activeProducerState
(what `kafka-transactions.sh describe-producers` prints). Only the leader answers
(NOT_LEADER_OR_FOLLOWER elsewhere, UNKNOWN_TOPIC_OR_PARTITION for a partition
nobody has). Each producer: id, epoch, last sequence and timestamp, the epoch of
the coordinator that wrote its last marker, and the first offset of its ongoing
transaction (-1 when none is open), all from the partition's ProducerStateManager.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalab.errors import KafkaError
from kafkalab.protocol.header import RequestHeader

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis


def handle_describe_producers(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    topics = []
    for topic in body["topics"]:
        partitions = []
        for index in topic["partition_indexes"]:
            out = {
                "partition_index": index,
                "error_code": 0,
                "error_message": None,
                "active_producers": [],
            }
            try:
                producers = apis.replica_manager.active_producer_state((topic["name"], index))
            except KafkaError as e:
                out["error_code"] = int(e.code)
                out["error_message"] = e.message or None
            else:
                out["active_producers"] = [
                    {
                        "producer_id": p.producer_id,
                        "producer_epoch": p.producer_epoch,
                        "last_sequence": p.last_seq,
                        "last_timestamp": p.last_timestamp,
                        "coordinator_epoch": p.coordinator_epoch,
                        "current_txn_start_offset": (
                            -1 if p.current_txn_first_offset is None else p.current_txn_first_offset
                        ),
                    }
                    for p in producers
                ]
            partitions.append(out)
        topics.append({"name": topic["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


__all__ = ["handle_describe_producers"]
