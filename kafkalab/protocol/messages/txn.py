"""Transactions: InitProducerId (22), AddPartitionsToTxn (24), AddOffsetsToTxn (25),
EndTxn (26), WriteTxnMarkers (27), DescribeTransactions (65), ListTransactions (66),
and DescribeProducers (61), the producer state of partitions.
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
    ArrayOf,
)

# -- InitProducerId (22) -------------------------------------------------------------------

INIT_PRODUCER_ID_REQUEST = Message(
    ApiKeys.INIT_PRODUCER_ID,
    "InitProducerIdRequest",
    [
        F("transactional_id", STRING, nullable="0+"),
        F("transaction_timeout_ms", INT32),
        F("producer_id", INT64, "3+", default=-1),
        F("producer_epoch", INT16, "3+", default=-1),
    ],
    flexible_from=2,
)

INIT_PRODUCER_ID_RESPONSE = Message(
    ApiKeys.INIT_PRODUCER_ID,
    "InitProducerIdResponse",
    [
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("producer_id", INT64, default=-1),
        F("producer_epoch", INT16, default=-1),
    ],
    flexible_from=2,
)


# -- Transactions: partition side ---------------------------------------------------------

# DescribeProducers (61): the producer state of partitions (kafka-transactions.sh
# describe-producers; Kafka's DescribeProducersRequest/Response.json, v0, flexible).
DESCRIBE_PRODUCERS_REQUEST = Message(
    ApiKeys.DESCRIBE_PRODUCERS,
    "DescribeProducersRequest",
    [
        F(
            "topics",
            [
                F("name", STRING),
                F("partition_indexes", ArrayOf(INT32)),
            ],
        ),
    ],
    flexible_from=0,
)

DESCRIBE_PRODUCERS_RESPONSE = Message(
    ApiKeys.DESCRIBE_PRODUCERS,
    "DescribeProducersResponse",
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
                        F("error_message", STRING, nullable="0+", default=NULL),
                        F(
                            "active_producers",
                            [
                                F("producer_id", INT64),
                                F("producer_epoch", INT32),
                                F("last_sequence", INT32, default=-1),
                                F("last_timestamp", INT64, default=-1),
                                F("coordinator_epoch", INT32),
                                F("current_txn_start_offset", INT64, default=-1),
                            ],
                        ),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=0,
)

DESCRIBE_PRODUCERS_API = Api(
    ApiKeys.DESCRIBE_PRODUCERS,
    "DescribeProducers",
    0,
    0,
    DESCRIBE_PRODUCERS_REQUEST,
    DESCRIBE_PRODUCERS_RESPONSE,
)


# -- Transactions: coordinator --------------------------------------------------------------
#    What clients ask the transaction coordinator (kafkalab.server.apis.txn), and what the
#    coordinator asks partition leaders (WriteTxnMarkers). Versions as in
#    clients/src/main/resources/common/message/*.json. AddPartitionsToTxn v4+ is the
#    brokers' batched form (KIP-890 part 1: a partition leader verifies with the coordinator;
#    v5 only adds the TRANSACTION_ABORTABLE error); clients use v3 and below. InitProducerId goes up to 4: v3 adds the
#    producer's current id and epoch (KIP-360), v4 the PRODUCER_FENCED error.

# -- AddPartitionsToTxn (24) ---------------------------------------------------------------

ADD_PARTITIONS_TO_TXN_REQUEST = Message(
    ApiKeys.ADD_PARTITIONS_TO_TXN,
    "AddPartitionsToTxnRequest",
    [
        # v4+: the brokers' batched form (KIP-890): a partition leader asks whether
        # partitions are in a producer's ongoing transaction (verify_only) before it
        # appends that producer's first transactional batch
        F(
            "transactions",
            [
                F("transactional_id", STRING, "4+"),
                F("producer_id", INT64, "4+"),
                F("producer_epoch", INT16, "4+"),
                F("verify_only", BOOL, "4+", default=False),
                F("topics", [F("name", STRING), F("partitions", ArrayOf(INT32))], "4+"),
            ],
            "4+",
        ),
        F("v3_and_below_transactional_id", STRING, "0-3"),
        F("v3_and_below_producer_id", INT64, "0-3"),
        F("v3_and_below_producer_epoch", INT16, "0-3"),
        F("v3_and_below_topics", [F("name", STRING), F("partitions", ArrayOf(INT32))], "0-3"),
    ],
    flexible_from=3,
)

_ADD_PARTITIONS_TO_TXN_TOPIC_RESULT = [
    F("name", STRING),
    F(
        "results_by_partition",
        [F("partition_index", INT32), F("partition_error_code", INT16)],
    ),
]

ADD_PARTITIONS_TO_TXN_RESPONSE = Message(
    ApiKeys.ADD_PARTITIONS_TO_TXN,
    "AddPartitionsToTxnResponse",
    [
        F("throttle_time_ms", INT32),
        F("error_code", INT16, "4+"),
        F(
            "results_by_transaction",
            [
                F("transactional_id", STRING, "4+"),
                F("topic_results", _ADD_PARTITIONS_TO_TXN_TOPIC_RESULT, "4+"),
            ],
            "4+",
        ),
        F("results_by_topic_v3_and_below", _ADD_PARTITIONS_TO_TXN_TOPIC_RESULT, "0-3"),
    ],
    flexible_from=3,
)

# -- AddOffsetsToTxn (25) ------------------------------------------------------------------

ADD_OFFSETS_TO_TXN_REQUEST = Message(
    ApiKeys.ADD_OFFSETS_TO_TXN,
    "AddOffsetsToTxnRequest",
    [
        F("transactional_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("group_id", STRING),
    ],
    flexible_from=3,
)

ADD_OFFSETS_TO_TXN_RESPONSE = Message(
    ApiKeys.ADD_OFFSETS_TO_TXN,
    "AddOffsetsToTxnResponse",
    [F("throttle_time_ms", INT32), F("error_code", INT16)],
    flexible_from=3,
)

# -- EndTxn (26) ---------------------------------------------------------------------------

END_TXN_REQUEST = Message(
    ApiKeys.END_TXN,
    "EndTxnRequest",
    [
        F("transactional_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("committed", BOOL),
    ],
    flexible_from=3,
)

END_TXN_RESPONSE = Message(
    ApiKeys.END_TXN,
    "EndTxnResponse",
    [
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        # v5 (KIP-890 part 2): the producer id and epoch of the next transaction
        F("producer_id", INT64, "5+", default=-1),
        F("producer_epoch", INT16, "5+", default=-1),
    ],
    flexible_from=3,
)

# -- WriteTxnMarkers (27) ------------------------------------------------------------------

WRITE_TXN_MARKERS_REQUEST = Message(
    ApiKeys.WRITE_TXN_MARKERS,
    "WriteTxnMarkersRequest",
    [
        F(
            "markers",
            [
                F("producer_id", INT64),
                F("producer_epoch", INT16),
                F("transaction_result", BOOL),
                F("topics", [F("name", STRING), F("partition_indexes", ArrayOf(INT32))]),
                F("coordinator_epoch", INT32),
            ],
        ),
    ],
    flexible_from=1,
)

WRITE_TXN_MARKERS_RESPONSE = Message(
    ApiKeys.WRITE_TXN_MARKERS,
    "WriteTxnMarkersResponse",
    [
        F(
            "markers",
            [
                F("producer_id", INT64),
                F(
                    "topics",
                    [
                        F("name", STRING),
                        F("partitions", [F("partition_index", INT32), F("error_code", INT16)]),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=1,
)

# -- DescribeTransactions (65) -------------------------------------------------------------

DESCRIBE_TRANSACTIONS_REQUEST = Message(
    ApiKeys.DESCRIBE_TRANSACTIONS,
    "DescribeTransactionsRequest",
    [F("transactional_ids", ArrayOf(STRING))],
    flexible_from=0,
)

DESCRIBE_TRANSACTIONS_RESPONSE = Message(
    ApiKeys.DESCRIBE_TRANSACTIONS,
    "DescribeTransactionsResponse",
    [
        F("throttle_time_ms", INT32),
        F(
            "transaction_states",
            [
                F("error_code", INT16),
                F("transactional_id", STRING),
                F("transaction_state", STRING),
                F("transaction_timeout_ms", INT32),
                F("transaction_start_time_ms", INT64),
                F("producer_id", INT64),
                F("producer_epoch", INT32),
                F("topic_partitions", [F("name", STRING), F("partition_indexes", ArrayOf(INT32))]),
            ],
        ),
    ],
    flexible_from=0,
)

# -- ListTransactions (66) -----------------------------------------------------------------

LIST_TRANSACTIONS_REQUEST = Message(
    ApiKeys.LIST_TRANSACTIONS,
    "ListTransactionsRequest",
    [F("state_filters", ArrayOf(STRING)), F("producer_id_filters", ArrayOf(INT64))],
    flexible_from=0,
)

LIST_TRANSACTIONS_RESPONSE = Message(
    ApiKeys.LIST_TRANSACTIONS,
    "ListTransactionsResponse",
    [
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("unknown_state_filters", ArrayOf(STRING)),
        F(
            "transaction_states",
            [
                F("transactional_id", STRING),
                F("producer_id", INT64),
                F("transaction_state", STRING),
            ],
        ),
    ],
    flexible_from=0,
)

INIT_PRODUCER_ID_API = Api(
    ApiKeys.INIT_PRODUCER_ID,
    "InitProducerId",
    0,
    4,
    INIT_PRODUCER_ID_REQUEST,
    INIT_PRODUCER_ID_RESPONSE,
)

TXN_COORDINATOR_APIS: dict[ApiKeys, Api] = {
    api.key: api
    for api in (
        INIT_PRODUCER_ID_API,
        Api(
            ApiKeys.ADD_PARTITIONS_TO_TXN,
            "AddPartitionsToTxn",
            0,
            5,
            ADD_PARTITIONS_TO_TXN_REQUEST,
            ADD_PARTITIONS_TO_TXN_RESPONSE,
        ),
        Api(
            ApiKeys.ADD_OFFSETS_TO_TXN,
            "AddOffsetsToTxn",
            0,
            3,
            ADD_OFFSETS_TO_TXN_REQUEST,
            ADD_OFFSETS_TO_TXN_RESPONSE,
        ),
        # v4 only allows TRANSACTION_ABORTABLE; v5 is transactions v2: every EndTxn
        # bumps the epoch and the response carries the next producer id and epoch
        Api(ApiKeys.END_TXN, "EndTxn", 0, 5, END_TXN_REQUEST, END_TXN_RESPONSE),
        Api(
            ApiKeys.WRITE_TXN_MARKERS,
            "WriteTxnMarkers",
            0,
            1,
            WRITE_TXN_MARKERS_REQUEST,
            WRITE_TXN_MARKERS_RESPONSE,
        ),
        Api(
            ApiKeys.DESCRIBE_TRANSACTIONS,
            "DescribeTransactions",
            0,
            0,
            DESCRIBE_TRANSACTIONS_REQUEST,
            DESCRIBE_TRANSACTIONS_RESPONSE,
        ),
        Api(
            ApiKeys.LIST_TRANSACTIONS,
            "ListTransactions",
            0,
            0,
            LIST_TRANSACTIONS_REQUEST,
            LIST_TRANSACTIONS_RESPONSE,
        ),
    )
}
