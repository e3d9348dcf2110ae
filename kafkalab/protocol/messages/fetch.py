"""Fetch (1) and OffsetForLeaderEpoch (23): how consumers and follower replicas read a
partition, and how they find where their log diverged from the leader's after a leader change.

Fetch is declared up to v17 (Kafka 4.0), with the fields KRaft's voters use in the
flexible versions (ClusterId, ReplicaState, LastFetchedEpoch; in the answer
DivergingEpoch, CurrentLeader, SnapshotId, all but LastFetchedEpoch tagged). The
broker advertises v0-11 (FETCH_API); the controllers' quorum speaks v16 between
themselves (kafkalab/raft/raft_wire.py).
"""

from __future__ import annotations

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import Api
from kafkalab.protocol.schema import NULL, Message, Struct
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.types import (
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    ArrayOf,
)

# -- Fetch (1) -----------------------------------------------------------------------------

FETCH_REQUEST = Message(
    ApiKeys.FETCH,
    "FetchRequest",
    [
        # KRaft (v12+, tagged): the cluster the fetcher belongs to
        F("cluster_id", STRING, "12+", nullable="12+", default=NULL, tag=0),
        F("replica_id", INT32, "0-14", default=-1),
        # v15+ (KIP-903): the fetching replica's id and broker epoch, tagged
        F(
            "replica_state",
            Struct([F("replica_id", INT32, default=-1), F("replica_epoch", INT64, default=-1)]),
            "15+",
            tag=1,
        ),
        F("max_wait_ms", INT32),
        F("min_bytes", INT32),
        F("max_bytes", INT32, "3+", default=0x7FFFFFFF),
        F("isolation_level", INT8, "4+"),
        F("session_id", INT32, "7+"),
        F("session_epoch", INT32, "7+", default=-1),
        F(
            "topics",
            [
                F("topic", STRING, "0-12"),
                F("topic_id", UUID, "13+"),
                F(
                    "partitions",
                    [
                        F("partition", INT32),
                        F("current_leader_epoch", INT32, "9+", default=-1),
                        F("fetch_offset", INT64),
                        # KRaft and KIP-320 followers: the epoch of the last fetched record
                        F("last_fetched_epoch", INT32, "12+", default=-1),
                        F("log_start_offset", INT64, "5+", default=-1),
                        F("partition_max_bytes", INT32),
                        F("replica_directory_id", UUID, "17+", tag=0),
                    ],
                ),
            ],
        ),
        F(
            "forgotten_topics_data",
            [
                F("topic", STRING, "7-12"),
                F("topic_id", UUID, "13+"),
                F("partitions", ArrayOf(INT32)),
            ],
            "7+",
        ),
        F("rack_id", STRING, "11+"),
    ],
    flexible_from=12,
)

FETCH_RESPONSE = Message(
    ApiKeys.FETCH,
    "FetchResponse",
    [
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "7+"),
        F("session_id", INT32, "7+"),
        F(
            "responses",
            [
                F("topic", STRING, "0-12"),
                F("topic_id", UUID, "13+"),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("high_watermark", INT64),
                        F("last_stable_offset", INT64, "4+", default=-1),
                        F("log_start_offset", INT64, "5+", default=-1),
                        # KRaft and KIP-320 (v12+, tagged): where the fetcher's log diverged,
                        # the leader the answering replica knows, a snapshot to fetch instead
                        F(
                            "diverging_epoch",
                            Struct(
                                [F("epoch", INT32, default=-1), F("end_offset", INT64, default=-1)]
                            ),
                            "12+",
                            tag=0,
                        ),
                        F(
                            "current_leader",
                            Struct(
                                [
                                    F("leader_id", INT32, default=-1),
                                    F("leader_epoch", INT32, default=-1),
                                ]
                            ),
                            "12+",
                            tag=1,
                        ),
                        F(
                            "snapshot_id",
                            Struct(
                                [F("end_offset", INT64, default=-1), F("epoch", INT32, default=-1)]
                            ),
                            "12+",
                            tag=2,
                        ),
                        F(
                            "aborted_transactions",
                            [
                                F("producer_id", INT64),
                                F("first_offset", INT64),
                            ],
                            "4+",
                            nullable="4+",
                        ),
                        F("preferred_read_replica", INT32, "11+", default=-1),
                        F("records", RECORDS, nullable="0+"),
                    ],
                ),
            ],
        ),
        F(
            "node_endpoints",
            [
                F("node_id", INT32),
                F("host", STRING),
                F("port", INT32),
                F("rack", STRING, nullable="16+", default=NULL),
            ],
            "16+",
            tag=0,
        ),
    ],
    flexible_from=12,
)

FETCH_API = Api(
    ApiKeys.FETCH,
    "Fetch",
    0,
    11,
    FETCH_REQUEST,
    FETCH_RESPONSE,
)

# -- OffsetForLeaderEpoch (23) -------------------------------------------------------------

OFFSET_FOR_LEADER_EPOCH_REQUEST = Message(
    ApiKeys.OFFSET_FOR_LEADER_EPOCH,
    "OffsetForLeaderEpochRequest",
    [
        F("replica_id", INT32, "3+", default=-2),
        F(
            "topics",
            [
                F("topic", STRING),
                F(
                    "partitions",
                    [
                        F("partition", INT32),
                        F("current_leader_epoch", INT32, "2+", default=-1),
                        F("leader_epoch", INT32),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=4,
)

OFFSET_FOR_LEADER_EPOCH_RESPONSE = Message(
    ApiKeys.OFFSET_FOR_LEADER_EPOCH,
    "OffsetForLeaderEpochResponse",
    [
        F("throttle_time_ms", INT32, "2+"),
        F(
            "topics",
            [
                F("topic", STRING),
                F(
                    "partitions",
                    [
                        F("error_code", INT16),
                        F("partition", INT32),
                        F("leader_epoch", INT32, "1+", default=-1),
                        F("end_offset", INT64),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=4,
)

OFFSET_FOR_LEADER_EPOCH_API = Api(
    ApiKeys.OFFSET_FOR_LEADER_EPOCH,
    "OffsetForLeaderEpoch",
    0,
    3,
    OFFSET_FOR_LEADER_EPOCH_REQUEST,
    OFFSET_FOR_LEADER_EPOCH_RESPONSE,
)
