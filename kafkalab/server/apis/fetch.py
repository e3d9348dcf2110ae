"""Fetch (1): consumers read below the high watermark (read_committed ones below the
last stable offset, told which transactions were aborted); followers replicate.

Kafka: KafkaApis.handleFetchRequest -> ReplicaManager.fetchMessages. A follower's
fetch (replica_id >= 0) first tells its leader the follower's log end offset
(its fetch offset), which may move the HW and grow the ISR; then the fetch
reads. A fetch with a replica id is served only to that broker (KafkaApis.
follower_error: on the inter-broker listener, from a broker registered in the
epoch it names) and only for partitions it is a replica of (Kafka's
Partition.followerReplicaOrThrow: UNKNOWN_LEADER_EPOCH when the request names a
leader epoch, else NOT_LEADER_OR_FOLLOWER); anything else is answered with that
error, reads nothing and moves nothing.

When it answers, as Kafka's ReplicaManager.fetchMessages decides: it reads first,
and answers with that read at once when the request does not wait (max_wait_ms
<= 0), asks for nothing, read at least `min_bytes`, or met an error on any
partition (a refused follower partition too). Otherwise it waits in the
delayed-fetch purgatory (DelayedFetch says what answers it before max_wait_ms:
enough bytes below the HW, an error, a fetch offset past the HW or on an older
segment), and is read again then. Every requested partition is in the answer
(kafka-python drops a response that leaves one out) of a sessionless or full
fetch; fetch sessions (KIP-227, `fetch_session.py`: Fetch v7+, session id and
epoch, consumers and followers alike) make later fetches incremental: the
session's partitions are read (those with nothing to tell are skipped, see
there) and the answer carries only the changed ones. librdkafka fetches
sessionless (session 0, epoch -1); kafka-python and the followers keep sessions.
A consumer's `current_leader_epoch` (v9+) other than the leader's is answered
FENCED_LEADER_EPOCH (older) or UNKNOWN_LEADER_EPOCH (newer), as Kafka does.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kafkalab.errors import Errors
from kafkalab.protocol.header import RequestHeader
from kafkalab.replication.delayed_fetch import DelayedFetch, FetchPartition, ReadResult
from kafkalab.replication.partition import Role
from kafkalab.server.fetch_session import (
    FetchContext,
    PartitionData,
    PartitionResult,
    SessionlessFetchContext,
)
from kafkalab.storage.unified_log import FetchIsolation

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis

READ_COMMITTED = 1


def fetch_isolation(body: dict) -> FetchIsolation:
    """Followers read to the LEO; consumers to the HW, or the LSO under read_committed
    (Kafka: FetchParams.isolation)."""
    if body["replica_id"] >= 0:
        return FetchIsolation.LOG_END
    if body["isolation_level"] == READ_COMMITTED:
        return FetchIsolation.TXN_COMMITTED
    return FetchIsolation.HIGH_WATERMARK


def handle_fetch(apis: KafkaApis, header: RequestHeader, body: dict) -> Any:
    replica_id = body["replica_id"]
    if not apis.hears(replica_id):
        return apis.unheard(replica_id)
    rm = apis.replica_manager
    # A negative partition_max_bytes asks for nothing: read as 0 (so at most the one
    # whole batch a consumer needs to make progress), never handed to the log as is.
    fetch_data = {
        (t["topic"], p["partition"]): PartitionData(
            p["fetch_offset"],
            p.get("log_start_offset", -1),
            max(0, p["partition_max_bytes"]),
            p.get("current_leader_epoch", -1),
        )
        for t in body["topics"]
        for p in t["partitions"]
    }
    if header.api_version >= 7:
        forgotten = [
            (t["topic"], p)
            for t in body.get("forgotten_topics_data") or ()
            for p in t["partitions"]
        ]
        context = apis.fetch_manager.new_context(
            body.get("session_id", 0), body.get("session_epoch", -1), fetch_data, forgotten,
            replica_id >= 0,
        )  # fmt: skip
    else:
        context = SessionlessFetchContext(fetch_data)
    if context.error != Errors.NONE:
        return _answer(context, [], {})
    wanted = context.partitions()
    partitions = [FetchPartition(tp[0], tp[1], d.fetch_offset, d.max_bytes) for tp, d in wanted]
    epochs = {tp: d.current_leader_epoch for tp, d in wanted}
    refused: dict[tuple[str, int], Errors] = {}
    if replica_id >= 0:
        error = apis.follower_error(header, replica_id)
        for tp, d in wanted:
            part = rm.partition(tp)
            if error != Errors.NONE:
                refused[tp] = error
            elif part is None or part.role != Role.LEADER:
                continue  # the read answers NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC...
            elif replica_id not in part.remote:
                refused[tp] = (
                    Errors.UNKNOWN_LEADER_EPOCH
                    if d.current_leader_epoch >= 0
                    else Errors.NOT_LEADER_OR_FOLLOWER
                )
            else:
                # every partition of the session, asked this time or not: the
                # follower is still at its fetch offset (Kafka updates them all)
                rm.update_follower_fetch_state(tp, replica_id, d.fetch_offset, d.log_start_offset)
        if refused:
            partitions = [p for p in partitions if (p.topic, p.partition) not in refused]
    isolation = fetch_isolation(body)
    # a consumer's current_leader_epoch (v9+) fences it off a leader it does not know
    leader_epochs = epochs if replica_id < 0 else None
    first = read_partitions(apis, body, partitions, isolation, context, leader_epochs)
    if (
        body["max_wait_ms"] <= 0
        or not partitions
        or sum(result.size for _, result in first if result) >= body["min_bytes"]
        or refused  # a follower's partition it may not fetch is an error read
        or any(result.error != Errors.NONE for _, result in first if result)
    ):
        return _answer(context, first, refused, isolation)
    future = asyncio.get_running_loop().create_future()

    def answer() -> None:
        if not future.done():
            again = read_partitions(apis, body, partitions, isolation, context, leader_epochs)
            future.set_result(_answer(context, again, refused, isolation))

    # what the read found with nothing to read: the wait need not look at those again
    at_end = {
        (p.topic, p.partition)
        for p, result in first
        if result is None or (result.size == 0 and _at_end(rm, p, isolation))
    }
    op = DelayedFetch(
        body["max_wait_ms"], body["min_bytes"], isolation, partitions, rm, answer, at_end
    )
    keys = [(p.topic, p.partition) for p in partitions]
    rm.delayed_fetch.try_complete_else_watch(op, keys)
    return future


def _at_end(rm, p: FetchPartition, isolation: FetchIsolation) -> bool:
    part = rm.partitions.get((p.topic, p.partition))
    return part is not None and p.fetch_offset == part.log.last_fetchable_offset(isolation)


def _answer(
    context: FetchContext,
    results: list[tuple[FetchPartition, ReadResult]],
    refused: dict[tuple[str, int], Errors],
    isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
) -> dict:
    """The response: the session decides which partitions it carries (all but the
    unchanged ones of an incremental fetch; those not read are unchanged)."""
    answers = [(tp, ReadResult(error)) for tp, error in refused.items()]
    answers += [((p.topic, p.partition), r) for p, r in results if r is not None]
    error, session_id, carried = context.respond(
        [
            (tp, PartitionResult(r.error, r.high_watermark, r.log_start_offset, r.size))
            for tp, r in answers
        ]
    )
    response = fetch_response(
        [(FetchPartition(tp[0], tp[1], -1, 0), r) for tp, r in answers if tp in carried],
        isolation,
    )
    response["error_code"] = int(error)
    response["session_id"] = session_id
    return response


def _aborted(result) -> list[dict]:
    return [
        {"producer_id": txn.producer_id, "first_offset": txn.first_offset}
        for txn in result.aborted_transactions or ()
    ]


def read_partitions(
    apis: KafkaApis,
    body: dict,
    partitions: list[FetchPartition],
    isolation: FetchIsolation,
    context: FetchContext | None = None,
    leader_epochs: dict[tuple[str, int], int] | None = None,
) -> list[tuple[FetchPartition, ReadResult | None]]:
    """Read every requested partition now (Kafka: ReplicaManager.readFromLog): at most
    max_bytes in all, but the first partition with data returns at least one
    whole batch. A partition the fetch session says is unchanged is not read
    (None: it has nothing to send and its answer would be left out); a
    `leader_epochs` entry not the leader's is answered FENCED_LEADER_EPOCH (older)
    or UNKNOWN_LEADER_EPOCH (newer), as Kafka's Partition.localLogWithEpochOrThrow."""
    rm = apis.replica_manager
    remaining = body["max_bytes"]
    min_one = True
    results: list[tuple[FetchPartition, ReadResult | None]] = []
    for p in partitions:
        tp = (p.topic, p.partition)
        part = rm.partitions.get(tp)
        epoch = -1 if leader_epochs is None else leader_epochs.get(tp, -1)
        if part is not None and part.role == Role.LEADER:
            if 0 <= epoch != part.leader_epoch:
                error = (
                    Errors.FENCED_LEADER_EPOCH
                    if epoch < part.leader_epoch
                    else Errors.UNKNOWN_LEADER_EPOCH
                )
                results.append((p, ReadResult(error)))
                continue
            if context is not None:
                log = part.log
                if context.unchanged(
                    tp,
                    log.last_fetchable_offset(isolation),
                    log.high_watermark,
                    log.log_start_offset,
                ):
                    results.append((p, None))
                    continue
        limit = max(0, min(p.max_bytes, remaining))
        result = rm.read(p.topic, p.partition, p.fetch_offset, limit, min_one, isolation)
        if result.size:
            remaining -= result.size
            min_one = False
        results.append((p, result))
    return results


