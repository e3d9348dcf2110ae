"""Produce (0): append each partition's batches on its leader.

Kafka: KafkaApis.handleProduceRequest -> ReplicaManager.appendRecords. acks=1
answers once the leader has written; acks=all waits in the delayed-produce
purgatory until the ISR has the records (DelayedProduce); acks=0 gets no
response at all.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from kafkalab.errors import Errors
from kafkalab.protocol.header import RequestHeader
from kafkalab.records.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    MAGIC,
    MAGIC_OFFSET,
    CompressionType,
)
from kafkalab.replication.delayed_produce import AppendResult, DelayedProduce

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]


def handle_produce(apis: KafkaApis, header: RequestHeader, body: dict) -> Any:
    rm = apis.replica_manager
    acks = body["acks"]
    results: dict[TopicPartition, AppendResult] = {}
    for topic in body["topics"]:
        for part in topic["partitions"]:
            tp = (topic["name"], part["partition_index"])
            if acks not in (0, 1, -1):
                results[tp] = AppendResult(Errors.INVALID_REQUIRED_ACKS)
                continue
            refused = validate_records(header.api_version, part["records"])
            if refused is not None:
                results[tp] = refused
                continue
            results[tp] = rm.append_records(tp[0], tp[1], part["records"], acks)
            if results[tp].message and results[tp].error != Errors.NONE:
                log.info("produce to %s-%d refused: %s", *tp, results[tp].message)
    if acks == 0:
        return None  # the client does not read a response
    waiting = {tp: r for tp, r in results.items() if r.error == Errors.NONE}
    if acks == -1 and waiting:
        future = asyncio.get_running_loop().create_future()
        op = DelayedProduce(
            body["timeout_ms"],
            rm.partition,
            waiting,
            lambda _: future.done() or future.set_result(produce_response(results)),
        )
        if not rm.delayed_produce.try_complete_else_watch(op, list(waiting)):
            return future
    return produce_response(results)


def validate_records(version: int, records: Any) -> AppendResult | None:
    """What Kafka checks before the log sees a partition's records (Kafka:
    ProduceRequest.validateRecords): v3+ carries RecordBatch v2 only, so a magic
    0/1 message set is INVALID_RECORD (not CORRUPT_MESSAGE, which clients retry
    until they time out), and zstd needs v7+ (UNSUPPORTED_COMPRESSION_TYPE)."""
    if not records or len(records) <= MAGIC_OFFSET:
        return None  # the log answers an empty or cut batch as corrupt
    magic = records[MAGIC_OFFSET]
    if magic != MAGIC:
        return AppendResult(
            Errors.INVALID_RECORD,
            message=f"Produce requests with version {version} are only allowed to contain "
            f"record batches with magic version 2 (this one has magic {magic}); a client "
            "that writes magic 0 or 1 needs a broker older than Kafka 4.0",
        )
    if version < 7 and len(records) > ATTRIBUTES_OFFSET + 1:
        codec = records[ATTRIBUTES_OFFSET + 1] & COMPRESSION_CODEC_MASK
        if codec == CompressionType.ZSTD:
            return AppendResult(
                Errors.UNSUPPORTED_COMPRESSION_TYPE,
                message=f"Produce requests with version {version} cannot carry zstd "
                "batches: zstd needs Produce v7 or later",
            )
    return None


def produce_response(results: dict[TopicPartition, AppendResult]) -> dict:
    topics: dict[str, list[dict]] = {}
    for (topic, index), r in results.items():
        topics.setdefault(topic, []).append(
            {
                "partition_index": index,
                "error_code": int(r.error),
                "base_offset": r.base_offset,
                "log_append_time_ms": r.log_append_time,
                "log_start_offset": r.log_start_offset,
                "record_errors": [
                    {"batch_index": index, "batch_index_error_message": why}
                    for index, why in r.record_errors
                ],
                "error_message": r.message,
            }
        )
    return {
        "responses": [{"name": t, "partitions": p} for t, p in topics.items()],
        "throttle_time_ms": 0,
    }
