"""DeleteRecords (21): move the log start offset of partitions this broker leads.

Kafka: KafkaApis.handleDeleteRecordsRequest -> ReplicaManager.deleteRecords. For
each partition the leader moves its log start offset to the offset asked for
(-1: the high watermark; past the HW: OFFSET_OUT_OF_RANGE; a topic whose
cleanup.policy has no delete: POLICY_VIOLATION; an internal topic:
INVALID_TOPIC_EXCEPTION), then the request waits in the delayed-delete-records
purgatory until every follower on a live broker has moved its own start there
too (they learn it from the leader's fetch answers and report it in their next
fetch), or for timeout_ms (REQUEST_TIMED_OUT). The answer's low_watermark is the
new log start offset. Segments wholly below it are deleted by the next retention
pass, and the log-start-offset checkpoint follows.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC
from kafkalab.coordinator.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from kafkalab.errors import Errors
from kafkalab.protocol.header import RequestHeader
from kafkalab.replication.delayed_delete_records import DelayedDeleteRecords, DeleteRecordsResult

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis

TopicPartition = tuple[str, int]
#: Kafka's Topic.isInternal: records of these are deleted only by their coordinators.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


def handle_delete_records(apis: KafkaApis, header: RequestHeader, body: dict) -> Any:
    rm = apis.replica_manager
    results: dict[TopicPartition, DeleteRecordsResult] = {}
    for topic in body["topics"]:
        for part in topic["partitions"]:
            tp = (topic["name"], part["partition_index"])
            if tp[0] in INTERNAL_TOPICS:
                results[tp] = DeleteRecordsResult(Errors.INVALID_TOPIC_EXCEPTION)
            elif not apis.metadata_cache.contains_partition(tp):
                results[tp] = DeleteRecordsResult(Errors.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                results[tp] = rm.delete_records_on_leader(tp, part["offset"])
    waiting = {tp: r for tp, r in results.items() if r.error == Errors.NONE}
    if not waiting:
        return delete_records_response(results)
    future = asyncio.get_running_loop().create_future()
    op = DelayedDeleteRecords(
        body["timeout_ms"],
        rm.partition,
        rm.broker_alive,
        waiting,
        lambda _: future.done() or future.set_result(delete_records_response(results)),
    )
    if rm.delayed_delete_records.try_complete_else_watch(op, list(waiting)):
        return delete_records_response(results)
    return future


def delete_records_response(results: dict[TopicPartition, DeleteRecordsResult]) -> dict:
    topics: dict[str, list[dict]] = {}
    for (topic, partition), result in results.items():
        topics.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "low_watermark": result.low_watermark,
                "error_code": int(result.error),
            }
        )
    return {
        "throttle_time_ms": 0,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


__all__ = ["INTERNAL_TOPICS", "handle_delete_records"]
