"""LogConfig: the per-topic settings of a log, under Kafka's own names and defaults.

Kafka's class: org.apache.kafka.storage.internals.log.LogConfig. Topic-level keys
(`segment.bytes`) are what `kafka-configs.sh --entity-type topics` takes; the
broker-wide defaults carry a `log.` prefix (`log.segment.bytes`) and are read by
`LogConfig.from_properties(..., broker_prefix=True)`.

    >>> LogConfig.from_properties({"segment.bytes": "1024"}).segment_bytes
    1024
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkalab.errors import Errors, KafkaErrorWithCode

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class InvalidConfigError(KafkaErrorWithCode, ValueError):
    """A config value is of the wrong type or out of range (Kafka: INVALID_CONFIG, 40)."""

    code = Errors.INVALID_CONFIG


# Kafka key -> (attribute, minimum allowed value). Defaults are on the dataclass.
_KEYS: dict[str, tuple[str, int | None]] = {
    "segment.bytes": ("segment_bytes", 14),  # Kafka: atLeast(LegacyRecord.RECORD_OVERHEAD_V0)
    "segment.ms": ("segment_ms", 1),
    "segment.jitter.ms": ("segment_jitter_ms", 0),
    "segment.index.bytes": ("segment_index_bytes", 4),
    "index.interval.bytes": ("index_interval_bytes", 0),
    "retention.bytes": ("retention_bytes", None),
    "retention.ms": ("retention_ms", -1),
    "flush.messages": ("flush_messages", 1),
    "flush.ms": ("flush_ms", 0),
    "max.message.bytes": ("max_message_bytes", 0),
    "message.timestamp.type": ("message_timestamp_type", None),
    "file.delete.delay.ms": ("file_delete_delay_ms", 0),
    "min.insync.replicas": ("min_insync_replicas", 1),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", None),
    "cleanup.policy": ("cleanup_policy", None),
    "delete.retention.ms": ("delete_retention_ms", 0),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", 0),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", 0),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", 1),
    "compression.type": ("compression_type", None),
    "compression.gzip.level": ("compression_gzip_level", None),
    "compression.lz4.level": ("compression_lz4_level", None),
    "compression.zstd.level": ("compression_zstd_level", None),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", 0),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", 0),
    # Stored and described, with no behaviour here (README: topic configs):
    "preallocate": ("preallocate", None),
    "leader.replication.throttled.replicas": ("leader_replication_throttled_replicas", None),
    "follower.replication.throttled.replicas": ("follower_replication_throttled_replicas", None),
    "remote.storage.enable": ("remote_storage_enable", None),
    "local.retention.ms": ("local_retention_ms", -2),
    "local.retention.bytes": ("local_retention_bytes", -2),
    "remote.log.copy.disable": ("remote_log_copy_disable", None),
    "remote.log.delete.on.disable": ("remote_log_delete_on_disable", None),
}

#: Kafka 4.0's log.message.timestamp.after.max.ms (KIP-1030): a broker's default.
BROKER_TIMESTAMP_AFTER_MAX_MS = 3_600_000

#: Topic configs a kafkalab log stores and describes but does not act on: no
#: tiered storage, no replication quotas, no preallocated segment files.
STORED_ONLY = (
    "preallocate",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
    "remote.storage.enable",
    "local.retention.ms",
    "local.retention.bytes",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
)

#: compression.type values (Kafka: BrokerCompressionType); `producer` keeps the
#: producer's codec, the others recompress on append.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
#: Valid compression levels (Kafka: CompressionType.*.levelValidator).
_LEVELS = {
    "compression.gzip.level": (1, 9, (-1,)),
    "compression.lz4.level": (1, 17, ()),
    "compression.zstd.level": (-131072, 22, ()),
}

# Broker-level names where they differ from `log.` + topic key (Kafka's LogConfig synonyms).
_BROKER_SYNONYMS = {
    "log.roll.ms": "segment.ms",
    "log.roll.hours": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.minutes": "retention.ms",
    "log.retention.hours": "retention.ms",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.segment.bytes": "segment.bytes",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.preallocate": "preallocate",
    # the broker-level defaults under the topic configs' own names
    "min.insync.replicas": "min.insync.replicas",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
}
_UNIT_MS = {
    "log.roll.hours": 3_600_000,
    "log.retention.hours": 3_600_000,
    "log.retention.minutes": 60_000,
}
#: Broker config name -> the topic config it is the broker-wide default of (Kafka:
#: ServerTopicConfigSynonyms); BROKER_UNIT_SYNONYMS are the ones in other units
#: (log.retention.hours), which only a server.properties sets.
BROKER_SYNONYMS: Mapping[str, str] = _BROKER_SYNONYMS
BROKER_UNIT_SYNONYMS = frozenset(_UNIT_MS)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one log. Attribute names are Kafka's keys with `_` for `.`."""

    segment_bytes: int = 1024 * 1024 * 1024  # segment.bytes: roll when a segment would pass it
    segment_ms: int = 7 * 24 * 3600 * 1000  # segment.ms: roll a segment this old
    segment_jitter_ms: int = 0  # segment.jitter.ms
    segment_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes: preallocated index size
    index_interval_bytes: int = 4096  # index.interval.bytes: bytes between index entries
    retention_bytes: int = -1  # retention.bytes: -1 keeps any size
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms: -1 keeps forever
    flush_messages: int = LONG_MAX  # flush.messages: fsync after this many messages
    flush_ms: int = LONG_MAX  # flush.ms: fsync data older than this
    max_message_bytes: int = 1024 * 1024 + 12  # max.message.bytes: largest batch accepted
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type: or LogAppendTime
    file_delete_delay_ms: int = 60_000  # file.delete.delay.ms
    min_insync_replicas: int = 1  # min.insync.replicas
    unclean_leader_election_enable: bool = False  # unclean.leader.election.enable
    cleanup_policy: str = "delete"  # cleanup.policy: delete, compact, or compact,delete
    delete_retention_ms: int = 24 * 3600 * 1000  # delete.retention.ms: how long tombstones stay
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio: dirty bytes / all bytes
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms: records younger stay uncompacted
    max_compaction_lag_ms: int = (
        LONG_MAX  # max.compaction.lag.ms: clean by then, whatever the ratio
    )
    compression_type: str = "producer"  # compression.type: producer keeps the batch's codec
    compression_gzip_level: int = -1  # compression.gzip.level: -1 is zlib's default (6)
    compression_lz4_level: int = 9  # compression.lz4.level
    compression_zstd_level: int = 3  # compression.zstd.level
    # message.timestamp.before/after.max.ms: how far a CreateTime timestamp may lie
    # before or after the log's clock. A broker takes Kafka 4.0's defaults (any
    # past, one hour ahead: BROKER_TIMESTAMP_AFTER_MAX_MS); a log built by hand
    # (labs, tests) runs on a clock of its own, so by default it takes any time.
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    # Stored and described only (STORED_ONLY):
    preallocate: bool = False
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    remote_storage_enable: bool = False
    local_retention_ms: int = -2  # -2: the value of retention.ms
    local_retention_bytes: int = -2  # -2: the value of retention.bytes
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False

    def __post_init__(self) -> None:
        for key, (attr, minimum) in _KEYS.items():
            value = getattr(self, attr)
            if minimum is not None and value < minimum:
                raise InvalidConfigError(f"{key}={value} is invalid: it must be at least {minimum}")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise InvalidConfigError(
                f"message.timestamp.type={self.message_timestamp_type!r} is invalid: "
                "use CreateTime or LogAppendTime"
            )
        policies = [p.strip() for p in self.cleanup_policy.split(",")]
        if not policies or any(p not in ("delete", "compact") for p in policies):
            raise InvalidConfigError(
                f"cleanup.policy={self.cleanup_policy!r} is invalid: use delete, compact, "
                "or compact,delete"
            )
        if self.compression_type not in COMPRESSION_TYPES:
            raise InvalidConfigError(
                f"compression.type={self.compression_type!r} is invalid: use one of "
                + ", ".join(COMPRESSION_TYPES)
            )
        for key, (low, high, extra) in _LEVELS.items():
            level = getattr(self, _KEYS[key][0])
            if not (low <= level <= high or level in extra):
                raise InvalidConfigError(
                    f"{key}={level} is invalid: it must be between {low} and {high}"
                    + (f" (or {extra[0]})" if extra else "")
                )
        for key in (
            "leader.replication.throttled.replicas",
            "follower.replication.throttled.replicas",
        ):
            _check_replica_list(key, getattr(self, _KEYS[key][0]))
        if self.remote_storage_enable:
            raise InvalidConfigError(
                "remote.storage.enable=true is invalid: Tiered Storage functionality is "
                "disabled in the broker (kafkalab has no remote log storage). Topic cannot "
                "be configured with remote log storage."
            )
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise InvalidConfigError(
                f"min.cleanable.dirty.ratio={self.min_cleanable_dirty_ratio} is invalid: "
                "it must be between 0 and 1"
            )

    @property
    def compact(self) -> bool:
        """cleanup.policy includes compact: the LogCleaner keeps the latest record per key."""
        return "compact" in (p.strip() for p in self.cleanup_policy.split(","))

    @property
    def max_segment_ms(self) -> int:
        """How old the active segment may get before a roll (Kafka:
        LogConfig.maxSegmentMs): segment.ms, or for a compacted log the smaller
        max.compaction.lag.ms, since the active segment is never cleaned."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def delete(self) -> bool:
        """cleanup.policy includes delete: retention.ms and retention.bytes apply."""
        return "delete" in (p.strip() for p in self.cleanup_policy.split(","))

    @classmethod
    def from_properties(
        cls, props: Mapping[str, Any], *, broker_prefix: bool = False, base: LogConfig | None = None
    ) -> LogConfig:
        """Build from Kafka keys. Unknown keys are ignored when `broker_prefix` (a
        server.properties holds much more), and refused otherwise."""
        values: dict[str, Any] = {}
        for raw_key, raw in props.items():
            key = raw_key
            factor = 1
            if broker_prefix:
                if raw_key in _BROKER_SYNONYMS:
                    key = _BROKER_SYNONYMS[raw_key]
                    factor = _UNIT_MS.get(raw_key, 1)
                else:
                    continue
            if key not in _KEYS:
                raise InvalidConfigError(
                    f"unknown topic config {raw_key!r}; known keys: {', '.join(sorted(_KEYS))}"
                )
            attr = _KEYS[key][0]
            values[attr] = _parse(key, attr, raw)
            if factor != 1:
                values[attr] *= factor
        return dataclasses.replace(base or cls(), **values)

    def with_overrides(self, props: Mapping[str, Any]) -> LogConfig:
        """A copy with topic-level overrides (Kafka keys) applied."""
        return LogConfig.from_properties(props, base=self)

    def to_properties(self) -> dict[str, str]:
        """Kafka keys and string values, as `kafka-configs.sh --describe` shows them."""
        out = {}
        for key, (attr, _) in _KEYS.items():
            value = getattr(self, attr)
            out[key] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


def _check_replica_list(key: str, value: str) -> None:
    """Kafka's ThrottledReplicaListValidator: `*`, or partition:broker pairs."""
    items = [v.strip() for v in value.split(",") if v.strip()]
    if items == ["*"]:
        return
    for item in items:
        parts = item.split(":")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise InvalidConfigError(
                f"{key}={value!r} is invalid: it must be the literal '*' or a list of "
                "replicas in the format [partitionId]:[brokerId],[partitionId]:[brokerId],..."
            )


def _parse(key: str, attr: str, raw: Any) -> Any:
    field_type = type(getattr(LogConfig(), attr))
    if isinstance(raw, field_type) and not (field_type is int and isinstance(raw, bool)):
        return raw
    if field_type is float and isinstance(raw, int) and not isinstance(raw, bool):
        return float(raw)
    text = str(raw).strip()
    try:
        if field_type is bool:
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if field_type is int:
            return int(text)
        if field_type is float:
            return float(text)
        return text
    except ValueError:
        raise InvalidConfigError(
            f"{key}={raw!r} is invalid: expected {field_type.__name__}"
        ) from None
