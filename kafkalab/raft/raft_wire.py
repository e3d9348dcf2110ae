"""raft_wire: kafkalab.raft's messages to and from Kafka's request and response bodies
(Kafka: KafkaRaftClient's buildVoteRequest/handleVoteRequest..., RaftUtil).

kafkalab.raft is sans-IO and speaks RaftMessage data (raft_message.py); a controller
puts them on sockets as Kafka's requests: VoteRequest v2, BeginQuorumEpochRequest
v1, EndQuorumEpochRequest v1, FetchRequest v16 (ReplicaState, LastFetchedEpoch,
ClusterId; the topic named by its id, Kafka's METADATA_TOPIC_ID; the answer's
SnapshotId), FetchSnapshotRequest v1 (KIP-630; the answer's bytes are the
snapshot's from Position, not cut at a batch boundary) and
DescribeQuorumResponse v2, each with the one topic `__cluster_metadata` and its
partition 0 (schemas: kafkalab/protocol/messages/raft.py and fetch.py). A Fetch
response's Records are the entries as record batches (record_serde.py).

    WIRE_VERSIONS                    the version a voter sends of each API
    request_to_body(data)            RaftRequestData -> (api key, version, body)
    request_from_body(key, body)     the inverse (any version the schema knows)
    response_to_body(data)           RaftResponseData -> body (its request's key)
    response_from_body(key, body)    the inverse
    describe_quorum_to_body(resp)    DescribeQuorumResponse -> body, and back:
    describe_quorum_from_body(body)

Fields KIP-853 added for dynamic voters (directory ids, endpoints) are sent with
their defaults: the voter set is static (kraft.version 0).
"""

from __future__ import annotations

import uuid
from typing import Any

from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.raft.raft_log import OffsetAndEpoch
from kafkalab.raft.raft_message import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftRequestData,
    RaftResponseData,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)
from kafkalab.raft.record_serde import decode_entries, encode_entries

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka: Uuid.METADATA_TOPIC_ID (AAAAAAAAAAAAAAAAAAAAAQ)

WIRE_VERSIONS: dict[ApiKeys, int] = {
    ApiKeys.VOTE: 2,
    ApiKeys.BEGIN_QUORUM_EPOCH: 1,
    ApiKeys.END_QUORUM_EPOCH: 1,
    ApiKeys.FETCH: 16,
    ApiKeys.DESCRIBE_QUORUM: 2,
    ApiKeys.FETCH_SNAPSHOT: 1,
}

FETCH_MAX_WAIT_MS = 500  # Kafka: controller.quorum.fetch... uses the fetch timeout / 2


def _one(body: dict, key: str = "topics") -> dict:
    """The one partition of the metadata topic in a request or response body."""
    topics = body.get(key) or []
    if len(topics) != 1 or len(topics[0].get("partitions") or []) != 1:
        raise ValueError(f"a KRaft message holds one topic with one partition, got {topics!r}")
    return topics[0]["partitions"][0]


def _topic(partition: dict) -> list[dict]:
    return [{"topic_name": METADATA_TOPIC, "partitions": [partition]}]


def api_key_of(data: RaftRequestData | RaftResponseData) -> ApiKeys:
    if isinstance(data, VoteRequest | VoteResponse):
        return ApiKeys.VOTE
    if isinstance(data, BeginQuorumEpochRequest | BeginQuorumEpochResponse):
        return ApiKeys.BEGIN_QUORUM_EPOCH
    if isinstance(data, EndQuorumEpochRequest | EndQuorumEpochResponse):
        return ApiKeys.END_QUORUM_EPOCH
    if isinstance(data, FetchRequest | FetchResponse):
        return ApiKeys.FETCH
    if isinstance(data, FetchSnapshotRequest | FetchSnapshotResponse):
        return ApiKeys.FETCH_SNAPSHOT
    raise TypeError(f"not a KRaft message: {data!r}")


# -- requests -----------------------------------------------------------------------------------


