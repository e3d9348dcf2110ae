"""Fetch (1) and OffsetForLeaderEpoch (23): how consumers and follower replicas read a
partition, and how they find where their log diverged from the leader's after a leader change.
"""

from __future__ import annotations

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import Api
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.schema import Message
from kafkalab.protocol.types import (
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    ArrayOf,
)

# -- Fetch (1) -----------------------------------------------------------------------------

FETCH_REQUEST = Message(
    ApiKeys.FETCH,
    "FetchRequest",
    [
        F("replica_id", INT32),
        F("max_wait_ms", INT32),
        F("min_bytes", INT32),
        F("max_bytes", INT32, "3+", default=0x7FFFFFFF),
        F("isolation_level", INT8, "4+"),
        F("session_id", INT32, "7+"),
        F("session_epoch", INT32, "7+", default=-1),
        F(
            "topics",
            [
                F("topic", STRING),
                F(
                    "partitions",
                    [
                        F("partition", INT32),
                        F("current_leader_epoch", INT32, "9+", default=-1),
                        F("fetch_offset", INT64),
                        F("log_start_offset", INT64, "5+", default=-1),
                        F("partition_max_bytes", INT32),
                    ],
                ),
            ],
        ),
        F(
            "forgotten_topics_data",
            [
                F("topic", STRING),
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
                F("topic", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("high_watermark", INT64),
                        F("last_stable_offset", INT64, "4+", default=-1),
                        F("log_start_offset", INT64, "5+", default=-1),
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
