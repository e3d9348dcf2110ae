"""Consumer groups (classic protocol): thin adapters onto the GroupCoordinatorService.

Kafka: KafkaApis.handleFindCoordinatorRequest, handleJoinGroupRequest,
handleSyncGroupRequest, handleHeartbeatRequest, handleLeaveGroupRequest,
handleOffsetCommitRequest, handleOffsetFetchRequest, handleDescribeGroupsRequest,
handleListGroupsRequest, handleDeleteGroupsRequest, handleOffsetDeleteRequest,
handleTxnOffsetCommitRequest.
Each turns the request body into one typed call of the GroupCoordinatorService
(one coordinator call as one request, run by the CoordinatorRuntime, which
carries out its effects) and the result into the response body of the request's
version. JoinGroup, SyncGroup, Heartbeat and LeaveGroup become their request
data (JoinGroupRequestData and the like, Kafka's field names), built here once
and passed as they are down to the ClassicGroupManager. What a group is, and every rule of the protocol, lives in
kafkalab/coordinator/group/ (the GroupCoordinator and its managers).

FindCoordinator answers with the leader of the group's `__consumer_offsets`
partition (abs(Java hashCode(group.id)) % offsets.topic.num.partitions), creating
the topic on first use (COORDINATOR_NOT_AVAILABLE until it has a leader: clients
ask again). Key type 1 (a transactional id) does the same with the transaction
coordinator's `__transaction_state` (transaction.state.log.num.partitions).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kafkalab.coordinator.group.classic_group_requests import (
    HeartbeatRequestData,
    JoinGroupRequestData,
    LeaveGroupRequestData,
    SyncGroupRequestData,
)
from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC
from kafkalab.coordinator.group.results import CommitOffset, PartitionOffset
from kafkalab.errors import Errors
from kafkalab.protocol.header import RequestHeader
from kafkalab.server.coordinator_runtime import now_ms

if TYPE_CHECKING:
    from kafkalab.server.group_coordinator_service import GroupCoordinatorService
    from kafkalab.server.kafka_apis import KafkaApis
    from kafkalab.server.transaction_coordinator_service import TransactionCoordinatorService

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""
DEFAULT_RETENTION_TIME = -1
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def handle_find_coordinator(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    out = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "node_id": -1,
        "host": "",
        "port": -1,
    }
    key_type = body.get("key_type", GROUP_KEY_TYPE) if header.api_version >= 1 else GROUP_KEY_TYPE
    service: GroupCoordinatorService | TransactionCoordinatorService
    if key_type == GROUP_KEY_TYPE:
        service = apis.group_coordinator
    elif key_type == TRANSACTION_KEY_TYPE and apis.transaction_coordinator is not None:
        service = apis.transaction_coordinator
    else:
        out.update(error_code=int(Errors.INVALID_REQUEST), error_message=f"key type {key_type}")
        return out
    leader = service.leader_of(service.partition_for(body["key"]))
    broker = next((b for b in apis.metadata_cache.alive_brokers() if b.broker_id == leader), None)
    if broker is None:
        out.update(error_code=int(Errors.COORDINATOR_NOT_AVAILABLE))
        return out
    out.update(node_id=broker.broker_id, host=broker.host, port=broker.port)
    return out


async def handle_join_group(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    version = header.api_version
    data = JoinGroupRequestData(
        group_id=body["group_id"],
        member_id=body["member_id"],
        protocol_type=body["protocol_type"],
        protocols=tuple((p["name"], bytes(p["metadata"])) for p in body["protocols"]),
        session_timeout_ms=body["session_timeout_ms"],
        rebalance_timeout_ms=body["rebalance_timeout_ms"] if version >= 1 else None,
        group_instance_id=body.get("group_instance_id") if version >= 5 else None,
        client_id=header.client_id or "",
        client_host=header.client_host,
        require_known_member_id=version >= 4,
    )
    result = await apis.group_coordinator.join_group(data)
    return {
        "throttle_time_ms": 0,
        "error_code": int(result.error),
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name or "",
        "leader": result.leader_id,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata,
            }
            for m in result.members
        ],
    }


async def handle_sync_group(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    data = SyncGroupRequestData(
        group_id=body["group_id"],
        generation_id=body["generation_id"],
        member_id=body["member_id"],
        group_instance_id=body.get("group_instance_id"),
        protocol_type=body.get("protocol_type"),
        protocol_name=body.get("protocol_name"),
        assignments=tuple((a["member_id"], bytes(a["assignment"])) for a in body["assignments"]),
    )
    result = await apis.group_coordinator.sync_group(data)
    return {
        "throttle_time_ms": 0,
        "error_code": int(result.error),
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }


async def handle_heartbeat(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    data = HeartbeatRequestData(
        group_id=body["group_id"],
        generation_id=body["generation_id"],
        member_id=body["member_id"],
        group_instance_id=body.get("group_instance_id"),
    )
    result = await apis.group_coordinator.heartbeat(data)
    return {"throttle_time_ms": 0, "error_code": int(result.error)}


async def handle_leave_group(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    if header.api_version >= 3:
        members = tuple((m["member_id"], m.get("group_instance_id")) for m in body["members"])
    else:
        members = ((body["member_id"], None),)
    data = LeaveGroupRequestData(group_id=body["group_id"], members=members)
    result = await apis.group_coordinator.leave_group(data)
    error = result.error
    if header.api_version < 3 and error == Errors.NONE and result.members:
        error = result.members[0].error  # one member: its error is the request's
    return {
        "throttle_time_ms": 0,
        "error_code": int(error),
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "error_code": int(m.error),
            }
            for m in result.members
        ],
    }


async def handle_offset_commit(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    """OffsetCommit. v10 names topics by id: an id the cluster does not know answers
    UNKNOWN_TOPIC_ID on each of its partitions (Kafka: KafkaApis resolves the ids with
    its metadata cache before the coordinator sees the request). The coordinator gets
    the version: a KIP-848 member must commit with v9+ (its member epoch checked)."""
    version = header.api_version
    by_id = version >= 10
    names = _topic_names_by_id(apis) if by_id else {}
    offsets: dict[tuple[str, int], CommitOffset] = {}
    unknown_ids: dict[uuid.UUID, list[int]] = {}
    for t in body["topics"]:
        name = names.get(t["topic_id"]) if by_id else t["name"]
        if name is None:
            unknown_ids.setdefault(t["topic_id"], []).extend(
                p["partition_index"] for p in t["partitions"]
            )
            continue
        for p in t["partitions"]:
            offsets[(name, p["partition_index"])] = CommitOffset(
                p["committed_offset"],
                p.get("committed_leader_epoch", -1) if version >= 6 else -1,
                p.get("committed_metadata"),
            )
    known, unknown = _known_partitions(apis, offsets)
    answered = dict(unknown)
    if known:
        expire = None
        retention = body.get("retention_time_ms", DEFAULT_RETENTION_TIME)
        if 2 <= version <= 4 and retention != DEFAULT_RETENTION_TIME:
            expire = now_ms() + retention
        result = await apis.group_coordinator.commit_offsets(
            body["group_id"],
            known,
            generation_id=body.get("generation_id_or_member_epoch", NO_GENERATION)
            if version >= 1
            else NO_GENERATION,
            member_id=body.get("member_id", UNKNOWN_MEMBER_ID)
            if version >= 1
            else UNKNOWN_MEMBER_ID,
            group_instance_id=body.get("group_instance_id") if version >= 7 else None,
            expire_timestamp_ms=expire,
            api_version=version,
        )
        answered.update(result.partitions)
    topics = _errors_by_topic({tp: answered[tp] for tp in offsets})
    if by_id:
        ids = {name: topic_id for topic_id, name in names.items()}
        for t in topics:
            t["topic_id"] = ids[t["name"]]
        topics += [
            {
                "topic_id": topic_id,
                "partitions": [
                    {"partition_index": i, "error_code": int(Errors.UNKNOWN_TOPIC_ID)}
                    for i in indexes
                ],
            }
            for topic_id, indexes in unknown_ids.items()
        ]
    return {"throttle_time_ms": 0, "topics": topics}


def _topic_names_by_id(apis: KafkaApis) -> dict[uuid.UUID, str]:
    return {info.topic_id: name for name, info in apis.metadata_cache.topics().items()}


async def handle_txn_offset_commit(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    """TxnOffsetCommit (28), sent by a transactional producer to the group's
    coordinator after AddOffsetsToTxn: the offsets stay pending until the
    transaction's marker is written here (GroupCoordinator.complete_transaction).
    v5+ is transactions v2: the client sent no AddOffsetsToTxn, and this broker
    first adds the group's __consumer_offsets partition to the transaction
    (Kafka: the `addPartition` operation of the group coordinator's
    transactional write); refused, no offset is written."""
    version = header.api_version
    offsets = {
        (t["name"], p["partition_index"]): CommitOffset(
            p["committed_offset"],
            p.get("committed_leader_epoch", -1) if version >= 2 else -1,
            p.get("committed_metadata"),
        )
        for t in body["topics"]
        for p in t["partitions"]
    }
    known, unknown = _known_partitions(apis, offsets)
    if not known:
        return {"throttle_time_ms": 0, "topics": _errors_by_topic(unknown)}
    if version >= 5 and apis.add_partitions_to_txn_manager is not None:
        refused = await _add_offsets_partition(apis, body)
        if refused != Errors.NONE:
            return {
                "throttle_time_ms": 0,
                "topics": _errors_by_topic({tp: unknown.get(tp) or refused for tp in offsets}),
            }
    result = await apis.group_coordinator.commit_transactional_offsets(
        body["group_id"],
        body["producer_id"],
        body["producer_epoch"],
        known,
        transactional_id=body["transactional_id"],
        generation_id=body.get("generation_id", NO_GENERATION) if version >= 3 else NO_GENERATION,
        member_id=body.get("member_id", UNKNOWN_MEMBER_ID) if version >= 3 else UNKNOWN_MEMBER_ID,
        group_instance_id=body.get("group_instance_id") if version >= 3 else None,
    )
    return {
        "throttle_time_ms": 0,
        "topics": _errors_by_topic(
            {tp: unknown.get(tp) or result.partitions[tp] for tp in offsets}
        ),
    }


async def _add_offsets_partition(apis: KafkaApis, body: dict) -> Errors:
    """Transactions v2: the group's __consumer_offsets partition joins the
    transaction through this broker; the error for the offsets if it did not (a
    coordinator that cannot answer now becomes a retriable error of TxnOffsetCommit)."""
    manager = apis.add_partitions_to_txn_manager
    assert manager is not None
    tp = (OFFSETS_TOPIC, apis.group_coordinator.partition_for(body["group_id"]))
    answers = await manager.add_to_transaction(
        body["transactional_id"], body["producer_id"], body["producer_epoch"], [tp]
    )
    error = answers[tp]
    if error == Errors.CONCURRENT_TRANSACTIONS:
        return Errors.COORDINATOR_LOAD_IN_PROGRESS  # retried by every client
    if error == Errors.NOT_COORDINATOR:
        return Errors.COORDINATOR_NOT_AVAILABLE
    return error


def _known_partitions(
    apis: KafkaApis, offsets: dict[tuple[str, int], CommitOffset]
) -> tuple[dict[tuple[str, int], CommitOffset], dict[tuple[str, int], Errors]]:
    """The offsets of partitions the cluster has, and UNKNOWN_TOPIC_OR_PARTITION for
    the others: Kafka's KafkaApis answers those itself and hands the coordinator
    only the rest (so nothing is written to __consumer_offsets for a topic that
    does not exist)."""
    topics = apis.metadata_cache.topics()
    known = {
        tp: o for tp, o in offsets.items() if tp[0] in topics and tp[1] in topics[tp[0]].partitions
    }
    return known, {tp: Errors.UNKNOWN_TOPIC_OR_PARTITION for tp in offsets if tp not in known}


def handle_offset_fetch(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    """OffsetFetch. v8+ asks for several groups at once, each answered on its own
    with its own error; v9+ carries a KIP-848 member's id and epoch (checked when
    given: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); v10 names topics by id (an id the
    cluster does not know: UNKNOWN_TOPIC_ID on its partitions; with every topic
    asked for, topics the cluster no longer has are left out, having no id)."""
    version = header.api_version
    require_stable = bool(body.get("require_stable")) if version >= 7 else False
    if version < 8:
        return _offset_fetch_one_group(apis, version, body, require_stable)
    by_id = version >= 10
    names = _topic_names_by_id(apis) if by_id else {}
    ids = {name: topic_id for topic_id, name in names.items()}
    groups = []
    for g in body["groups"]:
        requested = g["topics"]
        unknown_ids: dict[uuid.UUID, list[int]] = {}
        partitions: list[tuple[str, int]] | None = None
        if requested is not None:
            partitions = []
            for t in requested:
                name = names.get(t["topic_id"]) if by_id else t["name"]
                if name is None:
                    unknown_ids.setdefault(t["topic_id"], []).extend(t["partition_indexes"])
                else:
                    partitions += [(name, i) for i in t["partition_indexes"]]
        result = apis.group_coordinator.fetch_offsets(
            g["group_id"],
            partitions,
            require_stable=require_stable,
            member_id=g.get("member_id") if version >= 9 else None,
            member_epoch=g.get("member_epoch", -1) if version >= 9 else -1,
        )
        answered = result.partitions
        if by_id:
            answered = {tp: p for tp, p in answered.items() if tp[0] in ids}
        topics = _by_topic((tp, _partition_offset_fields(p)) for tp, p in answered.items())
        if by_id:
            for t in topics:
                t["topic_id"] = ids[t["name"]]
            topics += [
                {
                    "topic_id": topic_id,
                    "partitions": [
                        {
                            **_partition_offset_fields(PartitionOffset(-1)),
                            "partition_index": i,
                            "error_code": int(Errors.UNKNOWN_TOPIC_ID),
                        }
                        for i in indexes
                    ],
                }
                for topic_id, indexes in unknown_ids.items()
            ]
        if result.error != Errors.NONE:
            topics = []  # a group-level error answers no partitions
        groups.append(
            {"group_id": g["group_id"], "topics": topics, "error_code": int(result.error)}
        )
    return {"throttle_time_ms": 0, "groups": groups}


def _partition_offset_fields(p: PartitionOffset) -> dict:
    return {
        "committed_offset": p.offset,
        "committed_leader_epoch": p.leader_epoch,
        "metadata": p.metadata,
        "error_code": int(p.error),
    }


def _offset_fetch_one_group(
    apis: KafkaApis, version: int, body: dict, require_stable: bool
) -> dict:
    """OffsetFetch v0-v7: one group, topics by name, one top-level error (v2+)."""
    requested = body["topics"]
    partitions = (
        None
        if requested is None
        else [(t["name"], i) for t in requested for i in t["partition_indexes"]]
    )
    result = apis.group_coordinator.fetch_offsets(
        body["group_id"], partitions, require_stable=require_stable
    )
    error = result.error
    answered = result.partitions
    if version < 2 and error != Errors.NONE:
        # v0-v1 have no top-level error: it goes on every partition asked for (with
        # none, the client would take "nothing committed" and reset its position).
        answered = {tp: PartitionOffset(-1, error=error) for tp in partitions or []}
    topics = _by_topic((tp, _partition_offset_fields(p)) for tp, p in answered.items())
    return {"throttle_time_ms": 0, "topics": topics, "error_code": int(error)}


def handle_describe_groups(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    service = apis.group_coordinator
    groups = []
    for group_id in body["groups"]:
        g = service.describe_group(group_id)
        groups.append(
            {
                "error_code": int(g.error),
                "group_id": g.group_id,
                "group_state": g.state,
                "protocol_type": g.protocol_type,
                "protocol_data": g.protocol_data,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.member_metadata,
                        "member_assignment": m.member_assignment,
                    }
                    for m in g.members
                ],
                "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
            }
        )
    return {"throttle_time_ms": 0, "groups": groups}


def handle_list_groups(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    """ListGroups: v4+ filters by state, v5+ by type and names each group's type,
    `consumer` for a KIP-848 group and `classic` for the others, both filters
    case-insensitive (Kafka: GroupCoordinatorService.listGroups)."""
    service = apis.group_coordinator
    result = service.list_groups(body.get("states_filter") or None)

    def group_type(group_id: str) -> str:
        return "consumer" if service.is_consumer_group(group_id) else "classic"

    types = {t.lower() for t in body.get("types_filter") or ()}
    return {
        "throttle_time_ms": 0,
        "error_code": int(result.error),
        "groups": [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state,
                "group_type": group_type(g.group_id),
            }
            for g in result.groups
            if not types or group_type(g.group_id) in types
        ],
    }


async def handle_delete_groups(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    result = await apis.group_coordinator.delete_groups(list(body["groups_names"]))
    return {
        "throttle_time_ms": 0,
        "results": [
            {"group_id": g, "error_code": int(error)} for g, error in result.groups.items()
        ],
    }


async def handle_offset_delete(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    partitions = [
        (t["name"], p["partition_index"]) for t in body["topics"] for p in t["partitions"]
    ]
    result = await apis.group_coordinator.delete_offsets(body["group_id"], partitions)
    return {
        "error_code": int(result.error),
        "throttle_time_ms": 0,
        "topics": _errors_by_topic(result.partitions),
    }


def _by_topic(rows) -> list[dict]:
    """((topic, partition), fields) pairs as a response's topics[].partitions[]."""
    topics: dict[str, list[dict]] = {}
    for (topic, index), fields in rows:
        topics.setdefault(topic, []).append({"partition_index": index, **fields})
    return [{"name": t, "partitions": ps} for t, ps in topics.items()]


def _errors_by_topic(errors: dict) -> list[dict]:
    return _by_topic((tp, {"error_code": int(e)}) for tp, e in errors.items())
