"""The group coordinator's configuration, with Kafka's names and defaults.

Kafka's classes: kafka.server.KafkaConfig (group.* and offsets.* keys) and
org.apache.kafka.coordinator.group.GroupCoordinatorConfig. `from_properties`
takes the dotted names a server.properties file uses.

    group.min.session.timeout.ms        6000      a JoinGroup's session.timeout.ms below this:
    group.max.session.timeout.ms        1800000   ... or above this: INVALID_SESSION_TIMEOUT
    group.max.size                      2^31-1    more members: GROUP_MAX_SIZE_REACHED
    group.initial.rebalance.delay.ms    3000      an Empty group waits this long (and again,
                                                  up to rebalance.timeout.ms, while members
                                                  keep arriving) before its first generation
    offsets.retention.minutes           10080     committed offsets of an Empty group (or of
                                                  topics a Stable group no longer reads) expire
    offsets.retention.check.interval.ms 600000    how often expiry runs
    offsets.topic.num.partitions        50        __consumer_offsets partitions
    offsets.topic.replication.factor    3         (for whoever creates the topic)
    offset.metadata.max.bytes           4096      longer commit metadata: OFFSET_METADATA_TOO_LARGE

The new consumer protocol (KIP-848):

    group.consumer.session.timeout.ms     45000   no ConsumerGroupHeartbeat this long: fenced
    group.consumer.heartbeat.interval.ms  5000    told to every member in each response
    group.consumer.max.size               2^31-1
    group.consumer.assignors              uniform,range   the first is the default

New members that have not finished their first join are dropped after
NEW_MEMBER_JOIN_TIMEOUT_MS (5 minutes; a constant in Kafka too).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class GroupConfig:
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    group_initial_rebalance_delay_ms: int = 3000
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offset_metadata_max_bytes: int = 4096
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_max_size: int = 2**31 - 1
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_properties(cls, props: dict[str, str | int]) -> GroupConfig:
        """From server.properties keys (`group.max.size`, ...); unknown keys are ignored."""
        known = {f.name.replace("_", "."): f.name for f in fields(cls)}
        kwargs: dict = {}
        for key, value in props.items():
            if key not in known:
                continue
            name = known[key]
            if name == "group_consumer_assignors":
                kwargs[name] = tuple(a.strip() for a in str(value).split(",") if a.strip())
            else:
                kwargs[name] = int(value)
        return cls(**kwargs)
