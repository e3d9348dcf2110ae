"""DynamicBrokerConfig: a broker's configs in layers, some changeable while it runs.

Kafka's class: kafka.server.DynamicBrokerConfig (with ConfigHelper, which
describes configs). A broker config's value comes from the first layer that
sets it, each a ConfigSource of DescribeConfigs:

    DYNAMIC_BROKER_CONFIG (2)          this broker's dynamic config (ConfigRecord,
                                       resource BROKER "1")
    DYNAMIC_DEFAULT_BROKER_CONFIG (3)  the cluster-wide dynamic default (resource "")
    STATIC_BROKER_CONFIG (4)           server.properties and --override
    DEFAULT_CONFIG (5)                 Kafka's default

What kafkalab changes live (Kafka's dynamic configs with behaviour here): the
topics' broker-wide defaults (`log.retention.ms`, `log.retention.bytes`,
`log.segment.bytes`, `log.roll.ms`, `log.cleanup.policy`, `min.insync.replicas`,
`compression.type`, `message.max.bytes`, `log.message.timestamp.type`, and the
other `log.` synonyms of topic configs: every log without its own override takes
the new value at once) and `unclean.leader.election.enable` (the controller's, at
the cluster-wide default). Dynamic in Kafka but only stored and described here
(DYNAMIC_STORED_ONLY): thread pool sizes, the cleaner's tuning, listeners. A
config Kafka cannot change while running (READ_ONLY: node.id, log.dirs,
num.partitions, ...) is refused with INVALID_REQUEST ("Cannot update these
configs dynamically"), as is a bad value (KAFKA-13609: Kafka answers
INVALID_REQUEST there, not INVALID_CONFIG); a key kafkalab does not know is
stored, as Kafka stores custom configs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafkalab.errors import Errors, KafkaError
from kafkalab.server.config import _broker_log_config
from kafkalab.storage.log_config import (
    BROKER_SYNONYMS,
    BROKER_UNIT_SYNONYMS,
    InvalidConfigError,
    LogConfig,
)

# Kafka: DescribeConfigsResponse.ConfigSource
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
# Kafka: DescribeConfigsResponse.ConfigType
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST = 1, 2, 3, 4, 5, 6, 7

_TOPIC_INT_KEYS = {
    "segment.bytes",
    "segment.index.bytes",
    "index.interval.bytes",
    "max.message.bytes",
    "min.insync.replicas",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
}
_TOPIC_LIST_KEYS = {
    "cleanup.policy",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
}


def topic_config_type(key: str, value: object) -> int:
    """Kafka's ConfigType of a topic config (DescribeConfigs v3+)."""
    if key in _TOPIC_LIST_KEYS:
        return LIST
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, int):
        return INT if key in _TOPIC_INT_KEYS else LONG
    return STRING


@dataclass(frozen=True)
class BrokerConfigDef:
    name: str
    default: str | None
    type: int
    dynamic: bool  # may change while the broker runs (Kafka's DynamicConfig.Broker)
    doc: str
    per_broker_only: bool = False  # not at the cluster-wide default (listeners)


def _log_defs() -> dict[str, BrokerConfigDef]:
    """The `log.` synonyms of topic configs: dynamic in Kafka (DynamicLogConfig)
    except those in other units (log.retention.hours), applied here."""
    defaults = _broker_log_config({})
    values = defaults.to_properties()
    out = {}
    for name, topic_key in BROKER_SYNONYMS.items():
        value = getattr(defaults, topic_key.replace(".", "_"))
        if name in BROKER_UNIT_SYNONYMS:
            default = "168" if name.endswith("hours") else None
            out[name] = BrokerConfigDef(
                name,
                default,
                LONG if "minutes" not in name else INT,
                False,
                f"{topic_key} for every topic without its own, in {name.rsplit('.', 1)[1]}",
            )
            continue
        out[name] = BrokerConfigDef(
            name,
            values[topic_key],
            topic_config_type(topic_key, value),
            True,
            f"The default {topic_key} of every topic without an override of its own.",
        )
    return out