def fetch_response(
    results: list[tuple[FetchPartition, ReadResult]],
    isolation: FetchIsolation,
    refused: dict[tuple[str, int], Errors] | None = None,
) -> dict:
    """The response for what `read_partitions` read; `refused` partitions are
    answered with their error alone."""
    read_committed = isolation == FetchIsolation.TXN_COMMITTED
    topics: dict[str, list[dict]] = {}
    for (topic, partition), error in (refused or {}).items():
        topics.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "error_code": int(error),
                "high_watermark": -1,
                "last_stable_offset": -1,
                "log_start_offset": -1,
                "aborted_transactions": None,
                "preferred_read_replica": -1,
                "records": b"",
            }
        )
    for p, result in results:
        records = None
        if result.info is not None and result.size:
            # pinned: the response is sent later, maybe after this segment is closed
            records = result.info.records.pinned()
        topics.setdefault(p.topic, []).append(
            {
                "partition_index": p.partition,
                "error_code": int(result.error),
                "high_watermark": result.high_watermark,
                "last_stable_offset": result.last_stable_offset,
                "log_start_offset": result.log_start_offset,
                "aborted_transactions": _aborted(result) if read_committed else None,
                "preferred_read_replica": -1,
                "records": records if records is not None else b"",
            }
        )
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
    }