def request_to_body(data: RaftRequestData) -> tuple[ApiKeys, int, dict[str, Any]]:
    key = api_key_of(data)
    version = WIRE_VERSIONS[key]
    if isinstance(data, VoteRequest):
        body = {
            "cluster_id": data.cluster_id,
            "voter_id": -1,
            "topics": _topic(
                {
                    "partition_index": METADATA_PARTITION,
                    "replica_epoch": data.replica_epoch,
                    "replica_id": data.replica_id,
                    "last_offset_epoch": data.last_offset_epoch,
                    "last_offset": data.last_offset,
                    "pre_vote": data.pre_vote,
                }
            ),
        }
    elif isinstance(data, BeginQuorumEpochRequest):
        body = {
            "cluster_id": data.cluster_id,
            "voter_id": -1,
            "topics": _topic(
                {
                    "partition_index": METADATA_PARTITION,
                    "leader_id": data.leader_id,
                    "leader_epoch": data.leader_epoch,
                }
            ),
            "leader_endpoints": [],
        }
    elif isinstance(data, EndQuorumEpochRequest):
        body = {
            "cluster_id": data.cluster_id,
            "topics": _topic(
                {
                    "partition_index": METADATA_PARTITION,
                    "leader_id": data.leader_id,
                    "leader_epoch": data.leader_epoch,
                    "preferred_successors": list(data.preferred_successors),
                    "preferred_candidates": [
                        {"candidate_id": c, "candidate_directory_id": uuid.UUID(int=0)}
                        for c in data.preferred_successors
                    ],
                }
            ),
            "leader_endpoints": [],
        }
    elif isinstance(data, FetchSnapshotRequest):
        body = {
            "cluster_id": data.cluster_id,
            "replica_id": data.replica_id,
            "max_bytes": data.max_bytes,
            "topics": [
                {
                    "name": METADATA_TOPIC,
                    "partitions": [
                        {
                            "partition": METADATA_PARTITION,
                            "current_leader_epoch": data.current_leader_epoch,
                            "snapshot_id": {
                                "end_offset": data.snapshot_id.offset,
                                "epoch": data.snapshot_id.epoch,
                            },
                            "position": data.position,
                            "replica_directory_id": uuid.UUID(int=0),
                        }
                    ],
                }
            ],
        }
    else:
        body = {
            "cluster_id": data.cluster_id,
            "replica_id": data.replica_id,  # v0-14
            "replica_state": {"replica_id": data.replica_id, "replica_epoch": -1},  # v15+
            "max_wait_ms": FETCH_MAX_WAIT_MS,
            "min_bytes": 0,
            "max_bytes": 8 * 1024 * 1024,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": METADATA_TOPIC,
                    "topic_id": METADATA_TOPIC_ID,
                    "partitions": [
                        {
                            "partition": METADATA_PARTITION,
                            "current_leader_epoch": data.current_leader_epoch,
                            "fetch_offset": data.fetch_offset,
                            "last_fetched_epoch": data.last_fetched_epoch,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1024 * 1024,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
    return key, version, body


def request_from_body(key: ApiKeys, body: dict[str, Any]) -> RaftRequestData:
    cluster_id = body.get("cluster_id")
    if key == ApiKeys.VOTE:
        p = _one(body)
        return VoteRequest(
            p["replica_epoch"],
            p["replica_id"],
            p["last_offset_epoch"],
            p["last_offset"],
            bool(p.get("pre_vote", False)),
            cluster_id,
        )
    if key == ApiKeys.BEGIN_QUORUM_EPOCH:
        p = _one(body)
        return BeginQuorumEpochRequest(p["leader_id"], p["leader_epoch"], cluster_id)
    if key == ApiKeys.END_QUORUM_EPOCH:
        p = _one(body)
        candidates = p.get("preferred_candidates") or []
        successors = (
            tuple(c["candidate_id"] for c in candidates)
            if candidates
            else tuple(p.get("preferred_successors") or ())
        )
        return EndQuorumEpochRequest(p["leader_id"], p["leader_epoch"], successors, cluster_id)
    if key == ApiKeys.FETCH:
        p = _one(body)
        state = body.get("replica_state") or {}
        replica_id = state.get("replica_id", -1)
        if replica_id < 0:
            replica_id = body.get("replica_id", -1)
        return FetchRequest(
            replica_id,
            p["current_leader_epoch"],
            p["fetch_offset"],
            p["last_fetched_epoch"],
            cluster_id,
        )
    if key == ApiKeys.FETCH_SNAPSHOT:
        p = _one(body)
        sid = p["snapshot_id"]
        return FetchSnapshotRequest(
            body["replica_id"],
            p["current_leader_epoch"],
            OffsetAndEpoch(sid["end_offset"], sid["epoch"]),
            p["position"],
            body["max_bytes"],
            cluster_id,
        )
    raise ValueError(f"api key {key} is not a KRaft request")


# -- responses ----------------------------------------------------------------------------------


def response_to_body(data: RaftResponseData) -> dict[str, Any]:
    if isinstance(data, VoteResponse):
        return {
            "error_code": Errors.NONE,
            "topics": _topic(
                {
                    "partition_index": METADATA_PARTITION,
                    "error_code": data.error_code,
                    "leader_id": data.leader_id,
                    "leader_epoch": data.leader_epoch,
                    "vote_granted": data.vote_granted,
                }
            ),
        }
    if isinstance(data, BeginQuorumEpochResponse | EndQuorumEpochResponse):
        return {
            "error_code": Errors.NONE,
            "topics": _topic(
                {
                    "partition_index": METADATA_PARTITION,
                    "error_code": data.error_code,
                    "leader_id": data.leader_id,
                    "leader_epoch": data.leader_epoch,
                }
            ),
        }
    if isinstance(data, FetchSnapshotResponse):
        return {
            "throttle_time_ms": 0,
            "error_code": Errors.NONE,
            "topics": [
                {
                    "name": METADATA_TOPIC,
                    "partitions": [
                        {
                            "index": METADATA_PARTITION,
                            "error_code": data.error_code,
                            "snapshot_id": {
                                "end_offset": data.snapshot_id.offset,
                                "epoch": data.snapshot_id.epoch,
                            },
                            "current_leader": {
                                "leader_id": data.leader_id,
                                "leader_epoch": data.leader_epoch,
                            },
                            "size": data.size,
                            "position": data.position,
                            "unaligned_records": data.data,
                        }
                    ],
                }
            ],
            "node_endpoints": [],
        }
    assert isinstance(data, FetchResponse)
    snapshot = (
        {"end_offset": data.snapshot_id.offset, "epoch": data.snapshot_id.epoch}
        if data.snapshot_id is not None
        else {"end_offset": -1, "epoch": -1}
    )
    diverging = (
        {"epoch": data.diverging_epoch.epoch, "end_offset": data.diverging_epoch.offset}
        if data.diverging_epoch is not None
        else {"epoch": -1, "end_offset": -1}
    )
    return {
        "throttle_time_ms": 0,
        "error_code": Errors.NONE,
        "session_id": 0,
        "responses": [
            {
                "topic": METADATA_TOPIC,
                "topic_id": METADATA_TOPIC_ID,
                "partitions": [
                    {
                        "partition_index": METADATA_PARTITION,
                        "error_code": data.error_code,
                        "high_watermark": data.high_watermark,
                        "last_stable_offset": data.high_watermark,
                        "log_start_offset": 0,
                        "diverging_epoch": diverging,
                        "current_leader": {
                            "leader_id": data.leader_id,
                            "leader_epoch": data.leader_epoch,
                        },
                        "snapshot_id": snapshot,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": encode_entries(data.records),
                    }
                ],
            }
        ],
        "node_endpoints": [],
    }


def _error(code: int) -> Errors:
    try:
        return Errors(code)
    except ValueError:
        return Errors.UNKNOWN_SERVER_ERROR


def response_from_body(key: ApiKeys, body: dict[str, Any]) -> RaftResponseData:
    """A response body as kafkalab.raft's data. A top-level error (the request never
    reached the quorum) comes back as that error on the partition."""
    if key == ApiKeys.FETCH:
        p = _one(body, "responses")
        error = _error(body.get("error_code") or p["error_code"])
        leader = p.get("current_leader") or {}
        div = p.get("diverging_epoch") or {}
        diverging = (
            OffsetAndEpoch(div["end_offset"], div["epoch"])
            if div.get("epoch", -1) >= 0 and div.get("end_offset", -1) >= 0
            else None
        )
        records = p.get("records")
        snap = p.get("snapshot_id") or {}
        snapshot_id = (
            OffsetAndEpoch(snap["end_offset"], snap["epoch"])
            if snap.get("epoch", -1) >= 0 and snap.get("end_offset", -1) >= 0
            else None
        )
        return FetchResponse(
            error,
            leader.get("leader_id", -1),
            leader.get("leader_epoch", -1),
            p["high_watermark"],
            diverging,
            decode_entries(bytes(records)) if records else (),
            snapshot_id,
        )
    if key == ApiKeys.FETCH_SNAPSHOT:
        p = _one(body)
        error = _error(body.get("error_code") or p["error_code"])
        leader = p.get("current_leader") or {}
        sid = p["snapshot_id"]
        return FetchSnapshotResponse(
            error,
            leader.get("leader_id", -1),
            leader.get("leader_epoch", -1),
            OffsetAndEpoch(sid["end_offset"], sid["epoch"]),
            p["size"],
            p["position"],
            bytes(p.get("unaligned_records") or b""),
        )
    p = _one(body)
    error = _error(body.get("error_code") or p["error_code"])
    if key == ApiKeys.VOTE:
        return VoteResponse(error, p["leader_id"], p["leader_epoch"], bool(p["vote_granted"]))
    if key == ApiKeys.BEGIN_QUORUM_EPOCH:
        return BeginQuorumEpochResponse(error, p["leader_id"], p["leader_epoch"])
    if key == ApiKeys.END_QUORUM_EPOCH:
        return EndQuorumEpochResponse(error, p["leader_id"], p["leader_epoch"])
    raise ValueError(f"api key {key} is not a KRaft response")


# -- DescribeQuorum -----------------------------------------------------------------------------


def _replica_body(r: ReplicaState) -> dict[str, Any]:
    return {
        "replica_id": r.replica_id,
        "replica_directory_id": uuid.UUID(int=0),
        "log_end_offset": r.log_end_offset,
        "last_fetch_timestamp": r.last_fetch_timestamp,
        "last_caught_up_timestamp": r.last_caught_up_timestamp,
    }


def _replica_from(body: dict[str, Any]) -> ReplicaState:
    return ReplicaState(
        body["replica_id"],
        body["log_end_offset"],
        body.get("last_fetch_timestamp", -1),
        body.get("last_caught_up_timestamp", -1),
    )


def describe_quorum_to_body(resp: DescribeQuorumResponse) -> dict[str, Any]:
    return {
        "error_code": Errors.NONE,
        "error_message": None,
        "topics": _topic(
            {
                "partition_index": METADATA_PARTITION,
                "error_code": resp.error_code,
                "error_message": None,
                "leader_id": resp.leader_id,
                "leader_epoch": resp.leader_epoch,
                "high_watermark": resp.high_watermark,
                "current_voters": [_replica_body(r) for r in resp.current_voters],
                "observers": [_replica_body(r) for r in resp.observers],
            }
        ),
        "nodes": [],
    }


def describe_quorum_from_body(body: dict[str, Any]) -> DescribeQuorumResponse:
    p = _one(body)
    return DescribeQuorumResponse(
        _error(body.get("error_code") or p["error_code"]),
        p["leader_id"],
        p["leader_epoch"],
        p["high_watermark"],
        tuple(_replica_from(r) for r in p["current_voters"]),
        tuple(_replica_from(r) for r in p["observers"]),
    )
