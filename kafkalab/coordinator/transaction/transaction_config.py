"""The transaction coordinator's configuration, with Kafka's names and defaults.

Kafka's classes: kafka.server.KafkaConfig (transaction.* keys) and
org.apache.kafka.coordinator.transaction.TransactionStateManagerConfig /
TransactionLogConfig. `from_properties` takes the dotted names of server.properties.

    transaction.state.log.num.partitions       50         __transaction_state partitions
    transaction.state.log.replication.factor   3          capped by the live brokers
    transaction.state.log.min.isr              2          (capped by the replication factor)
    transaction.state.log.segment.bytes        104857600
    transaction.max.timeout.ms                 900000     a producer's transaction.timeout.ms
                                                          above this: INVALID_TRANSACTION_TIMEOUT
    transactional.id.expiration.ms             604800000  an id with no transaction this long
                                                          is forgotten (a tombstone)
    transaction.abort.timed.out.transaction.cleanup.interval.ms   10000   how often open
                                                          transactions past their timeout are
                                                          looked for (and aborted)
    transaction.remove.expired.transaction.cleanup.interval.ms    3600000 how often expired
                                                          transactional ids are looked for
    offsets.topic.num.partitions               50         AddOffsetsToTxn adds the group's
                                                          __consumer_offsets partition

and kafkalab's own, for teaching (named like kafkalab.follower.truncation.rule):

    kafkalab.transaction.init.epoch.rule       bump       `bump`: InitProducerId bumps the
                                                          producer epoch, fencing every older
                                                          instance (Kafka). `no-bump`: it does
                                                          not (the spec's MC_transactions_no_epoch_bump),
                                                          so a zombie can still commit. Never
                                                          use it but to watch that happen.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum

INIT_EPOCH_RULE_KEY = "kafkalab.transaction.init.epoch.rule"


class InitEpochRule(StrEnum):
    """kafkalab.transaction.init.epoch.rule: what InitProducerId does to the epoch."""

    BUMP = "bump"
    NO_BUMP = "no-bump"


INIT_EPOCH_RULES = tuple(InitEpochRule)


@dataclass(frozen=True)
class TransactionConfig:
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_state_log_segment_bytes: int = 104_857_600
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    offsets_topic_num_partitions: int = 50
    init_epoch_rule: InitEpochRule = InitEpochRule.BUMP
    #: the cluster's finalized transaction.version (kafkalab.server.features): what
    #: the coordinator writes as the client transaction version of the aborts no
    #: client asked for (timeouts, fences), as Kafka's does with its own level
    transaction_version: int = 2

    @property
    def bump_epoch_on_init(self) -> bool:
        return self.init_epoch_rule == InitEpochRule.BUMP

    @classmethod
    def from_properties(cls, props: dict[str, str | int]) -> TransactionConfig:
        """From server.properties keys; unknown keys are ignored."""
        known = {f.name.replace("_", "."): f.name for f in fields(cls)}
        kwargs: dict = {}
        for key, value in props.items():
            if key == INIT_EPOCH_RULE_KEY:
                try:
                    kwargs["init_epoch_rule"] = InitEpochRule(str(value))
                except ValueError:
                    raise ValueError(
                        f"{INIT_EPOCH_RULE_KEY}={value!r}: use one of {', '.join(INIT_EPOCH_RULES)}"
                    ) from None
            elif key in known and known[key] != "init_epoch_rule":
                kwargs[known[key]] = int(value)
        return cls(**kwargs)
