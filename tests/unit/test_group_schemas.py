"""The classic consumer-group APIs' schemas (GROUP_APIS): every version we declare
round-trips, and speaks the same bytes as kafka-python, a real client.

Bodies are drawn by hypothesis from our own declarations; kafka-python (whose
message classes are built from its own copy of Kafka's JSON schemas) is the
independent peer: it must encode a request to exactly our bytes, and decode our
response bytes to the same values and re-encode them to the same bytes.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import (
    GROUP_APIS,
    JOIN_GROUP_REQUEST,
    JOIN_GROUP_RESPONSE,
    OFFSET_FETCH_REQUEST,
)
from kafkalab.protocol.schema import Field, Message, Versions
from kafkalab.protocol.types import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    ArrayOf,
    Type,
)

KAFKA_PYTHON: dict[ApiKeys, tuple[type, type]] = {
    ApiKeys.FIND_COORDINATOR: (FindCoordinatorRequest, FindCoordinatorResponse),
    ApiKeys.JOIN_GROUP: (JoinGroupRequest, JoinGroupResponse),
    ApiKeys.HEARTBEAT: (HeartbeatRequest, HeartbeatResponse),
    ApiKeys.LEAVE_GROUP: (LeaveGroupRequest, LeaveGroupResponse),
    ApiKeys.SYNC_GROUP: (SyncGroupRequest, SyncGroupResponse),
    ApiKeys.OFFSET_COMMIT: (OffsetCommitRequest, OffsetCommitResponse),
    ApiKeys.OFFSET_FETCH: (OffsetFetchRequest, OffsetFetchResponse),
    ApiKeys.DESCRIBE_GROUPS: (DescribeGroupsRequest, DescribeGroupsResponse),
    ApiKeys.LIST_GROUPS: (ListGroupsRequest, ListGroupsResponse),
    ApiKeys.DELETE_GROUPS: (DeleteGroupsRequest, DeleteGroupsResponse),
    ApiKeys.OFFSET_DELETE: (OffsetDeleteRequest, OffsetDeleteResponse),
}

# The ranges the broker advertises for the group APIs (docs/protocol-versions.md
# says why these: every client finds a non-flexible version it can use).
EXPECTED_RANGES = {
    ApiKeys.FIND_COORDINATOR: (0, 3),
    ApiKeys.JOIN_GROUP: (0, 5),
    ApiKeys.HEARTBEAT: (0, 3),
    ApiKeys.LEAVE_GROUP: (0, 3),
    ApiKeys.SYNC_GROUP: (0, 3),
    ApiKeys.OFFSET_COMMIT: (0, 10),
    ApiKeys.OFFSET_FETCH: (0, 5),
    ApiKeys.DESCRIBE_GROUPS: (0, 4),
    ApiKeys.LIST_GROUPS: (0, 5),
    ApiKeys.DELETE_GROUPS: (0, 1),
    ApiKeys.OFFSET_DELETE: (0, 0),
}

CASES = [
    pytest.param(api.key, version, id=f"{api.name}-v{version}")
    for api in GROUP_APIS.values()
    for version in range(api.min_version, api.max_version + 1)
]

_PRIMITIVES: dict[int, st.SearchStrategy] = {
    id(INT8): st.integers(-(2**7), 2**7 - 1),
    id(INT16): st.integers(-(2**15), 2**15 - 1),
    id(INT32): st.integers(-(2**31), 2**31 - 1),
    id(INT64): st.integers(-(2**63), 2**63 - 1),
    id(BOOL): st.booleans(),
    id(STRING): st.text(st.characters(exclude_categories=("Cs",)), max_size=8),
    id(BYTES): st.binary(max_size=8),
    id(UUID): st.uuids(),
}


def _value(t: Type | list[Field], version: int) -> st.SearchStrategy:
    if isinstance(t, list):
        return st.lists(_body(t, version), max_size=3)
    if isinstance(t, ArrayOf):
        return st.lists(_value(t.item, version), max_size=3)
    return _PRIMITIVES[id(t)]


def _body(fields: list[Field], version: int) -> st.SearchStrategy[dict]:
    """Any body of this version: every field of the version, null where nullable."""
    parts = {}
    for f in fields:
        if version not in Versions.parse(f.versions):
            continue
        s = _value(f.type, version)
        if version in Versions.parse(f.nullable):
            s = st.none() | s
        parts[f.name] = s
    return st.fixed_dictionaries(parts)


def _plain(value: Any) -> Any:
    """Decoded values with views turned into bytes, for comparison."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    return value


def _their_values(value: Any) -> Any:
    """kafka-python's decoded values in our form: it shows DescribeGroups'
    authorized_operations (an int32 bit field) as the set of bits that are set,
    and Kafka's "not asked for" (-2**31) as None."""
    if isinstance(value, dict):
        out = {k: _their_values(v) for k, v in value.items()}
        if "authorized_operations" in out:
            bits = out["authorized_operations"]
            ops = -(2**31) if bits is None else sum(1 << b for b in bits)
            out["authorized_operations"] = ops - 2**32 if ops >= 2**31 else ops
        return out
    if isinstance(value, list):
        return [_their_values(v) for v in value]
    return _plain(value)


def _decoded_form(fields: list[Field], obj: dict, version: int) -> dict:
    """What decoding `obj` encoded at `version` must give: fields of other versions
    hold their defaults (Kafka's), the rest their values."""
    out = {}
    for f in fields:
        if version not in Versions.parse(f.versions):
            out[f.name] = f.default_value()
            continue
        value = obj[f.name]
        if isinstance(f.type, list) and value is not None:
            value = [_decoded_form(f.type, item, version) for item in value]
        out[f.name] = value
    return out


