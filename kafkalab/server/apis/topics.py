"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37).

Kafka: KafkaApis.handleCreateTopicsRequest / handleDeleteTopicsRequest /
handleCreatePartitionsRequest, which a KRaft broker forwards to the controller. Here the MetadataCache does whichever
applies: forward to the controller, or (a standalone broker) create the logs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalab.protocol.header import RequestHeader

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis


def handle_create_topics(apis: KafkaApis, header: RequestHeader, body: dict) -> Any:
    return apis.metadata_cache.create_topics(body)


def handle_delete_topics(apis: KafkaApis, header: RequestHeader, body: dict) -> Any:
    return apis.metadata_cache.delete_topics(body)


def handle_create_partitions(apis: KafkaApis, header: RequestHeader, body: dict) -> Any:
    return apis.metadata_cache.create_partitions(body)


def create_topics_request(
    names: list[str],
    num_partitions: int,
    replication_factor: int,
    configs: dict[str, str] | None = None,
) -> dict:
    """A CreateTopics body (v4) for topics a broker creates itself: auto-created
    topics, and (with the coordinators) the internal topics."""
    return {
        "topics": [
            {
                "name": n,
                "num_partitions": num_partitions,
                "replication_factor": replication_factor,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
            for n in names
        ],
        "timeout_ms": 30_000,
        "validate_only": False,
    }