_OTHER_DEFS = [
    BrokerConfigDef(
        "unclean.leader.election.enable",
        "false",
        BOOLEAN,
        True,
        "Elect an out-of-sync replica when no in-sync one is left (the controller "
        "reads the cluster-wide default), at the cost of committed records.",
    ),
    # kafkalab's defaults (kafkalab.server.config.KafkaConfig), where they are not Kafka's
    BrokerConfigDef("node.id", "1", INT, False, "This broker's id."),
    BrokerConfigDef("broker.id", "1", INT, False, "This broker's id (node.id's old name)."),
    BrokerConfigDef("log.dirs", "/tmp/kafkalab-logs", LIST, False, "Where the logs live."),
    BrokerConfigDef("log.dir", "/tmp/kafkalab-logs", STRING, False, "log.dirs, one directory."),
    BrokerConfigDef("num.partitions", "1", INT, False, "Partitions of an auto-created topic."),
    BrokerConfigDef(
        "default.replication.factor", "1", INT, False, "Replicas of an auto-created topic."
    ),
    BrokerConfigDef(
        "auto.create.topics.enable", "true", BOOLEAN, False, "Create a topic on first use."
    ),
    BrokerConfigDef(
        "socket.request.max.bytes", str(100 * 1024 * 1024), INT, False, "Largest request."
    ),
    BrokerConfigDef("queued.max.requests", "500", INT, False, "Requests queued for handlers."),
    BrokerConfigDef(
        "log.retention.check.interval.ms",
        "300000",
        LONG,
        False,
        "How often retention deletes old segments.",
    ),
    BrokerConfigDef(
        "log.flush.offset.checkpoint.interval.ms", "60000", INT, False, "Recovery points."
    ),
    BrokerConfigDef("inter.broker.listener.name", None, STRING, False, "The listener brokers use."),
    BrokerConfigDef(
        "controller.quorum.bootstrap.servers", "", LIST, False, "Where the controller is."
    ),
    BrokerConfigDef(
        "controller.quorum.voters", "", LIST, False, "The controllers' ids and endpoints."
    ),
    BrokerConfigDef("broker.heartbeat.interval.ms", "2000", INT, False, "Heartbeats."),
    BrokerConfigDef("broker.session.timeout.ms", "9000", INT, False, "Fenced when silent."),
    BrokerConfigDef(
        "replica.lag.time.max.ms", "30000", LONG, False, "A follower this far behind leaves."
    ),
    BrokerConfigDef("replica.fetch.wait.max.ms", "500", INT, False, "A follower's long poll."),
    BrokerConfigDef("log.cleaner.enable", "true", BOOLEAN, False, "Run the log cleaner."),
    # Dynamic in Kafka; stored and described, not applied, here:
    BrokerConfigDef("num.io.threads", "8", INT, True, "Request handler threads."),
    BrokerConfigDef("background.threads", "10", INT, True, "Background threads."),
    BrokerConfigDef("log.cleaner.threads", "1", INT, True, "Log cleaner threads."),
    BrokerConfigDef("log.cleaner.backoff.ms", "15000", LONG, True, "Cleaner sleep."),
    BrokerConfigDef(
        "log.cleaner.dedupe.buffer.size", str(128 * 1024 * 1024), LONG, True, "Cleaner memory."
    ),
    BrokerConfigDef(
        "log.cleaner.io.max.bytes.per.second",
        "1.7976931348623157E308",
        DOUBLE,
        True,
        "Cleaner I/O limit.",
    ),
    BrokerConfigDef(
        "producer.id.expiration.ms", "86400000", INT, True, "Idle producer ids expire."
    ),
    BrokerConfigDef("listeners", None, LIST, True, "Listeners.", per_broker_only=True),
    BrokerConfigDef(
        "advertised.listeners", None, LIST, True, "Advertised listeners.", per_broker_only=True
    ),
]

