"""ApiVersions (18): what a client asks first, and the body the broker answers with."""

from __future__ import annotations

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import Api
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.schema import Message
from kafkalab.protocol.types import (
    INT16,
    INT32,
    STRING,
)

# -- ApiVersions (18) ----------------------------------------------------------------------

API_VERSIONS_REQUEST = Message(
    ApiKeys.API_VERSIONS,
    "ApiVersionsRequest",
    [
        F("client_software_name", STRING, "3+"),
        F("client_software_version", STRING, "3+"),
    ],
    flexible_from=3,
)

API_VERSIONS_RESPONSE = Message(
    ApiKeys.API_VERSIONS,
    "ApiVersionsResponse",
    [
        F("error_code", INT16),
        F(
            "api_keys",
            [
                F("api_key", INT16),
                F("min_version", INT16),
                F("max_version", INT16),
            ],
        ),
        F("throttle_time_ms", INT32, "1+"),
    ],
    flexible_from=3,
)

API_VERSIONS_API = Api(
    ApiKeys.API_VERSIONS,
    "ApiVersions",
    0,
    3,
    API_VERSIONS_REQUEST,
    API_VERSIONS_RESPONSE,
)


def api_versions_body(apis: dict[int, Api], error: int = 0) -> dict:
    """An ApiVersions response body listing `apis` (with `error`, e.g. UNSUPPORTED_VERSION)."""
    return {
        "error_code": int(error),
        "api_keys": [
            {"api_key": a.key, "min_version": a.min_version, "max_version": a.max_version}
            for a in sorted(apis.values(), key=lambda a: a.key)
        ],
        "throttle_time_ms": 0,
    }
