"""Producer ids and transactions: thin adapters onto the TransactionCoordinatorService.

Kafka: KafkaApis.handleInitProducerIdRequest, handleAddPartitionsToTxnRequest,
handleAddOffsetsToTxnRequest, handleEndTxnRequest, handleWriteTxnMarkersRequest,
handleDescribeTransactionsRequest, handleListTransactionsRequest.

InitProducerId (22) without a transactional id: a new idempotent producer gets a
producer id that no other producer had (ProducerIdManager) and epoch 0. With one,
the transaction coordinator answers (kafkalab/coordinator/transaction/ holds
every rule), through the TransactionCoordinatorService, which runs it on
`__transaction_state`. PRODUCER_FENCED goes to older clients as
INVALID_PRODUCER_EPOCH (InitProducerId below v4, the others below v2), as Kafka
does.

AddPartitionsToTxn v4+ (KIP-890 part 1) comes from partition leaders: with
verify_only it asks whether partitions are in a producer's ongoing transaction,
and the coordinator answers from its state without writing anything (the
leader's side: kafkalab.server.add_partitions_to_txn_manager). Clients use v3
and below; a v4+ request that did not come from a broker is refused. Without
verify_only (transactions v2, KIP-890 part 2) it adds the partitions a leader got
a Produce v12+ for, as version 2 (Kafka: handleAddPartitionsToTransaction with
TV_2).

EndTxn v5+ is transactions v2: the coordinator bumps the epoch and the response
carries the producer id and epoch of the next transaction; v4 and below are
version 1 (kafkalab.server.features).

WriteTxnMarkers (27) comes from transaction coordinators (this broker's own too):
each marker is a control batch appended to the partition with acks=all (origin
COORDINATOR), answered once the ISR has it. A marker in a `__consumer_offsets`
partition also ends the producer's pending transactional offsets in the group
coordinator (GroupCoordinatorService.complete_transaction).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.header import RequestHeader
from kafkalab.records.control_record import ControlRecordType, build_end_txn_marker_batch
from kafkalab.replication.delayed_produce import AppendResult, DelayedProduce
from kafkalab.storage.unified_log import AppendOrigin

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis
    from kafkalab.server.transaction_coordinator_service import TransactionCoordinatorService

log = logging.getLogger(__name__)
MARKER_WRITE_TIMEOUT_MS = 30_000  # Kafka: request.timeout.ms of the marker channel


def _service(apis: KafkaApis) -> TransactionCoordinatorService:
    service = apis.transaction_coordinator
    if service is None:
        raise KafkaError(
            Errors.COORDINATOR_NOT_AVAILABLE, "this broker runs no transaction coordinator"
        )
    return service


def _fenced(error: Errors, version: int, first_version: int) -> Errors:
    """PRODUCER_FENCED is new in `first_version`; older clients get INVALID_PRODUCER_EPOCH."""
    if error == Errors.PRODUCER_FENCED and version < first_version:
        return Errors.INVALID_PRODUCER_EPOCH
    return error


async def handle_init_producer_id(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    out = {"throttle_time_ms": 0, "error_code": 0, "producer_id": -1, "producer_epoch": -1}
    # A broker in a cluster may have no block of producer ids from the controller
    # yet: COORDINATOR_LOAD_IN_PROGRESS, which clients retry (as from Kafka).
    try:
        if body["transactional_id"] is None:
            out.update(producer_id=apis.producer_ids.generate(), producer_epoch=0)
            return out
        result = await _service(apis).init_producer_id(
            body["transactional_id"],
            body["transaction_timeout_ms"],
            body.get("producer_id", -1),
            body.get("producer_epoch", -1),
        )
    except KafkaError as e:
        out["error_code"] = int(e.code)
        return out
    out.update(
        error_code=int(_fenced(result.error, header.api_version, 4)),
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )
    return out


async def handle_add_partitions_to_txn(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    if header.api_version >= 4:
        return await _add_partitions_from_broker(apis, header, body)
    out = await _add_partitions(
        apis,
        header,
        body["v3_and_below_transactional_id"],
        body["v3_and_below_producer_id"],
        body["v3_and_below_producer_epoch"],
        body["v3_and_below_topics"],
        verify_only=False,
    )
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": out}


async def _add_partitions_from_broker(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    """v4+, the brokers' batched form (KIP-890 part 1): several transactions in one
    request, each either added or, with verify_only, only checked (a partition
    leader asking before a producer's first transactional write to it). Only
    brokers send it: Kafka answers a principal without CLUSTER_ACTION with the
    top-level CLUSTER_AUTHORIZATION_FAILED; here, a request that did not come on
    the inter-broker listener (as WriteTxnMarkers)."""
    if not apis.from_broker(header):
        return {
            "throttle_time_ms": 0,
            "error_code": int(Errors.CLUSTER_AUTHORIZATION_FAILED),
            "results_by_transaction": [],
        }
    results = []
    for txn in body["transactions"]:
        topic_results = await _add_partitions(
            apis,
            header,
            txn["transactional_id"],
            txn["producer_id"],
            txn["producer_epoch"],
            txn["topics"],
            verify_only=txn["verify_only"],
        )
        results.append(
            {"transactional_id": txn["transactional_id"], "topic_results": topic_results}
        )
    return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}


async def _add_partitions(
    apis: KafkaApis,
    header: RequestHeader,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    requested: list[dict],
    *,
    verify_only: bool,
) -> list[dict]:
    """One transaction's partitions added (or, `verify_only`, checked): the
    results by topic, as both forms of the response carry them."""
    wanted = [(t["name"], p) for t in requested for p in t["partitions"]]
    topics = apis.metadata_cache.topics()
    unknown = {tp for tp in wanted if tp[0] not in topics or tp[1] not in topics[tp[0]].partitions}
    if unknown:
        errors = {
            tp: Errors.UNKNOWN_TOPIC_OR_PARTITION
            if tp in unknown
            else Errors.OPERATION_NOT_ATTEMPTED
            for tp in wanted
        }
    elif verify_only:
        errors = (
            _service(apis)
            .verify_partitions_in_txn(transactional_id, producer_id, producer_epoch, wanted)
            .errors
        )
    else:
        # a client's AddPartitionsToTxn is version 1; a leader's add (v4+) is version 2
        version = 2 if header.api_version >= 4 else 1
        result = await _service(apis).add_partitions_to_txn(
            transactional_id, producer_id, producer_epoch, wanted, version
        )
        errors = result.errors
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), error in sorted(errors.items()):
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "partition_error_code": int(_fenced(error, header.api_version, 2)),
            }
        )
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


async def handle_add_offsets_to_txn(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    result = await _service(apis).add_offsets_to_txn(
        body["transactional_id"],
        body["producer_id"],
        body["producer_epoch"],
        body["group_id"],
    )
    return {"throttle_time_ms": 0, "error_code": int(_fenced(result.error, header.api_version, 2))}


async def handle_end_txn(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    result = await _service(apis).end_txn(
        body["transactional_id"],
        body["producer_id"],
        body["producer_epoch"],
        body["committed"],
        2 if header.api_version >= 5 else 1,
    )
    return {
        "throttle_time_ms": 0,
        "error_code": int(_fenced(result.error, header.api_version, 2)),
        "producer_id": result.producer_id,
        "producer_epoch": result.producer_epoch,
    }


async def handle_write_txn_markers(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    if not apis.from_broker(header):
        # Only a transaction coordinator, on a broker, writes markers: Kafka answers
        # a principal without CLUSTER_ACTION CLUSTER_AUTHORIZATION_FAILED for every
        # partition; here, a request that did not come on the inter-broker listener.
        refused = int(Errors.CLUSTER_AUTHORIZATION_FAILED)
        return {
            "markers": [
                {
                    "producer_id": m["producer_id"],
                    "topics": [
                        {
                            "name": t["name"],
                            "partitions": [
                                {"partition_index": p, "error_code": refused}
                                for p in t["partition_indexes"]
                            ],
                        }
                        for t in m["topics"]
                    ],
                }
                for m in body["markers"]
            ]
        }
    rm = apis.replica_manager
    answers = []
    for marker in body["markers"]:
        kind = ControlRecordType.COMMIT if marker["transaction_result"] else ControlRecordType.ABORT
        try:
            batch = build_end_txn_marker_batch(
                marker["producer_id"], marker["producer_epoch"], kind, marker["coordinator_epoch"]
            )
        except ValueError as e:  # no producer id / epoch: no marker can be built
            log.info("WriteTxnMarkers refused: %s", e)
            batch = None
        results: dict[tuple[str, int], AppendResult] = {}
        for topic in marker["topics"]:
            for p in topic["partition_indexes"]:
                tp = (topic["name"], p)
                if batch is None:
                    results[tp] = AppendResult(Errors.INVALID_REQUEST)
                    continue
                results[tp] = rm.append_records(
                    *tp, batch, required_acks=-1, origin=AppendOrigin.COORDINATOR
                )
                if results[tp].error != Errors.NONE:
                    log.info("marker for %s-%d refused: %s", *tp, results[tp].error.name)
        waiting = {tp: r for tp, r in results.items() if r.error == Errors.NONE}
        if waiting:
            done = asyncio.get_running_loop().create_future()
            op = DelayedProduce(
                MARKER_WRITE_TIMEOUT_MS,
                rm.partition,
                waiting,
                lambda _, done=done: done.done() or done.set_result(None),
            )
            if not rm.delayed_produce.try_complete_else_watch(op, list(waiting)):
                await done
        for (topic, p), r in results.items():
            if topic == OFFSETS_TOPIC and r.error == Errors.NONE:
                await _complete_offsets(
                    apis, p, marker["producer_id"], marker["transaction_result"]
                )
        by_topic: dict[str, list[dict]] = {}
        for (topic, p), r in results.items():
            by_topic.setdefault(topic, []).append(
                {"partition_index": p, "error_code": int(r.error)}
            )
        answers.append(
            {
                "producer_id": marker["producer_id"],
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            }
        )
    return {"markers": answers}


async def _complete_offsets(apis: KafkaApis, partition: int, producer_id: int, committed: bool):
    """The group coordinator makes the producer's pending transactional offsets in
    this __consumer_offsets partition committed (or drops them)."""
    if apis.group_coordinator is None:  # a broker without one: nothing pends
        return
    await apis.group_coordinator.complete_transaction(partition, producer_id, committed)


def handle_describe_transactions(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    described = _service(apis).describe_transactions(body["transactional_ids"])
    states = []
    for d in described:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(d.partitions):
            by_topic.setdefault(topic, []).append(p)
        states.append(
            {
                "error_code": int(d.error),
                "transactional_id": d.transactional_id,
                "transaction_state": d.state,
                "transaction_timeout_ms": d.transaction_timeout_ms,
                "transaction_start_time_ms": d.transaction_start_time_ms,
                "producer_id": d.producer_id,
                "producer_epoch": d.producer_epoch,
                "topic_partitions": [
                    {"name": t, "partition_indexes": ps} for t, ps in by_topic.items()
                ],
            }
        )
    return {"throttle_time_ms": 0, "transaction_states": states}


def handle_list_transactions(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    result = _service(apis).list_transactions(body["state_filters"], body["producer_id_filters"])
    return {
        "throttle_time_ms": 0,
        "error_code": int(result.error),
        "unknown_state_filters": list(result.unknown_state_filters),
        "transaction_states": [
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "transaction_state": t.state,
            }
            for t in result.transactions
        ],
    }