#: Every broker config kafkalab knows, by name.
BROKER_CONFIGS: dict[str, BrokerConfigDef] = {**_log_defs(), **{d.name: d for d in _OTHER_DEFS}}
#: Dynamic in Kafka, and acted on here (the rest of the dynamic ones are stored only).
DYNAMIC_APPLIED = frozenset(
    name for name, d in BROKER_CONFIGS.items() if d.dynamic and name in BROKER_SYNONYMS
) | {"unclean.leader.election.enable"}
DYNAMIC_STORED_ONLY = frozenset(
    name for name, d in BROKER_CONFIGS.items() if d.dynamic and name not in DYNAMIC_APPLIED
)
#: The broker config that is a topic config's broker-wide default (Kafka's synonym).
TOPIC_TO_BROKER: dict[str, str] = {
    "unclean.leader.election.enable": "unclean.leader.election.enable"
}
for _name, _topic_key in BROKER_SYNONYMS.items():
    if _name not in BROKER_UNIT_SYNONYMS:
        TOPIC_TO_BROKER.setdefault(_topic_key, _name)


def validate_broker_configs(props: Mapping[str, str], per_broker: bool) -> None:
    """The configs a BROKER resource would have after a change (Kafka:
    DynamicBrokerConfig.validate): INVALID_REQUEST if any cannot change while a
    broker runs, is per-broker only but set cluster-wide, or has a bad value."""
    read_only = sorted(k for k in props if k in BROKER_CONFIGS and not BROKER_CONFIGS[k].dynamic)
    if read_only:
        raise KafkaError(
            Errors.INVALID_REQUEST,
            f"Cannot update these configs dynamically: {{{', '.join(read_only)}}}",
        )
    if not per_broker:
        only = sorted(k for k in props if k in BROKER_CONFIGS and BROKER_CONFIGS[k].per_broker_only)
        if only:
            raise KafkaError(
                Errors.INVALID_REQUEST,
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {{{', '.join(only)}}}",
            )
    try:
        _broker_log_config(dict(props))
    except InvalidConfigError as e:
        raise KafkaError(Errors.INVALID_REQUEST, e.message) from None
    value = props.get("unclean.leader.election.enable")
    if value is not None and value.strip().lower() not in ("true", "false"):
        raise KafkaError(
            Errors.INVALID_REQUEST,
            f"Invalid value {value} for configuration unclean.leader.election.enable: "
            "Expected value to be either true or false",
        )
    for key, value in props.items():
        d = BROKER_CONFIGS.get(key)
        if d is not None and d.type in (INT, LONG) and key not in BROKER_SYNONYMS:
            try:
                int(value)
            except ValueError:
                raise KafkaError(
                    Errors.INVALID_REQUEST,
                    f"Invalid value {value} for configuration {key}: Not a number of type "
                    f"{'INT' if d.type == INT else 'LONG'}",
                ) from None


