"""DescribeQuorum (55) on a broker: forwarded to the controllers (Kafka:
KafkaApis.handleDescribeQuorumRequest, which forwards it to the active controller).

Admin clients (Kafka's `describeMetadataQuorum`, `kafka-metadata-quorum.sh
--bootstrap-server`) ask a broker. A broker of a controller quorum sends the request
on through its ControllerChannel, which goes on to the next controller while one
answers NOT_LEADER_OR_FOLLOWER, and returns the leader's answer as it is. A broker
whose controller is the single process (no quorum) answers UNKNOWN_SERVER_ERROR with
a message that says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import RequestHeader
from kafkalab.server.controller_channel import ControllerChannel

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis


def _error(body: dict, code: Errors, message: str) -> dict:
    return {
        "error_code": int(code),
        "error_message": message,
        "topics": [
            {
                "topic_name": t["topic_name"],
                "partitions": [
                    {
                        "partition_index": p["partition_index"],
                        "error_code": int(code),
                        "error_message": message,
                        "leader_id": -1,
                        "leader_epoch": -1,
                        "high_watermark": -1,
                        "current_voters": [],
                        "observers": [],
                    }
                    for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ],
        "nodes": [],
    }


def handle_describe_quorum(apis: KafkaApis, header: RequestHeader, body: dict):
    channel = getattr(apis.metadata_cache, "controller", None)
    if not isinstance(channel, ControllerChannel) or len(channel.endpoints) < 2:
        return _error(
            body,
            Errors.UNKNOWN_SERVER_ERROR,
            "this cluster's controller is one process, not a KRaft quorum "
            "(kafkalab cluster up --controllers 3)",
        )

    async def forward() -> dict:
        try:
            return await channel.request(ApiKeys.DESCRIBE_QUORUM, header.api_version, body)
        except KafkaError as e:
            return _error(body, e.code, e.message)

    return forward()
