"""The wire protocol codec: known encodings, round trips of every API and version,
flexible forms, headers, and refusal of malformed input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalab.protocol import APIS, ProtocolError, Reader, RequestHeader, Writer
from kafkalab.protocol.header import (
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from kafkalab.protocol.schema import Field, Message, Struct
from kafkalab.protocol.types import INT32, RECORDS, STRING, ArrayOf


def test_metadata_v1_request_matches_the_documented_bytes():
    frame = encode_request(RequestHeader(3, 1, 7, "me"), {"topics": [{"name": "t"}]})
    body = (
        struct.pack(">hhih", 3, 1, 7, 2)
        + b"me"  # header v1
        + struct.pack(">ih", 1, 1)
        + b"t"  # topics: [ "t" ]
    )
    assert frame == struct.pack(">i", len(body)) + body


def test_fields_exist_only_in_their_versions():
    produce = APIS[0].request
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 1000,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "records": b"xyz"}]}],
    }
    v2 = produce.encode(body, 2).getvalue()
    v3 = produce.encode(body, 3).getvalue()
    assert len(v3) == len(v2) + 2  # v3 adds transactional_id (null: int16 -1)
    assert v3[:2] == b"\xff\xff"
    decoded = produce.decode(v3, 3)
    assert bytes(decoded["topics"][0]["partitions"][0]["records"]) == b"xyz"


def test_flexible_versions_use_compact_forms_and_tagged_fields():
    msg = Message(
        99,
        "Demo",
        [
            Field("name", STRING),
            Field("items", [Field("id", INT32)]),
            Field("ids", ArrayOf(INT32)),
            Field("data", RECORDS, nullable="0+"),
        ],
        flexible_from=1,
    )
    obj = {"name": "ab", "items": [{"id": 5}], "ids": [1, 2], "data": None}
    classic = msg.encode(obj, 0).getvalue()
    compact = msg.encode(obj, 1).getvalue()
    assert classic == (
        struct.pack(">h", 2)
        + b"ab"
        + struct.pack(">ii", 1, 5)
        + struct.pack(">iii", 2, 1, 2)
        + struct.pack(">i", -1)
    )
    # compact: length+1 varints, a tagged-field count (0) after every struct
    assert (
        compact
        == b"\x03ab"
        + b"\x02"
        + struct.pack(">i", 5)
        + b"\x00"
        + b"\x03"
        + struct.pack(">ii", 1, 2)
        + b"\x00"
        + b"\x00"
    )
    assert msg.decode(compact, 1) == obj
    # Unknown tagged fields are skipped, and kept raw.
    with_tag = compact[:-1] + b"\x01\x07\x02hi"
    assert msg.decode(with_tag, 1)["_tagged"] == {7: b"hi"}


def sample(fields, version, draw):
    out = {}
    for f in fields:
        if version not in f._versions:
            continue
        if isinstance(f.type, list):
            out[f.name] = [sample(f.type, version, draw) for _ in range(draw(st.integers(0, 2)))]
            continue
        if isinstance(f.type, Struct):
            absent = version in f._nullable and draw(st.booleans())
            out[f.name] = None if absent else sample(f.type.fields, version, draw)
            continue
        name = f.type.name
        strategy = {
            "int8": st.integers(-128, 127),
            "int16": st.integers(-(2**15), 2**15 - 1),
            "uint16": st.integers(0, 2**16 - 1),
            "int32": st.integers(-(2**31), 2**31 - 1),
            "int64": st.integers(-(2**63), 2**63 - 1),
            "bool": st.booleans(),
            "string": st.text(max_size=10),
            "records": st.binary(max_size=20),
            "bytes": st.binary(max_size=20),
            "[]int32": st.lists(st.integers(-(2**31), 2**31 - 1), max_size=3),
            "[]int64": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3),
            "[]string": st.lists(st.text(max_size=5), max_size=3),
            "uuid": st.uuids(),
        }[name]
        if version in f._nullable:
            strategy = st.none() | strategy
        out[f.name] = draw(strategy)
    return out


def normalise(value):
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    return value


def restrict(fields, version, decoded):
    """Only the fields that exist in `version` (the decoder fills in defaults)."""
    out = {}
    for f in fields:
        if version in f._versions:
            value = decoded[f.name]
            if isinstance(f.type, list) and value is not None:
                value = [restrict(f.type, version, v) for v in value]
            if isinstance(f.type, Struct) and value is not None:
                value = restrict(f.type.fields, version, value)
            out[f.name] = value
    return out


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_api_and_version_round_trips(data):
    api = data.draw(st.sampled_from(sorted(APIS.values(), key=lambda a: a.key)))
    version = data.draw(st.integers(api.min_version, api.max_version))
    for message in (api.request, api.response):
        obj = sample(message.fields, version, data.draw)
        encoded = message.encode(obj, version).getvalue()
        decoded = message.decode(encoded, version)
        assert normalise(restrict(message.fields, version, decoded)) == obj


def test_api_versions_response_header_is_always_v0():
    api = APIS[18]
    parts = encode_response(api, 3, 42, {"error_code": 0, "api_keys": [], "throttle_time_ms": 0})
    frame = b"".join(parts)
    # size, correlation id, then straight into the body: no tagged-field byte
    assert frame[4:8] == struct.pack(">i", 42)
    assert frame[8:10] == b"\x00\x00"  # error_code
    assert decode_response(api, 3, frame[4:]) == (
        42,
        {"error_code": 0, "api_keys": [], "throttle_time_ms": 0},
    )


def test_flexible_request_header_v2_is_read():
    frame = encode_request(
        RequestHeader(18, 3, 9, "client"),
        {"client_software_name": "x", "client_software_version": "1"},
    )
    r = Reader(frame[4:])
    header = decode_request_header(r)
    assert header == RequestHeader(18, 3, 9, "client")
    assert APIS[18].request.decode(r, 3)["client_software_name"] == "x"


@pytest.mark.parametrize("cut", [1, 5, 11, 17])
def test_truncated_bodies_raise_protocol_errors(cut):
    body = (
        APIS[0]
        .request.encode(
            {
                "transactional_id": None,
                "acks": 1,
                "timeout_ms": 1,
                "topics": [
                    {"name": "topic", "partitions": [{"partition_index": 0, "records": b"abc"}]}
                ],
            },
            7,
        )
        .getvalue()
    )
    with pytest.raises(ProtocolError):
        APIS[0].request.decode(body[:cut], 7)


def test_hostile_lengths_are_refused_without_allocating():
    # An array claiming 2**31-1 elements in a 4-byte body.
    with pytest.raises(ProtocolError, match="claims"):
        APIS[3].request.decode(struct.pack(">i", 2**31 - 1), 1)
    with pytest.raises(ProtocolError):
        APIS[3].request.decode(struct.pack(">ih", 1, 30000) + b"ab", 1)
    with pytest.raises(ProtocolError, match="UTF-8"):
        APIS[3].request.decode(struct.pack(">ih", 1, 2) + b"\xff\xfe", 1)


def test_writer_keeps_file_ranges_apart():
    class FakeRange:
        def size_in_bytes(self):
            return 3

        def read(self):
            return b"abc"

    w = Writer()
    w.buf += b"head"
    RECORDS.write(w, FakeRange(), False, True)
    w.buf += b"tail"
    parts = w.finish()
    assert parts[0] == b"head" + struct.pack(">i", 3)
    assert isinstance(parts[1], FakeRange) and parts[2] == b"tail"


@pytest.mark.parametrize("version", [3, 8, 9])
def test_request_parts_carry_records_by_reference_and_join_to_the_frame(version):
    from kafkalab.protocol.header import encode_request_parts
    from kafkalab.protocol.types import RecordsView

    batches = [bytearray(b"first-batch" * 50), bytearray(b"second" * 7)]
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30_000,
        "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "records": batches[0]}]},
            {"name": "u", "partitions": [{"partition_index": 3, "records": batches[1]}]},
        ],
    }
    header = RequestHeader(0, version, 11, "me")
    by_ref = {
        **body,
        "topics": [
            {
                **t,
                "partitions": [
                    {**p, "records": RecordsView(p["records"])} for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ],
    }
    parts = encode_request_parts(header, by_ref)
    views = [p for p in parts if isinstance(p, RecordsView)]
    assert [v.data.obj for v in views] == batches  # the caller's buffers, not copies
    assert all(v.data.obj is b for v, b in zip(views, batches, strict=True))
    joined = b"".join(p if isinstance(p, bytes) else p.read() for p in parts)
    assert joined == encode_request(header, body)
