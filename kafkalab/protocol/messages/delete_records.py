"""DeleteRecords (21): move partitions' log start offsets forward (Kafka's
`kafka-delete-records`, Admin.deleteRecords)."""

from __future__ import annotations

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import Api
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.schema import Message
from kafkalab.protocol.types import INT16, INT32, INT64, STRING

DELETE_RECORDS_REQUEST = Message(
    ApiKeys.DELETE_RECORDS,
    "DeleteRecordsRequest",
    [
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("offset", INT64),
                    ],
                ),
            ],
        ),
        F("timeout_ms", INT32),
    ],
    flexible_from=2,
)

DELETE_RECORDS_RESPONSE = Message(
    ApiKeys.DELETE_RECORDS,
    "DeleteRecordsResponse",
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
                        F("low_watermark", INT64),
                        F("error_code", INT16),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=2,
)

# Kafka 4.0 serves v0-v2 (v2 the first flexible one).
DELETE_RECORDS_API = Api(
    ApiKeys.DELETE_RECORDS,
    "DeleteRecords",
    0,
    2,
    DELETE_RECORDS_REQUEST,
    DELETE_RECORDS_RESPONSE,
)
