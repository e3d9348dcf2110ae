"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).

Kafka: KafkaApis.handleDescribeConfigsRequest -> ConfigHelper.describeConfigs,
and handleAlterConfigsRequest / handleIncrementalAlterConfigsRequest ->
ConfigAdminManager.preprocess, then the controller.

Describe: a TOPIC lists every topic config Kafka defines
(kafkalab.storage.log_config), each with its value and source: the topic's
override (DYNAMIC_TOPIC_CONFIG), else the broker-wide default it falls back to
(this broker's dynamic config, the cluster-wide dynamic default, the static
config: the `log.` synonym), else Kafka's default; with include_synonyms, that
whole chain. A BROKER with this broker's id lists its configs (DynamicBrokerConfig:
dynamic, static, default); the BROKER "" (the cluster-wide default) its dynamic
configs only; another broker's id answers INVALID_REQUEST, as Kafka does (a
client asks each broker about itself).

Alter: the broker checks what only it can (ConfigAdminManager.preprocess): a
resource named twice, a key named twice in a resource, a null value to set
(INVALID_REQUEST); a BROKER resource must be "" or this broker's id, and its
configs must be dynamic with valid values (INVALID_REQUEST). The rest goes on to
the controller as a request of its own, the same API and version, as kafkalab
does for CreateTopics (Kafka 4 wraps it in an EnvelopeRequest through the
ForwardingManager; there is no principal to carry here). The controller checks
topic configs and existence and writes ConfigRecords; the broker answers once it
has applied them. A standalone broker does the controller's part itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalab.controller.configuration_control_manager import (
    OpType,
    ResourceType,
    incremental_changes,
)
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.header import RequestHeader
from kafkalab.server.config import _broker_log_config
from kafkalab.server.dynamic_broker_config import (
    DEFAULT_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    DynamicBrokerConfig,
    topic_config_type,
    validate_broker_configs,
)
from kafkalab.storage.log_config import LogConfig

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis

#: Kafka's documentation of a topic config is long; ours names what it does here.
_KAFKA_DEFAULTS = _broker_log_config({})


def config_type(key: str, value: Any) -> int:
    """Kafka's ConfigType of a topic config (DescribeConfigs v3+)."""
    return topic_config_type(key, value)


