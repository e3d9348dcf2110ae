"""Produce (0): append each partition's batches on its leader.

Kafka: KafkaApis.handleProduceRequest -> ReplicaManager.appendRecords. acks=1
answers once the leader has written; acks=all waits in the delayed-produce
purgatory until the ISR has the records (DelayedProduce); acks=0 gets no
response at all.

With transaction.partition.verification.enable (KIP-890 part 1), a producer's
first transactional batch in a partition waits for its transaction coordinator
to confirm that the partition is in the producer's ongoing transaction
(AddPartitionsToTxnManager); refused, nothing is written and the client gets
INVALID_TXN_STATE for that partition.

Transactions v2 (KIP-890 part 2): a transactional Produce v12+ comes from a
client that did not send AddPartitionsToTxn; the leader adds the partition to
the producer's transaction itself (AddPartitionsToTxnManager.add_to_transaction),
before the producer's first batch of a transaction in the partition, with or
without verification, and appends once the coordinator has it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.header import RequestHeader
from kafkalab.records.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    MAGIC,
    MAGIC_OFFSET,
    CompressionType,
    read_header,
)
from kafkalab.replication.delayed_produce import AppendResult, DelayedProduce
from kafkalab.server.add_partitions_to_txn_manager import produce_error
from kafkalab.storage.producer_state_manager import VerificationGuard

if TYPE_CHECKING:
    from kafkalab.replication.replica_manager import ReplicaManager
    from kafkalab.server.kafka_apis import KafkaApis

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]
ADD_RETRY_BACKOFF_MS = 20  # Kafka: add.partitions.to.txn.retry.backoff.ms
ADD_RETRY_MAX_MS = 100  # Kafka: add.partitions.to.txn.retry.backoff.max.ms


def handle_produce(apis: KafkaApis, header: RequestHeader, body: dict) -> Any:
    acks = body["acks"]
    results: dict[TopicPartition, AppendResult | None] = {}  # request order
    records: dict[TopicPartition, Any] = {}
    for topic in body["topics"]:
        for part in topic["partitions"]:
            tp = (topic["name"], part["partition_index"])
            if acks not in (0, 1, -1):
                results[tp] = AppendResult(Errors.INVALID_REQUIRED_ACKS)
                continue
            results[tp] = validate_records(header.api_version, part["records"])
            if results[tp] is None:
                records[tp] = part["records"]
    verifier = apis.add_partitions_to_txn_manager
    v2 = header.api_version >= 12  # transactions v2: the leader adds the partition
    if verifier is not None and body.get("transactional_id") and records:
        if v2 or apis.transaction_verification_enable:
            guards, asks = start_verification(apis.replica_manager, records)
            if asks:
                return _verify_then_append(apis, body, results, records, guards, asks, add=v2)
            return _append(apis, body, results, records, guards)
    return _append(apis, body, results, records, {})


def start_verification(
    rm: ReplicaManager, records: dict[TopicPartition, Any]
) -> tuple[dict[TopicPartition, VerificationGuard], dict[tuple[int, int], list[TopicPartition]]]:
    """Transaction verification on (KIP-890 part 1): the guard of each partition's
    transactional batch, and the partitions to ask the coordinator about, by
    (producer id, epoch): those where the producer has no transaction ongoing yet
    (Kafka: ReplicaManager.appendRecords -> maybeStartTransactionVerificationForPartition)."""
    guards: dict[TopicPartition, VerificationGuard] = {}
    asks: dict[tuple[int, int], list[TopicPartition]] = {}
    for tp, batch in records.items():
        if not batch:
            continue  # the log answers an empty batch as corrupt
        try:
            h = read_header(batch)
        except KafkaError:
            continue  # the log refuses it as it is
        if not h.is_transactional or h.is_control_batch or h.producer_id < 0:
            continue
        try:
            guards[tp] = rm.maybe_start_transaction_verification(
                *tp, h.producer_id, h.producer_epoch
            )
        except KafkaError:
            continue  # not the leader: the append answers that
        if guards[tp] is not VerificationGuard.SENTINEL:
            asks.setdefault((h.producer_id, h.producer_epoch), []).append(tp)
    return guards, asks


async def _verify_then_append(
    apis: KafkaApis,
    body: dict,
    results: dict[TopicPartition, AppendResult | None],
    records: dict[TopicPartition, Any],
    guards: dict[TopicPartition, VerificationGuard],
    asks: dict[tuple[int, int], list[TopicPartition]],
    *,
    add: bool = False,
) -> dict | None:
    """Ask the coordinator (verify, or with `add`, add the partitions), then append
    what it confirmed."""
    verifier = apis.add_partitions_to_txn_manager
    assert verifier is not None
    ask = verifier.add_to_transaction if add else verifier.verify_transaction
    for (producer_id, epoch), tps in asks.items():
        answers = await ask(body["transactional_id"], producer_id, epoch, tps)
        waited = 0
        while (
            add and waited < ADD_RETRY_MAX_MS and Errors.CONCURRENT_TRANSACTIONS in answers.values()
        ):
            # Kafka's leader asks again a little later rather than send the client
            # back (add.partitions.to.txn.retry.backoff.ms / .max.ms): the last
            # transaction's markers are being written and take a moment. Each try
            # starts the verification again: a marker written meanwhile spent the
            # partition's guard.
            await asyncio.sleep(ADD_RETRY_BACKOFF_MS / 1000)
            waited += ADD_RETRY_BACKOFF_MS
            again, again_asks = start_verification(
                apis.replica_manager, {tp: records[tp] for tp in tps}
            )
            guards.update(again)
            tps = again_asks.get((producer_id, epoch), [])
            if not tps:
                answers = {}
                break
            answers = await ask(body["transactional_id"], producer_id, epoch, tps)
        for tp, answer in answers.items():
            error, message = produce_error(answer, add)
            if error != Errors.NONE:
                log.info("produce to %s-%d refused by verification: %s", *tp, answer.name)
                results[tp] = AppendResult(error, message=message)
                del records[tp]
    answer = _append(apis, body, results, records, guards)
    return await answer if isinstance(answer, asyncio.Future) else answer


def _append(
    apis: KafkaApis,
    body: dict,
    results: dict[TopicPartition, AppendResult | None],
    records: dict[TopicPartition, Any],
    guards: dict[TopicPartition, VerificationGuard],
) -> Any:
    """Append what passed the checks (with its verification guard, if any); answer
    now, or (acks=all) once the ISR has it; acks=0: no answer."""
    rm = apis.replica_manager
    acks = body["acks"]
    for tp, batch in records.items():
        result = rm.append_records(tp[0], tp[1], batch, acks, verification_guard=guards.get(tp))
        results[tp] = result
        if result.message and result.error != Errors.NONE:
            log.info("produce to %s-%d refused: %s", *tp, result.message)
    done: dict[TopicPartition, AppendResult] = {tp: r for tp, r in results.items() if r}
    if acks == 0:
        return None  # the client does not read a response
    waiting = {tp: r for tp, r in done.items() if r.error == Errors.NONE}
    if acks == -1 and waiting:
        future = asyncio.get_running_loop().create_future()
        op = DelayedProduce(
            body["timeout_ms"],
            rm.partition,
            waiting,
            lambda _: future.done() or future.set_result(produce_response(done)),
        )
        if not rm.delayed_produce.try_complete_else_watch(op, list(waiting)):
            return future
    return produce_response(done)


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