class DynamicBrokerConfig:
    """One broker's config layers, and the broker-wide LogConfig they make."""

    def __init__(self, broker_id: int, static: Mapping[str, str]) -> None:
        self.broker_id = broker_id
        self.static = {k: str(v) for k, v in static.items()}
        self.cluster_default: dict[str, str] = {}
        self.per_broker: dict[str, str] = {}

    def update(self, broker_configs: Mapping[str, Mapping[str, str]]) -> LogConfig:
        """Take the dynamic layers from the image's broker configs; return the
        broker-wide LogConfig they make (the default of every topic)."""
        self.cluster_default = dict(broker_configs.get("", {}))
        self.per_broker = dict(broker_configs.get(str(self.broker_id), {}))
        return self.log_config()

    def log_config(self) -> LogConfig:
        """Static, then the cluster default, then this broker's: a dynamic value
        replaces every static synonym of the same topic config (log.retention.ms
        set dynamically wins over a static log.retention.hours)."""
        merged = dict(self.static)
        for layer in (self.cluster_default, self.per_broker):
            for key, value in layer.items():
                topic_key = BROKER_SYNONYMS.get(key)
                if topic_key is not None:
                    for other in [k for k in merged if BROKER_SYNONYMS.get(k) == topic_key]:
                        del merged[other]
                merged[key] = value
        try:
            return _broker_log_config(merged)
        except InvalidConfigError:
            return _broker_log_config(self.static)  # validated before written; never here

    def layers(self) -> list[tuple[int, Mapping[str, str]]]:
        return [
            (DYNAMIC_BROKER_CONFIG, self.per_broker),
            (DYNAMIC_DEFAULT_BROKER_CONFIG, self.cluster_default),
            (STATIC_BROKER_CONFIG, self.static),
        ]

    def synonyms(self, name: str) -> list[dict]:
        """Where `name` is set, first wins (Kafka: ConfigHelper's synonyms): each
        layer under the name itself, then the static other-unit synonyms
        (log.retention.hours), then Kafka's default."""
        out = []
        topic_key = BROKER_SYNONYMS.get(name)
        names = [name]
        if topic_key is not None and name not in BROKER_UNIT_SYNONYMS:
            names += [k for k, t in BROKER_SYNONYMS.items() if t == topic_key and k != name]
        for source, layer in self.layers():
            for n in names:
                if n in layer and (n == name or source == STATIC_BROKER_CONFIG):
                    out.append({"name": n, "value": layer[n], "source": source})
        d = BROKER_CONFIGS.get(name)
        if d is not None:
            out.append({"name": name, "value": d.default, "source": DEFAULT_CONFIG})
        return out

    def describe_broker(
        self, keys: list[str] | None, include_synonyms: bool, include_documentation: bool
    ) -> list[dict]:
        """This broker's configs: every one kafkalab knows and every one set."""
        names = list(BROKER_CONFIGS)
        for _, layer in self.layers():
            names += [k for k in layer if k not in names]
        out = []
        for name in names:
            if keys is not None and name not in keys:
                continue
            synonyms = self.synonyms(name)
            first = synonyms[0] if synonyms else {"value": None, "source": DEFAULT_CONFIG}
            d = BROKER_CONFIGS.get(name)
            out.append(
                _entry(
                    name,
                    self._effective(name, first["value"]),
                    first["source"],
                    read_only=d is not None and not d.dynamic,
                    synonyms=synonyms if include_synonyms else [],
                    config_type=d.type if d is not None else STRING,
                    documentation=d.doc if include_documentation and d is not None else None,
                )
            )
        return out

    def _effective(self, name: str, value: str | None) -> str | None:
        """A topic default's value as the logs use it (log.retention.ms set from a
        static log.retention.hours shows in ms)."""
        topic_key = BROKER_SYNONYMS.get(name)
        if topic_key is None or name in BROKER_UNIT_SYNONYMS:
            return value
        return self.log_config().to_properties()[topic_key]

    def describe_default(
        self, keys: list[str] | None, include_synonyms: bool, include_documentation: bool
    ) -> list[dict]:
        """The cluster-wide default resource (""): its dynamic configs only."""
        out = []
        for name, value in self.cluster_default.items():
            if keys is not None and name not in keys:
                continue
            d = BROKER_CONFIGS.get(name)
            synonym = {"name": name, "value": value, "source": DYNAMIC_DEFAULT_BROKER_CONFIG}
            out.append(
                _entry(
                    name,
                    value,
                    DYNAMIC_DEFAULT_BROKER_CONFIG,
                    read_only=False,
                    synonyms=[synonym] if include_synonyms else [],
                    config_type=d.type if d is not None else STRING,
                    documentation=d.doc if include_documentation and d is not None else None,
                )
            )
        return out

    def topic_synonyms(self, topic_key: str, default_value: str) -> list[dict]:
        """A topic config's broker-level synonyms below the topic's own override."""
        broker_key = TOPIC_TO_BROKER.get(topic_key)
        if broker_key is None:
            return [{"name": topic_key, "value": default_value, "source": DEFAULT_CONFIG}]
        out = [s for s in self.synonyms(broker_key) if s["source"] != DEFAULT_CONFIG]
        out.append({"name": broker_key, "value": default_value, "source": DEFAULT_CONFIG})
        return out


def _entry(
    name: str,
    value: str | None,
    source: int,
    *,
    read_only: bool,
    synonyms: list[dict],
    config_type: int,
    documentation: str | None,
) -> dict:
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "is_default": source == DEFAULT_CONFIG,
        "config_source": source,
        "is_sensitive": False,
        "synonyms": synonyms,
        "config_type": config_type,
        "documentation": documentation,
    }