def handle_describe_configs(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    topics = apis.metadata_cache.topics()
    default = apis.replica_manager.log_manager.default_config
    dynamic = apis.dynamic_config
    include_synonyms = header.api_version >= 1 and body.get("include_synonyms", False)
    include_docs = header.api_version >= 3 and body.get("include_documentation", False)
    me = str(apis.config.node_id)
    results = []
    for resource in body["resources"]:
        name = resource["resource_name"]
        keys = resource["configuration_keys"]
        result = {
            "error_code": 0,
            "error_message": None,
            "resource_type": resource["resource_type"],
            "resource_name": name,
            "configs": [],
        }
        results.append(result)
        if resource["resource_type"] == ResourceType.BROKER:
            if name == "":
                result["configs"] = dynamic.describe_default(keys, include_synonyms, include_docs)
            elif name == me:
                result["configs"] = dynamic.describe_broker(keys, include_synonyms, include_docs)
            else:
                result["error_code"] = int(Errors.INVALID_REQUEST)
                result["error_message"] = (
                    f"Unexpected broker id, expected {me} or empty string, but received {name}"
                )
            continue
        if resource["resource_type"] != ResourceType.TOPIC:
            result["error_code"] = int(Errors.INVALID_REQUEST)
            result["error_message"] = "kafkalab describes the configs of topics and brokers only"
            continue
        info = topics.get(name)
        if info is None:
            result["error_code"] = int(Errors.UNKNOWN_TOPIC_OR_PARTITION)
            result["error_message"] = f"topic {name!r} does not exist"
            continue
        result["configs"] = describe_topic(
            default, info.configs, keys, include_synonyms, dynamic, include_docs
        )
    return {"throttle_time_ms": 0, "results": results}


def describe_topic(
    default: LogConfig,
    overrides: dict[str, str],
    keys: list[str] | None,
    include_synonyms: bool,
    dynamic: DynamicBrokerConfig | None = None,
    include_documentation: bool = False,
) -> list[dict]:
    """Every topic config (or those in `keys`), as ConfigHelper lists them: the
    value the topic's logs use and where it comes from."""
    effective = default.with_overrides(overrides)
    values = effective.to_properties()
    kafka_defaults = _KAFKA_DEFAULTS.to_properties()
    out = []
    for name, value in values.items():
        if keys is not None and name not in keys:
            continue
        chain = []
        if name in overrides:
            chain.append({"name": name, "value": value, "source": DYNAMIC_TOPIC_CONFIG})
        if dynamic is not None:
            chain += dynamic.topic_synonyms(name, kafka_defaults[name])
        else:
            chain.append({"name": name, "value": kafka_defaults[name], "source": DEFAULT_CONFIG})
        source = chain[0]["source"]
        out.append(
            {
                "name": name,
                "value": value,
                "read_only": False,
                "is_default": source == DEFAULT_CONFIG,
                "config_source": source,
                "is_sensitive": False,
                "synonyms": chain if include_synonyms else [],
                "config_type": config_type(name, getattr(effective, name.replace(".", "_"))),
                "documentation": (
                    f"Topic config {name} (kafkalab.storage.log_config.LogConfig)"
                    if include_documentation
                    else None
                ),
            }
        )
    return out


# -- AlterConfigs, IncrementalAlterConfigs -------------------------------------------------


def handle_alter_configs(apis: KafkaApis, header: RequestHeader, body: dict) -> Any:
    return _alter(apis, header, body, incremental=False)


def handle_incremental_alter_configs(apis: KafkaApis, header: RequestHeader, body: dict) -> Any:
    return _alter(apis, header, body, incremental=True)


async def _alter(apis: KafkaApis, header: RequestHeader, body: dict, incremental: bool) -> dict:
    refused = preprocess(apis, body, incremental)
    rest = [r for i, r in enumerate(body["resources"]) if i not in refused]
    answered: list[dict] = []
    if rest:
        forwarded = {"resources": rest, "validate_only": body["validate_only"]}
        response = await apis.metadata_cache.alter_configs(
            incremental, header.api_version, forwarded
        )
        answered = response["responses"]
    answers = iter(answered)
    responses = []
    for i, r in enumerate(body["resources"]):
        if i in refused:
            e = refused[i]
            responses.append(
                {
                    "error_code": int(e.code),
                    "error_message": e.message,
                    "resource_type": r["resource_type"],
                    "resource_name": r["resource_name"],
                }
            )
        else:
            responses.append(next(answers))
    return {"throttle_time_ms": 0, "responses": responses}


def preprocess(apis: KafkaApis, body: dict, incremental: bool) -> dict[int, KafkaError]:
    """What this broker refuses before the controller sees it, by resource index
    (Kafka: ConfigAdminManager.preprocess)."""
    refused: dict[int, KafkaError] = {}
    seen: dict[tuple[int, str], int] = {}
    for i, r in enumerate(body["resources"]):
        key = (r["resource_type"], r["resource_name"])
        if key in seen:
            for j in (seen[key], i):
                refused[j] = KafkaError(
                    Errors.INVALID_REQUEST, "Each resource must appear at most once."
                )
        seen.setdefault(key, i)
    for i, r in enumerate(body["resources"]):
        if i in refused:
            continue
        try:
            names = [c["name"] for c in r["configs"]]
            if len(set(names)) != len(names):
                raise KafkaError(Errors.INVALID_REQUEST, "Error due to duplicate config keys")
            nulls = [
                c["name"]
                for c in r["configs"]
                if c["value"] is None
                and not (incremental and c["config_operation"] == OpType.DELETE)
            ]
            if nulls:
                raise KafkaError(
                    Errors.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls)
                )
            if r["resource_type"] == ResourceType.BROKER:
                _check_broker_change(apis, r, incremental)
            elif r["resource_type"] != ResourceType.TOPIC:
                raise KafkaError(
                    Errors.INVALID_REQUEST,
                    f"Unknown resource type {r['resource_type']}: kafkalab keeps the configs "
                    "of topics (2) and brokers (4) only",
                )
        except KafkaError as e:
            refused[i] = e
    return refused


def _check_broker_change(apis: KafkaApis, r: dict, incremental: bool) -> None:
    name = r["resource_name"]
    if name:
        try:
            broker_id = int(name)
        except ValueError:
            raise KafkaError(
                Errors.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}"
            ) from None
        if broker_id != apis.config.node_id:
            raise KafkaError(
                Errors.INVALID_REQUEST,
                f"Unexpected broker id, expected {apis.config.node_id}, but received {name}",
            )
    if incremental:
        current = apis.metadata_cache.broker_configs().get(name, {})
        for c in r["configs"]:
            if c["config_operation"] not in iter(OpType):
                raise KafkaError(
                    Errors.INVALID_REQUEST, f"Unknown operations type {c['config_operation']}"
                )
        changes = incremental_changes(
            ResourceType.BROKER,
            name,
            current,
            [(c["name"], c["config_operation"], c["value"]) for c in r["configs"]],
        )
        after = {**current, **{k: v for k, v in changes.items() if v is not None}}
        for k, v in changes.items():
            if v is None:
                after.pop(k, None)
        props = after
    else:
        props = {c["name"]: c["value"] for c in r["configs"]}
    validate_broker_configs(props, per_broker=bool(name))
