"""DescribeConfigs (32): a topic's configs, each with its value and where it comes from.

Kafka: KafkaApis.handleDescribeConfigsRequest -> ConfigHelper.describeConfigs.
Every topic config Kafka defines is listed (kafkalab.storage.log_config), with
the topic's override (source DYNAMIC_TOPIC_CONFIG) or the broker's default
(DEFAULT_CONFIG), including those kafkalab stores without acting on them
(README: topic configs). Other resource types (brokers, groups) are not
described here: they answer INVALID_REQUEST.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalab.errors import Errors
from kafkalab.protocol.header import RequestHeader
from kafkalab.server.auth_helper import ResourceType
from kafkalab.storage.log_config import LogConfig

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis

# Kafka: DescribeConfigsResponse.ConfigSource
DYNAMIC_TOPIC_CONFIG = 1
DEFAULT_CONFIG = 5
# Kafka: DescribeConfigsResponse.ConfigType
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
_INT_KEYS = {
    "segment.bytes",
    "segment.index.bytes",
    "index.interval.bytes",
    "max.message.bytes",
    "min.insync.replicas",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
}
_LIST_KEYS = {
    "cleanup.policy",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
}


def config_type(key: str, value: Any) -> int:
    """Kafka's ConfigType of a topic config (DescribeConfigs v3+)."""
    if key in _LIST_KEYS:
        return LIST
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, int):
        return INT if key in _INT_KEYS else LONG
    return STRING


def handle_describe_configs(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    topics = apis.metadata_cache.topics()
    default = apis.replica_manager.log_manager.default_config
    results = []
    for resource in body["resources"]:
        result = {
            "error_code": 0,
            "error_message": None,
            "resource_type": resource["resource_type"],
            "resource_name": resource["resource_name"],
            "configs": [],
        }
        results.append(result)
        if resource["resource_type"] != ResourceType.TOPIC:
            result["error_code"] = int(Errors.INVALID_REQUEST)
            result["error_message"] = "kafkalab describes the configs of topics only"
            continue
        info = topics.get(resource["resource_name"])
        if info is None:
            result["error_code"] = int(Errors.UNKNOWN_TOPIC_OR_PARTITION)
            result["error_message"] = f"topic {resource['resource_name']!r} does not exist"
            continue
        result["configs"] = describe_topic(
            default,
            info.configs,
            resource["configuration_keys"],
            header.api_version >= 1 and body.get("include_synonyms", False),
        )
    return {"throttle_time_ms": 0, "results": results}


def describe_topic(
    default: LogConfig,
    overrides: dict[str, str],
    keys: list[str] | None,
    include_synonyms: bool,
) -> list[dict]:
    """Every topic config (or those in `keys`), as ConfigHelper lists them."""
    effective = default.with_overrides(overrides)
    values = effective.to_properties()
    out = []
    for name, value in values.items():
        if keys is not None and name not in keys:
            continue
        overridden = name in overrides
        source = DYNAMIC_TOPIC_CONFIG if overridden else DEFAULT_CONFIG
        synonyms = []
        if include_synonyms:
            if overridden:
                synonyms.append({"name": name, "value": value, "source": DYNAMIC_TOPIC_CONFIG})
            synonyms.append(
                {"name": name, "value": default.to_properties()[name], "source": DEFAULT_CONFIG}
            )
        out.append(
            {
                "name": name,
                "value": value,
                "read_only": False,
                "is_default": not overridden,
                "config_source": source,
                "is_sensitive": False,
                "synonyms": synonyms,
                "config_type": config_type(name, getattr(effective, name.replace(".", "_"))),
                "documentation": None,
            }
        )
    return out
