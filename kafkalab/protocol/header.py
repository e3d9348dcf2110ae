"""Framing and the request/response headers.

Kafka's classes: RequestHeader, ResponseHeader, RequestContext. On the wire
every message is a frame: an int32 size, then that many bytes. A request
frame holds a request header and the body; a response frame a response
header and the body.

    request header v1:  api_key int16, api_version int16, correlation_id int32,
                        client_id nullable string (never compact)
    request header v2:  v1 + tagged fields            (flexible request versions)
    response header v0: correlation_id int32
    response header v1: v0 + tagged fields           (flexible response versions)

Exception kept from Kafka: the ApiVersions response header is always v0, even
for the flexible ApiVersions v3, so a client that does not yet know what the
broker speaks can always read it.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import APIS, Api
from kafkalab.protocol.types import (
    STRING,
    ProtocolError,
    Reader,
    Writer,
    read_tagged_fields,
    write_tagged_fields,
)

_SIZE = struct.Struct(">i")
_HEADER_START = struct.Struct(">hhi")


@dataclass(frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    # Not on the wire: where the request came from, "/<ip>" as Kafka writes it
    # (Kafka: RequestContext.clientAddress); the socket server fills it in.
    client_host: str = ""
    # Not on the wire either: the name of the listener it arrived on (Kafka:
    # RequestContext.listenerName), which says whether it may come from a broker.
    listener: str = ""


def request_header_version(api: Api | None, version: int) -> int:
    if api is not None and api.request.is_flexible(version):
        return 2
    return 1


def response_header_version(api: Api, version: int) -> int:
    if api.key == ApiKeys.API_VERSIONS:
        return 0
    return 1 if api.response.is_flexible(version) else 0


def decode_request_header(r: Reader, apis: Mapping[int, Api] = APIS) -> RequestHeader:
    """Read a request header; the body follows at r.pos. Raises ProtocolError."""
    if r.remaining() < _HEADER_START.size:
        raise ProtocolError(f"request of {r.remaining()} bytes is too short for a header")
    api_key, api_version, correlation_id = _HEADER_START.unpack_from(r.buf, r.pos)
    r.pos += _HEADER_START.size
    client_id = STRING.read(r, False, True)
    api = apis.get(api_key)
    if api is not None and api.supports(api_version):
        if request_header_version(api, api_version) >= 2:
            read_tagged_fields(r)
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def encode_request(header: RequestHeader, body: dict, apis: Mapping[int, Api] = APIS) -> bytes:
    """A whole request frame (size prefix included): what a client sends."""
    parts = encode_request_parts(header, body, apis)
    return b"".join(p if isinstance(p, (bytes, bytearray)) else p.read() for p in parts)


def encode_request_parts(
    header: RequestHeader, body: dict, apis: Mapping[int, Api] = APIS
) -> list[Any]:
    """A whole request frame as parts, the first starting with the size prefix:
    bytes, and each records value given as a RecordsView as it is (not copied)."""
    api = apis[header.api_key]
    w = Writer()
    w.buf += b"\0\0\0\0"  # size, patched by _framed
    w.buf += _HEADER_START.pack(header.api_key, header.api_version, header.correlation_id)
    STRING.write(w, header.client_id, False, True)
    if request_header_version(api, header.api_version) >= 2:
        write_tagged_fields(w)
    api.request.encode(body, header.api_version, w)
    return _framed(w)


def encode_response(api: Api, version: int, correlation_id: int, body: dict) -> list[Any]:
    """A whole response frame as parts: bytes, and FileRecords slices to send
    from their files. The first part starts with the size prefix."""
    w = Writer()
    w.buf += b"\0\0\0\0"  # size, patched by _framed
    w.buf += _SIZE.pack(correlation_id)
    if response_header_version(api, version) >= 1:
        write_tagged_fields(w)
    api.response.encode(body, version, w)
    return _framed(w)


def _framed(w: Writer) -> list[Any]:
    """The writer's parts, their first four bytes (left for it) the frame's size."""
    parts = w.finish()
    size = sum(len(p) if isinstance(p, (bytes, bytearray)) else p.size_in_bytes() for p in parts)
    first = bytearray(parts[0])
    _SIZE.pack_into(first, 0, size - 4)
    parts[0] = bytes(first)
    return parts


def decode_response(
    api: Api, version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, dict]:
    """(correlation id, body) of a response frame without its size prefix."""
    r = Reader(frame)
    correlation_id = r._unpack(_SIZE)
    if response_header_version(api, version) >= 1:
        read_tagged_fields(r)
    body = api.response.decode(r, version)
    if r.remaining():
        raise ProtocolError(f"{r.remaining()} bytes left after a {api.name} v{version} response")
    return correlation_id, body
