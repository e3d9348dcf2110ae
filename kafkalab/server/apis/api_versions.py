"""ApiVersions (18): the APIs and version ranges this broker speaks.

A too-new ApiVersions is answered before it reaches here (the socket server
replies with a v0 body and UNSUPPORTED_VERSION, as Kafka does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalab.protocol.header import RequestHeader
from kafkalab.protocol.messages import APIS, api_versions_body

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis


def handle_api_versions(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    return api_versions_body(APIS)
