"""The committed offsets of groups: OffsetCommit (8), OffsetFetch (9), OffsetDelete (47),
and TxnOffsetCommit (28), the transactional commit (Kafka's OffsetMetadataManager serves them).
"""

from __future__ import annotations

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import Api
from kafkalab.protocol.schema import NULL, Message
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.types import (
    BOOL,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    ArrayOf,
)

# -- OffsetCommit (8) ----------------------------------------------------------------------

OFFSET_COMMIT_REQUEST = Message(
    ApiKeys.OFFSET_COMMIT,
    "OffsetCommitRequest",
    [
        F("group_id", STRING),
        F("generation_id_or_member_epoch", INT32, "1+", default=-1),
        F("member_id", STRING, "1+"),
        F("group_instance_id", STRING, "7+", nullable="7+", default=NULL),
        F("retention_time_ms", INT64, "2-4", default=-1),
        F(
            "topics",
            [
                # v9 is v8 for a KIP-848 member (its member epoch is checked); v10 names
                # topics by id only
                F("name", STRING, "0-9", default=""),
                F("topic_id", UUID, "10+"),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("committed_offset", INT64),
                        F("committed_leader_epoch", INT32, "6+", default=-1),
                        F("commit_timestamp", INT64, "1", default=-1),
                        F("committed_metadata", STRING, nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=8,
)

OFFSET_COMMIT_RESPONSE = Message(
    ApiKeys.OFFSET_COMMIT,
    "OffsetCommitResponse",
    [
        F("throttle_time_ms", INT32, "3+"),
        F(
            "topics",
            [
                F("name", STRING, "0-9", default=""),
                F("topic_id", UUID, "10+"),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=8,
)

# -- OffsetFetch (9) -----------------------------------------------------------------------

OFFSET_FETCH_REQUEST = Message(
    ApiKeys.OFFSET_FETCH,
    "OffsetFetchRequest",
    [
        F("group_id", STRING, "0-7"),
        F(
            "topics",
            [
                F("name", STRING, "0-7"),
                F("partition_indexes", ArrayOf(INT32), "0-7"),
            ],
            "0-7",
            nullable="2-7",
        ),
        # v8: several groups in one request; v9 (KIP-848): the member's id and epoch,
        # checked for a consumer group's member; v10: topics by id
        F(
            "groups",
            [
                F("group_id", STRING, "8+"),
                F("member_id", STRING, "9+", nullable="9+", default=NULL),
                F("member_epoch", INT32, "9+", default=-1),
                F(
                    "topics",
                    [
                        F("name", STRING, "8-9", default=""),
                        F("topic_id", UUID, "10+"),
                        F("partition_indexes", ArrayOf(INT32), "8+"),
                    ],
                    "8+",
                    nullable="8+",
                ),
            ],
            "8+",
        ),
        F("require_stable", BOOL, "7+"),
    ],
    flexible_from=6,
)

OFFSET_FETCH_RESPONSE = Message(
    ApiKeys.OFFSET_FETCH,
    "OffsetFetchResponse",
    [
        F("throttle_time_ms", INT32, "3+"),
        F(
            "topics",
            [
                F("name", STRING, "0-7"),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32, "0-7"),
                        F("committed_offset", INT64, "0-7"),
                        F("committed_leader_epoch", INT32, "5-7", default=-1),
                        F("metadata", STRING, "0-7", nullable="0-7"),
                        F("error_code", INT16, "0-7"),
                    ],
                    "0-7",
                ),
            ],
            "0-7",
        ),
        F("error_code", INT16, "2-7", default=0),
        F(
            "groups",
            [
                F("group_id", STRING, "8+"),
                F(
                    "topics",
                    [
                        F("name", STRING, "8-9", default=""),
                        F("topic_id", UUID, "10+"),
                        F(
                            "partitions",
                            [
                                F("partition_index", INT32, "8+"),
                                F("committed_offset", INT64, "8+"),
                                F("committed_leader_epoch", INT32, "8+", default=-1),
                                F("metadata", STRING, "8+", nullable="8+"),
                                F("error_code", INT16, "8+"),
                            ],
                            "8+",
                        ),
                    ],
                    "8+",
                ),
                F("error_code", INT16, "8+", default=0),
            ],
            "8+",
        ),
    ],
    flexible_from=6,
)

# -- OffsetDelete (47) ---------------------------------------------------------------------

OFFSET_DELETE_REQUEST = Message(
    ApiKeys.OFFSET_DELETE,
    "OffsetDeleteRequest",
    [
        F("group_id", STRING),
        F(
            "topics",
            [
                F("name", STRING),
                F("partitions", [F("partition_index", INT32)]),
            ],
        ),
    ],
    flexible_from=None,  # Kafka: "flexibleVersions": "none"
)

OFFSET_DELETE_RESPONSE = Message(
    ApiKeys.OFFSET_DELETE,
    "OffsetDeleteResponse",
    [
        F("error_code", INT16),
        F("throttle_time_ms", INT32),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=None,
)


# -- Transactions: group side (TxnOffsetCommit) --------------------------------------------

TXN_OFFSET_COMMIT_REQUEST = Message(
    ApiKeys.TXN_OFFSET_COMMIT,
    "TxnOffsetCommitRequest",
    [
        F("transactional_id", STRING),
        F("group_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("generation_id", INT32, "3+", default=-1),
        F("member_id", STRING, "3+", default=""),
        F("group_instance_id", STRING, "3+", nullable="3+", default=NULL),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("committed_offset", INT64),
                        F("committed_leader_epoch", INT32, "2+", default=-1),
                        F("committed_metadata", STRING, nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=3,
)

TXN_OFFSET_COMMIT_RESPONSE = Message(
    ApiKeys.TXN_OFFSET_COMMIT,
    "TxnOffsetCommitResponse",
    [
        F("throttle_time_ms", INT32),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=3,
)

# TxnOffsetCommit v4 only allows TRANSACTION_ABORTABLE; v5 is transactions v2: the
# group's __consumer_offsets partition joins the transaction through this request,
# with no AddOffsetsToTxn before it (the group coordinator's broker adds it).
TXN_GROUP_APIS: dict[ApiKeys, Api] = {
    api.key: api
    for api in (
        Api(
            ApiKeys.TXN_OFFSET_COMMIT,
            "TxnOffsetCommit",
            0,
            5,
            TXN_OFFSET_COMMIT_REQUEST,
            TXN_OFFSET_COMMIT_RESPONSE,
        ),
        # v6 (flexible) and v7 (require_stable: read_committed consumers) with the
        # transactional offsets that make a commit unstable; v8 (several groups), v9
        # (a KIP-848 member's id and epoch) and v10 (topic ids), as Kafka 4's Java
        # consumer sends them
        Api(
            ApiKeys.OFFSET_FETCH,
            "OffsetFetch",
            0,
            10,
            OFFSET_FETCH_REQUEST,
            OFFSET_FETCH_RESPONSE,
        ),
    )
}
