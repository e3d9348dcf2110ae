"""Produce (0): record batches to partition leaders."""

from __future__ import annotations

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import Api
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.schema import Message
from kafkalab.protocol.types import (
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
)

# -- Produce (0) ---------------------------------------------------------------------------

PRODUCE_REQUEST = Message(
    ApiKeys.PRODUCE,
    "ProduceRequest",
    [
        F("transactional_id", STRING, "3+", nullable="0+"),
        F("acks", INT16),
        F("timeout_ms", INT32),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("records", RECORDS, nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=9,
)

PRODUCE_RESPONSE = Message(
    ApiKeys.PRODUCE,
    "ProduceResponse",
    [
        F(
            "responses",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("base_offset", INT64),
                        F("log_append_time_ms", INT64, "2+", default=-1),
                        F("log_start_offset", INT64, "5+", default=-1),
                        F(
                            "record_errors",
                            [
                                F("batch_index", INT32),
                                F("batch_index_error_message", STRING, nullable="8+"),
                            ],
                            "8+",
                        ),
                        F("error_message", STRING, "8+", nullable="8+"),
                    ],
                ),
            ],
        ),
        F("throttle_time_ms", INT32, "1+"),
    ],
    flexible_from=9,
)

# v0-v2 carry magic 0/1 message sets, which Kafka 4.0 no longer takes (KIP-896) and
# kafkalab never did: not advertised, so a client negotiates v3+ or fails at once.
# v8 adds record_errors (the index of each refused record) and error_message.
# v9 is flexible; v10 only adds tagged fields kafkalab does not send (KIP-951's
# CurrentLeader and NodeEndpoints: a client falls back to Metadata); v11 only
# allows TRANSACTION_ABORTABLE; v12 (KIP-890 part 2) is the same body, and a
# transactional batch of it adds its partition to the transaction (the leader asks
# the coordinator) instead of needing the client's AddPartitionsToTxn. v13 names
# topics by id and is not declared.
PRODUCE_API = Api(
    ApiKeys.PRODUCE,
    "Produce",
    3,
    12,
    PRODUCE_REQUEST,
    PRODUCE_RESPONSE,
)
