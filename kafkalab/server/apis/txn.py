"""Producer ids and (with the transaction coordinator) transactions.

InitProducerId (22) without a transactional id: a new idempotent producer gets
a producer id that no other producer had (ProducerIdManager) and epoch 0.
With a transactional id it needs the transaction coordinator, which is not on
the broker yet: COORDINATOR_NOT_AVAILABLE. AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, WriteTxnMarkers and TxnOffsetCommit join this module with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalab.errors import Errors
from kafkalab.protocol.header import RequestHeader

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis


def handle_init_producer_id(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    if body["transactional_id"] is not None:
        return {
            "throttle_time_ms": 0,
            "error_code": int(Errors.COORDINATOR_NOT_AVAILABLE),
            "producer_id": -1,
            "producer_epoch": -1,
        }
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "producer_id": apis.producer_ids.generate(),
        "producer_epoch": 0,
    }
