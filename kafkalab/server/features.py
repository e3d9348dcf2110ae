"""Features: what ApiVersions v3+ advertises as supported and finalized (KIP-584).

Kafka's classes: org.apache.kafka.server.common.Feature (MetadataVersion,
TransactionVersion, GroupVersion) and FinalizedFeatures; a Kafka cluster
finalizes each feature's level in its metadata log (`kafka-storage format
--feature`, `kafka-features upgrade`), and every broker answers ApiVersions with
the levels and the epoch (the offset of the record) they were finalized at. A
client reads the finalized levels, not the supported ranges: Kafka's Java client
turns transactions v2 on when `transaction.version` is finalized at 2 or more
(TransactionManager.isTransactionV2Enabled), and only then sends Produce v12,
EndTxn v5 and TxnOffsetCommit v5 in a transaction.

The levels kafkalab advertises, and why:

    feature              supported  finalized   why
    metadata.version     7-25       25          3.3-IV3 (KRaft's first) to 4.0-IV3: the
                                                metadata records kafkalab writes are 4.0's
    transaction.version  0-2        1 or 2      the setting `transaction.version`
                                                (default 2): 2 is KIP-890 part 2 (an epoch
                                                bump per transaction, partitions added by
                                                the leaders); 1 lets a lab show version 1
                                                side by side. Level 1 is Kafka's flexible
                                                TransactionLogValue, which both read.
    group.version        0-1        1           KIP-848's ConsumerGroupHeartbeat is served

`transaction.version` is cluster-wide: every broker of a LocalCluster gets the
same setting (`LocalCluster(broker_props={"transaction.version": "1"})`,
`kafkalab cluster up --broker-prop transaction.version=1`), and each transaction coordinator uses it for what no client asked
(timeouts). As in Kafka, a request's own version says what the client speaks:
EndTxn v5+ and a transactional Produce v12+ are version 2, older ones version 1,
so clients that know nothing of version 2 (librdkafka, kafka-python, aiokafka,
kafkajs) keep working on a version 2 cluster.

kafkalab finalizes the features once, at start (there is no `kafka-features`
tool), at epoch 0 (FinalizedFeaturesEpoch; -1 would mean "unknown" and a client
would ignore the levels).
"""

from __future__ import annotations

from dataclasses import dataclass

#: the broker setting (Kafka sets the feature with `--feature transaction.version=N`)
TRANSACTION_VERSION = "transaction.version"
DEFAULT_TRANSACTION_VERSION = 2
FINALIZED_FEATURES_EPOCH = 0


@dataclass(frozen=True)
class SupportedFeature:
    name: str
    min_version: int
    max_version: int


SUPPORTED_FEATURES: tuple[SupportedFeature, ...] = (
    SupportedFeature("group.version", 0, 1),
    SupportedFeature("metadata.version", 7, 25),
    SupportedFeature("transaction.version", 0, 2),
)


def transaction_version(extra: dict[str, str]) -> int:
    """The finalized `transaction.version` a broker's settings select (1 or 2)."""
    raw = str(extra.get(TRANSACTION_VERSION, DEFAULT_TRANSACTION_VERSION))
    if raw not in ("1", "2"):
        raise ValueError(
            f"{TRANSACTION_VERSION}={raw!r}: kafkalab speaks transaction versions 1 and 2"
        )
    return int(raw)


def finalized_features(extra: dict[str, str]) -> dict[str, int]:
    """Each finalized feature's level (Kafka answers a level as both min and max)."""
    return {
        "group.version": 1,
        "metadata.version": 25,
        "transaction.version": transaction_version(extra),
    }
