"""ListOffsets (2): a partition's offset by timestamp (earliest, latest, a time)."""

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
    STRING,
    ArrayOf,
)

# -- ListOffsets (2) -----------------------------------------------------------------------

LIST_OFFSETS_REQUEST = Message(
    ApiKeys.LIST_OFFSETS,
    "ListOffsetsRequest",
    [
        F("replica_id", INT32),
        F("isolation_level", INT8, "2+"),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("current_leader_epoch", INT32, "4+", default=-1),
                        F("timestamp", INT64),
                        F("max_num_offsets", INT32, "0", default=1),
                    ],
                ),
            ],
        ),
        F("timeout_ms", INT32, "10+", default=0),  # KIP-1075: for remote storage reads
    ],
    flexible_from=6,
)

LIST_OFFSETS_RESPONSE = Message(
    ApiKeys.LIST_OFFSETS,
    "ListOffsetsResponse",
    [
        F("throttle_time_ms", INT32, "2+"),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("old_style_offsets", ArrayOf(INT64), "0"),
                        F("timestamp", INT64, "1+", default=-1),
                        F("offset", INT64, "1+", default=-1),
                        F("leader_epoch", INT32, "4+", default=-1),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=6,
)

# v6 flexible; v7 MAX_TIMESTAMP (-3, KIP-734); v8 EARLIEST_LOCAL_TIMESTAMP (-4, KIP-405);
# v9 LATEST_TIERED_TIMESTAMP (-5, KIP-1005); v10 timeout_ms (KIP-1075). Kafka 4.0 serves 1-10
# (KIP-896 removed v0); kafkalab still serves v0. As Kafka's broker, the special
# timestamps are answered whatever the version: the client picks a version that has them.
LIST_OFFSETS_API = Api(
    ApiKeys.LIST_OFFSETS,
    "ListOffsets",
    0,
    10,
    LIST_OFFSETS_REQUEST,
    LIST_OFFSETS_RESPONSE,
)
