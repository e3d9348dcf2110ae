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
(kafka-python drops a response that leaves one out); sessions (KIP-227) are not
kept: session 0.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kafkalab.errors import Errors
from kafkalab.protocol.header import RequestHeader
from kafkalab.replication.delayed_fetch import DelayedFetch, FetchPartition, ReadResult
from kafkalab.replication.partition import Role
from kafkalab.server.socket_server import CLOSE_CONNECTION
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
        return CLOSE_CONNECTION
    rm = apis.replica_manager
    # A negative partition_max_bytes asks for nothing: read as 0 (so at most the one
    # whole batch a consumer needs to make progress), never handed to the log as is.
    partitions = [
        FetchPartition(
            t["topic"], p["partition"], p["fetch_offset"], max(0, p["partition_max_bytes"])
        )
        for t in body["topics"]
        for p in t["partitions"]
    ]
    refused: dict[tuple[str, int], Errors] = {}
    if replica_id >= 0:
        error = apis.follower_error(header, replica_id)
        # the leader epoch the follower fetches in, and its log start offset (which a
        # DeleteRecords waits for), by partition
        epochs: dict[tuple[str, int], int] = {}
        starts: dict[tuple[str, int], int] = {}
        for t in body["topics"]:
            for fp in t["partitions"]:
                key = (t["topic"], fp["partition"])
                epochs[key], starts[key] = fp["current_leader_epoch"], fp["log_start_offset"]
        for p in partitions:
            tp = (p.topic, p.partition)
            part = rm.partition(tp)
            if error != Errors.NONE:
                refused[tp] = error
            elif part is None or part.role != Role.LEADER:
                continue  # the read answers NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC...
            elif replica_id not in part.remote:
                refused[tp] = (
                    Errors.UNKNOWN_LEADER_EPOCH
                    if epochs.get(tp, -1) >= 0
                    else Errors.NOT_LEADER_OR_FOLLOWER
                )
            else:
                rm.update_follower_fetch_state(tp, replica_id, p.fetch_offset, starts[tp])
        if refused:
            partitions = [p for p in partitions if (p.topic, p.partition) not in refused]
    isolation = fetch_isolation(body)
    first = read_partitions(apis, body, partitions, isolation)
    if (
        body["max_wait_ms"] <= 0
        or not partitions
        or sum(result.size for _, result in first) >= body["min_bytes"]
        or refused  # a follower's partition it may not fetch is an error read
        or any(result.error != Errors.NONE for _, result in first)
    ):
        return fetch_response(first, isolation, refused)
    future = asyncio.get_running_loop().create_future()

    def answer() -> None:
        if not future.done():
            again = read_partitions(apis, body, partitions, isolation)
            future.set_result(fetch_response(again, isolation, refused))

    op = DelayedFetch(body["max_wait_ms"], body["min_bytes"], isolation, partitions, rm, answer)
    keys = [(p.topic, p.partition) for p in partitions]
    rm.delayed_fetch.try_complete_else_watch(op, keys)
    return future


def _aborted(result) -> list[dict]:
    return [
        {"producer_id": txn.producer_id, "first_offset": txn.first_offset}
        for txn in result.aborted_transactions or ()
    ]


def read_partitions(
    apis: KafkaApis, body: dict, partitions: list[FetchPartition], isolation: FetchIsolation
) -> list[tuple[FetchPartition, ReadResult]]:
    """Read every requested partition now (Kafka: ReplicaManager.readFromLog): at most
    max_bytes in all, but the first partition with data returns at least one
    whole batch."""
    remaining = body["max_bytes"]
    min_one = True
    results = []
    for p in partitions:
        limit = max(0, min(p.max_bytes, remaining))
        result = apis.replica_manager.read(
            p.topic, p.partition, p.fetch_offset, limit, min_one, isolation
        )
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