def _to_kafka_python(cls: type, obj: dict, version: int | None = None) -> Any:
    """Our body dict as a kafka-python message (or nested struct) object."""
    kwargs = {}
    for name, value in obj.items():
        kp_field = cls._struct.fields[name]
        if kp_field.is_struct_array() and value is not None:
            value = [_to_kafka_python(kp_field.data_class, item) for item in value]
        kwargs[name] = value
    if version is None:
        return cls(**kwargs)
    return cls(version=version, **kwargs)


def _kafka_python_class(key: ApiKeys, version: int, which: int) -> type:
    cls = KAFKA_PYTHON[key][which]
    if version > cls.max_version:
        pytest.skip(f"kafka-python {cls.__name__} stops at v{cls.max_version}")
    return cls


def _message(key: ApiKeys, which: int) -> Message:
    api = GROUP_APIS[key]
    return api.request if which == 0 else api.response


def test_group_apis_cover_the_classic_group_protocol_with_the_asked_ranges():
    assert {k: (a.min_version, a.max_version) for k, a in GROUP_APIS.items()} == EXPECTED_RANGES
    for key, api in GROUP_APIS.items():
        assert api.request.api_key == key and api.response.api_key == key
        assert api.request.name == api.name + "Request"
        assert api.response.name == api.name + "Response"


def test_flexible_from_is_kafkas_first_flexible_version():
    # Kafka's "flexibleVersions" of each request and response JSON.
    first_flexible = {
        ApiKeys.FIND_COORDINATOR: 3,
        ApiKeys.JOIN_GROUP: 6,
        ApiKeys.HEARTBEAT: 4,
        ApiKeys.LEAVE_GROUP: 4,
        ApiKeys.SYNC_GROUP: 4,
        ApiKeys.OFFSET_COMMIT: 8,
        ApiKeys.OFFSET_FETCH: 6,
        ApiKeys.DESCRIBE_GROUPS: 5,
        ApiKeys.LIST_GROUPS: 3,
        ApiKeys.DELETE_GROUPS: 2,
        ApiKeys.OFFSET_DELETE: None,
    }
    for key, api in GROUP_APIS.items():
        assert api.request.flexible_from == first_flexible[key], api.name
        assert api.response.flexible_from == first_flexible[key], api.name
        for cls, msg in zip(KAFKA_PYTHON[key], (api.request, api.response), strict=True):
            for v in range(api.min_version, api.max_version + 1):
                assert msg.is_flexible(v) == cls.flexible_version_q(v), (api.name, v)


@pytest.mark.parametrize(("key", "version"), CASES)
@pytest.mark.parametrize("which", [0, 1], ids=["request", "response"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(key: ApiKeys, version: int, which: int, data: st.DataObject):
    msg = _message(key, which)
    obj = data.draw(_body(msg.fields, version))
    encoded = msg.encode(obj, version).getvalue()
    assert _plain(msg.decode(encoded, version)) == _decoded_form(msg.fields, obj, version)


@pytest.mark.parametrize(("key", "version"), CASES)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_request_bytes_are_ours(key: ApiKeys, version: int, data: st.DataObject):
    cls = _kafka_python_class(key, version, 0)
    msg = _message(key, 0)
    obj = data.draw(_body(msg.fields, version))
    theirs = bytes(_to_kafka_python(cls, obj, version).encode(version=version))
    assert msg.encode(obj, version).getvalue() == theirs
    assert _plain(msg.decode(theirs, version)) == _decoded_form(msg.fields, obj, version)


@pytest.mark.parametrize(("key", "version"), CASES)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_reads_our_responses(key: ApiKeys, version: int, data: st.DataObject):
    cls = _kafka_python_class(key, version, 1)
    msg = _message(key, 1)
    obj = data.draw(_body(msg.fields, version))
    ours = msg.encode(obj, version).getvalue()
    theirs = cls.decode(ours, version=version)
    assert _their_values(theirs.to_dict(json=False)) == obj
    assert bytes(theirs.encode()) == ours  # decoded at `version`, re-encoded at it


def test_an_absent_group_instance_id_is_null_not_empty():
    # Kafka: "default": "null". A v4 JoinGroup has no group.instance.id: the
    # member is dynamic, which a handler tells by None (static members have a string).
    body = {
        "group_id": "g",
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 30000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00"}],
    }
    v4 = JOIN_GROUP_REQUEST.decode(JOIN_GROUP_REQUEST.encode(body, 4).getvalue(), 4)
    assert v4["group_instance_id"] is None
    v5 = JOIN_GROUP_REQUEST.encode(body, 5).getvalue()  # not given: written as null
    assert v5 == JOIN_GROUP_REQUEST.encode({**body, "group_instance_id": None}, 5).getvalue()
    assert JOIN_GROUP_REQUEST.decode(v5, 5)["group_instance_id"] is None
    response = {
        "error_code": 0,
        "generation_id": 1,
        "protocol_name": "range",
        "leader": "m",
        "member_id": "m",
        "members": [{"member_id": "m", "metadata": b""}],
    }
    decoded = JoinGroupResponse.decode(JOIN_GROUP_RESPONSE.encode(response, 5).getvalue(), 5)
    assert decoded.members[0].group_instance_id is None


def test_offset_fetch_topics_null_means_all_from_v2_and_is_refused_before():
    assert OFFSET_FETCH_REQUEST.decode(struct.pack(">h", 1) + b"g" + struct.pack(">i", -1), 2) == {
        "group_id": "g",
        "topics": None,
        "groups": [],  # a v8 field: absent before, its default
        "require_stable": False,  # a v7 field: absent before, its default
    }
    with pytest.raises(Exception, match="not nullable"):
        OFFSET_FETCH_REQUEST.encode({"group_id": "g", "topics": None}, 1)
