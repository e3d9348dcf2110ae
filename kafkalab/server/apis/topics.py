"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37).

Kafka: KafkaApis.handleCreateTopicsRequest / handleDeleteTopicsRequest /
handleCreatePartitionsRequest, which a KRaft broker forwards to the controller. Here the MetadataCache does whichever
applies: forward to the controller, or (a standalone broker) create the logs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalab.protocol.header import RequestHeader
from kafkalab.server.apis.configs import created_topic_configs

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis


async def handle_create_topics(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    """Create (or with validate_only, check) the topics. From v5 each created topic is
    answered with its partitions, replication factor and configs, v7 its id; the
    configs as DescribeConfigs to this broker gives them (this broker's static and
    dynamic configs under the topic's overrides), as Kafka's controller answers from
    the same layers. A topic that failed keeps -1s and null configs."""
    response = await apis.metadata_cache.create_topics(body)
    if header.api_version >= 5:
        asked = {t["name"]: t["configs"] for t in body["topics"]}
        default = apis.replica_manager.log_manager.default_config
        for result in response["topics"]:
            if result["error_code"] == 0 and result["name"] in asked:
                overrides = {
                    c["name"]: c["value"] for c in asked[result["name"]] if c["value"] is not None
                }
                result["configs"] = created_topic_configs(default, overrides, apis.dynamic_config)
    return response


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
