"""Metadata (3): brokers, topics, partition leaders, ISRs and leader epochs.

Kafka: KafkaApis.handleTopicMetadataRequest. Requested topics: v0 with an empty
list means all, v1+ null means all and empty means none. A topic that does not
exist is created first when `auto.create.topics.enable` is on and the request
allows it (v4+: allow_auto_topic_creation), with `num.partitions` and
`default.replication.factor`.

v10+ names every topic by its id too (TopicInfo.topic_id, given by the controller
at creation), and v12 lets a request name topics by id alone (name null): how a
KIP-848 consumer learns which topics the ids of its assignment are. An unknown id
answers UNKNOWN_TOPIC_ID with a null name; ids are never auto-created.

v8+ answers the operations the client may perform on each topic (and v8-10 on
the cluster) when it asks: all of them, as a Kafka broker without an authorizer
(kafkalab.server.auth_helper).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kafkalab.errors import Errors
from kafkalab.protocol.header import RequestHeader
from kafkalab.server.apis.topics import create_topics_request
from kafkalab.server.auth_helper import ResourceType, authorized_operations

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis


def handle_metadata(apis: KafkaApis, header: RequestHeader, body: dict) -> Any:
    cache = apis.metadata_cache
    requested = body["topics"]
    if requested is None or (header.api_version == 0 and not requested):
        names = sorted(cache.topics())
    else:
        ids = {}
        if any(t["name"] is None for t in requested):
            ids = {info.topic_id: name for name, info in cache.topics().items()}
        # a topic asked for by id alone is named by it; an unknown id stays a UUID
        names = [
            t["name"] if t["name"] is not None else ids.get(t["topic_id"], t["topic_id"])
            for t in requested
        ]
    allow_create = apis.config.auto_create_topics_enable and (
        header.api_version < 4 or body["allow_auto_topic_creation"]
    )
    missing = [n for n in names if isinstance(n, str) and n not in cache.topics()]
    if not (missing and allow_create):
        return with_authorized_operations(metadata_response(apis, names), body)

    async def create_then_answer() -> dict:
        created = await cache.create_topics(
            create_topics_request(
                missing, apis.config.num_partitions, apis.config.default_replication_factor
            )
        )
        errors = {t["name"]: t["error_code"] for t in created["topics"]}
        return with_authorized_operations(metadata_response(apis, names, errors), body)

    return create_then_answer()


def metadata_response(
    apis: KafkaApis, names: list[str | uuid.UUID], creation_errors: dict[str, int] | None = None
) -> dict:
    """The response for these topics: names, or the ids no topic has (UNKNOWN_TOPIC_ID)."""
    cache = apis.metadata_cache
    known = cache.topics()
    alive = cache.alive_brokers()
    alive_ids = {b.broker_id for b in alive}
    topics = []
    for name in names:
        if isinstance(name, uuid.UUID):
            topics.append(topic_error(None, Errors.UNKNOWN_TOPIC_ID, name))
            continue
        info = known.get(name)
        if info is None:
            error = (creation_errors or {}).get(name, Errors.UNKNOWN_TOPIC_OR_PARTITION)
            if error in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS):
                error = Errors.UNKNOWN_TOPIC_OR_PARTITION
            topics.append(topic_error(name, Errors(error)))
            continue
        topics.append(
            {
                "error_code": 0,
                "name": name,
                "topic_id": info.topic_id,
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0 if p.leader >= 0 else int(Errors.LEADER_NOT_AVAILABLE),
                        "partition_index": i,
                        "leader_id": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "replica_nodes": p.replicas,
                        "isr_nodes": p.isr,
                        "offline_replicas": [r for r in p.replicas if r not in alive_ids],
                    }
                    for i, p in sorted(info.partitions.items())
                ],
            }
        )
    return {
        "throttle_time_ms": 0,
        "brokers": [
            {"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": None} for b in alive
        ],
        "cluster_id": apis.config.cluster_id,
        "controller_id": cache.controller_id(),
        "topics": topics,
    }


def with_authorized_operations(response: dict, body: dict) -> dict:
    """Metadata v8+: the operations allowed on each topic (and, v8-10, on the
    cluster) when the request asks, every one the resource supports since no
    authorizer runs (Kafka: AuthHelper.authorizedOperations); otherwise
    Integer.MIN_VALUE, as Kafka leaves them."""
    if body.get("include_topic_authorized_operations"):
        allowed = authorized_operations(ResourceType.TOPIC)
        for topic in response["topics"]:
            topic["topic_authorized_operations"] = allowed
    if body.get("include_cluster_authorized_operations"):
        response["cluster_authorized_operations"] = authorized_operations(ResourceType.CLUSTER)
    return response


def topic_error(name: str | None, error: Errors, topic_id: uuid.UUID | None = None) -> dict:
    return {
        "error_code": int(error),
        "name": name,
        "topic_id": topic_id or uuid.UUID(int=0),
        "is_internal": False,
        "partitions": [],
    }
