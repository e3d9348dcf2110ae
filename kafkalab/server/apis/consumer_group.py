"""Consumer groups (KIP-848 protocol): thin adapters onto the GroupCoordinatorService.

Kafka: KafkaApis.handleConsumerGroupHeartbeat, handleConsumerGroupDescribe.
The rules (member epochs, the target assignment, reconciliation, revocation)
live in kafkalab/coordinator/group/consumer_group_manager.py (consumer_group_heartbeat,
consumer_group_describe) and consumer_group.py; this only translates:

    on the wire                    in the coordinator
    topic ids (UUID)               topic names (the MetadataCache maps one to the other)
    null field                     None: "unchanged since the last heartbeat"
    Assignment struct, or null     frozenset of (topic, partition), or None

Before each call the runtime hands the coordinator the cluster's topics
(`sync_topic_metadata`): the server-side assignor needs partition counts, and
answers name partitions by topic id.

Where kafkalab differs from Kafka: a subscription by regular expression
(SubscribedTopicRegex, v1) is refused with INVALID_REQUEST, since the
coordinator resolves topic names only; subscribe to topic names.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kafkalab.coordinator.group.consumer_group import ConsumerGroupHeartbeatRequestData
from kafkalab.errors import Errors
from kafkalab.protocol.header import RequestHeader
from kafkalab.server.apis.group import AUTHORIZED_OPERATIONS_OMITTED

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis

CONSUMER_MEMBER_TYPE = 1  # KIP-1099: 1 a consumer-protocol member, 0 a classic one


def _topic_ids(apis: KafkaApis) -> dict[str, uuid.UUID]:
    return {name: info.topic_id for name, info in apis.metadata_cache.topics().items()}


def _by_topic_id(partitions, ids: dict[str, uuid.UUID], with_names: bool = False) -> list[dict]:
    """(topic, partition) pairs as [{topic_id, partitions}] (Kafka's TopicPartitions),
    leaving out topics the cluster no longer has."""
    by: dict[str, list[int]] = {}
    for topic, index in partitions:
        by.setdefault(topic, []).append(index)
    out = []
    for topic, indexes in sorted(by.items()):
        if topic not in ids:
            continue
        entry = {"topic_id": ids[topic], "partitions": sorted(indexes)}
        if with_names:
            entry["topic_name"] = topic
        out.append(entry)
    return out


async def handle_consumer_group_heartbeat(
    apis: KafkaApis, header: RequestHeader, body: dict
) -> dict:
    runtime = apis.group_coordinator
    out = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }
    if body.get("subscribed_topic_regex"):
        out.update(
            error_code=int(Errors.INVALID_REQUEST),
            error_message="kafkalab's group coordinator does not resolve SubscribedTopicRegex: "
            "subscribe to topic names",
        )
        return out
    runtime.sync_topic_metadata()
    ids = _topic_ids(apis)
    names = {topic_id: name for name, topic_id in ids.items()}
    owned = body["topic_partitions"]
    owned_partitions = (
        None
        if owned is None
        else tuple(
            (names[t["topic_id"]], p)
            for t in owned
            if t["topic_id"] in names
            for p in t["partitions"]
        )
    )
    subscribed = body["subscribed_topic_names"]
    data = ConsumerGroupHeartbeatRequestData(
        body["group_id"],
        body["member_id"],
        body["member_epoch"],
        instance_id=body["instance_id"],
        rack_id=body["rack_id"],
        rebalance_timeout_ms=body["rebalance_timeout_ms"],
        subscribed_topic_names=None if subscribed is None else tuple(subscribed),
        server_assignor=body["server_assignor"],
        owned_partitions=owned_partitions,
        client_id=header.client_id or "",
        client_host=header.client_host or "",
    )
    result = await runtime.consumer_group_heartbeat(data)
    out.update(
        error_code=int(result.error),
        error_message=result.error_message,
        member_id=result.member_id or None,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
    )
    if result.error == Errors.NONE and result.assignment is not None:
        out["assignment"] = {"topic_partitions": _by_topic_id(result.assignment, ids)}
    return out


def handle_consumer_group_describe(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    runtime = apis.group_coordinator
    runtime.sync_topic_metadata()
    ids = _topic_ids(apis)
    groups = []
    for group_id in body["group_ids"]:
        g = runtime.consumer_group_describe(group_id)
        message = None
        if g.error == Errors.GROUP_ID_NOT_FOUND:
            message = f"group {group_id} is not a consumer group (KIP-848)"
        groups.append(
            {
                "error_code": int(g.error),
                "error_message": message,
                "group_id": g.group_id,
                "group_state": g.state,
                "group_epoch": g.group_epoch,
                "assignment_epoch": g.assignment_epoch,
                "assignor_name": g.assignor_name,
                "members": [
                    {
                        "member_id": m.member_id,
                        "instance_id": m.instance_id,
                        "rack_id": m.rack_id,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "subscribed_topic_names": list(m.subscribed_topic_names),
                        "subscribed_topic_regex": None,
                        "assignment": {
                            "topic_partitions": _by_topic_id(m.assignment, ids, with_names=True)
                        },
                        "target_assignment": {
                            "topic_partitions": _by_topic_id(
                                m.target_assignment, ids, with_names=True
                            )
                        },
                        "member_type": CONSUMER_MEMBER_TYPE,
                    }
                    for m in g.members
                ],
                "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
            }
        )
    return {"throttle_time_ms": 0, "groups": groups}
