"""ApiVersions (18): the APIs and version ranges this broker speaks.

A too-new ApiVersions is answered before it reaches here (the socket server
replies with a v0 body and UNSUPPORTED_VERSION, as Kafka does). v3+ also carry
the supported and finalized features (kafkalab.server.features), among them
`transaction.version`, which tells Kafka's Java client whether to speak
transactions v2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalab.protocol.header import RequestHeader
from kafkalab.protocol.messages import APIS, api_versions_body
from kafkalab.protocol.messages.api_versions import features_tagged
from kafkalab.server import features

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis


def handle_api_versions(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    body = api_versions_body(APIS)
    body["_tagged"] = features_tagged(
        header.api_version,
        {f.name: (f.min_version, f.max_version) for f in features.SUPPORTED_FEATURES},
        features.finalized_features(apis.config.extra),
        features.FINALIZED_FEATURES_EPOCH,
    )
    return body
