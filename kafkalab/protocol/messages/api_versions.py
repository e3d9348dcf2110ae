"""ApiVersions (18): what a client asks first, and the body the broker answers with.

v3+ end the response with tagged fields (KIP-584's features):

    tag 0  SupportedFeatures       [name string, min_version int16, max_version int16]
    tag 1  FinalizedFeaturesEpoch  int64 (-1: unknown, the levels are not to be used)
    tag 2  FinalizedFeatures       [name string, max_version_level int16,
                                    min_version_level int16]

v4 is v3's body (KAFKA-17011): from v4 on a supported feature whose min_version
is 0 is listed; v3 leaves those out, as Kafka does.
"""

from __future__ import annotations

import struct

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import Api
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.schema import Message, read_struct, write_struct
from kafkalab.protocol.types import (
    INT16,
    INT32,
    STRING,
    Reader,
    Writer,
    read_length,
    write_length,
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
    4,
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


# -- features (tagged fields of v3+) ---------------------------------------------------------

TAG_SUPPORTED_FEATURES, TAG_FINALIZED_FEATURES_EPOCH, TAG_FINALIZED_FEATURES = 0, 1, 2
SUPPORTED_FEATURE_KEY = [F("name", STRING), F("min_version", INT16), F("max_version", INT16)]
FINALIZED_FEATURE_KEY = [
    F("name", STRING),
    F("max_version_level", INT16),
    F("min_version_level", INT16),
]
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _struct_array(fields: list[F], items: list[dict]) -> bytes:
    w = Writer()
    write_length(w, len(items), True, _I32)
    for item in items:
        write_struct(w, fields, item, 3, True)
    return bytes(w.getvalue())


def _read_struct_array(fields: list[F], raw: bytes) -> list[dict]:
    r = Reader(raw)
    n = read_length(r, True, _I32) or 0
    return [read_struct(r, fields, 3, True) for _ in range(n)]


def features_tagged(
    version: int,
    supported: dict[str, tuple[int, int]],
    finalized: dict[str, int],
    epoch: int,
) -> dict[int, bytes]:
    """The tagged fields of an ApiVersions response of `version` (none below v3):
    `supported` name -> (min, max), `finalized` name -> level."""
    if version < 3:
        return {}
    listed = {n: r for n, r in supported.items() if version >= 4 or r[0] != 0}
    return {
        TAG_SUPPORTED_FEATURES: _struct_array(
            SUPPORTED_FEATURE_KEY,
            [{"name": n, "min_version": lo, "max_version": hi} for n, (lo, hi) in listed.items()],
        ),
        TAG_FINALIZED_FEATURES_EPOCH: _I64.pack(epoch),
        TAG_FINALIZED_FEATURES: _struct_array(
            FINALIZED_FEATURE_KEY,
            [
                {"name": n, "max_version_level": level, "min_version_level": level}
                for n, level in finalized.items()
            ],
        ),
    }


def read_features(body: dict) -> tuple[dict[str, tuple[int, int]], int, dict[str, int]]:
    """(supported name -> (min, max), finalized epoch, finalized name -> max level)
    from a decoded ApiVersions v3+ response body."""
    tagged = body.get("_tagged", {})
    supported = {
        f["name"]: (f["min_version"], f["max_version"])
        for f in _read_struct_array(
            SUPPORTED_FEATURE_KEY, tagged.get(TAG_SUPPORTED_FEATURES, b"\x01")
        )
    }
    raw_epoch = tagged.get(TAG_FINALIZED_FEATURES_EPOCH)
    epoch = -1 if raw_epoch is None else _I64.unpack(raw_epoch)[0]
    finalized = {
        f["name"]: f["max_version_level"]
        for f in _read_struct_array(
            FINALIZED_FEATURE_KEY, tagged.get(TAG_FINALIZED_FEATURES, b"\x01")
        )
    }
    return supported, epoch, finalized
