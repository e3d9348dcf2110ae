"""FetchSnapshot (api key 59, KIP-630) and Fetch's SnapshotId on the wire: Kafka's
FetchSnapshotRequest/Response JSONs field for field, kafkalab.raft's messages through
them and back (hypothesis), and the bytes of a request written out by hand."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import (
    FETCH_SNAPSHOT_REQUEST,
    FETCH_SNAPSHOT_RESPONSE,
    RAFT_APIS,
)
from kafkalab.protocol.messages.fetch import FETCH_RESPONSE
from kafkalab.raft.raft_log import OffsetAndEpoch
from kafkalab.raft.raft_message import (
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from kafkalab.raft.raft_wire import (
    METADATA_TOPIC,
    WIRE_VERSIONS,
    request_from_body,
    request_to_body,
    response_from_body,
    response_to_body,
)

ids = st.integers(0, 1000)
epochs = st.integers(0, 2**31 - 1)
offsets = st.integers(0, 2**62)
snapshot_ids = st.builds(OffsetAndEpoch, offsets, epochs)
errors = st.sampled_from(
    [
        Errors.NONE,
        Errors.FENCED_LEADER_EPOCH,
        Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.UNKNOWN_LEADER_EPOCH,
        Errors.SNAPSHOT_NOT_FOUND,
        Errors.POSITION_OUT_OF_RANGE,
        Errors.INCONSISTENT_CLUSTER_ID,
    ]
)


def test_fetch_snapshot_is_api_59_versions_0_to_1_flexible():
    api = RAFT_APIS[ApiKeys.FETCH_SNAPSHOT]
    assert (int(api.key), api.name, api.min_version, api.max_version) == (
        59,
        "FetchSnapshot",
        0,
        1,
    )
    assert api.request.flexible_from == 0 and WIRE_VERSIONS[ApiKeys.FETCH_SNAPSHOT] == 1


@settings(max_examples=300, deadline=None)
@given(
    st.builds(
        FetchSnapshotRequest,
        ids,
        epochs,
        snapshot_ids,
        offsets,
        st.integers(1, 2**31 - 1),
        st.one_of(st.none(), st.text(min_size=1, max_size=22)),
    ),
    st.sampled_from([0, 1]),
)
def test_a_fetch_snapshot_request_survives_the_wire(data, version):
    key, _version, body = request_to_body(data)
    assert key == ApiKeys.FETCH_SNAPSHOT
    wire = bytes(FETCH_SNAPSHOT_REQUEST.encode(body, version).buf)
    assert request_from_body(key, FETCH_SNAPSHOT_REQUEST.decode(wire, version)) == data


@settings(max_examples=300, deadline=None)
@given(
    st.builds(
        FetchSnapshotResponse,
        errors,
        st.integers(-1, 1000),
        epochs,
        snapshot_ids,
        st.integers(-1, 2**62),
        st.integers(-1, 2**62),
        st.binary(max_size=300),
    ),
    st.sampled_from([0, 1]),
)
def test_a_fetch_snapshot_response_survives_the_wire(data, version):
    wire = bytes(FETCH_SNAPSHOT_RESPONSE.encode(response_to_body(data), version).buf)
    got = response_from_body(ApiKeys.FETCH_SNAPSHOT, FETCH_SNAPSHOT_RESPONSE.decode(wire, version))
    assert got == data


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), snapshot_ids), st.integers(-1, 2**62))
def test_a_fetch_response_carries_its_snapshot_id(snapshot_id, hw):
    data = FetchResponse(Errors.NONE, 2, 7, hw, None, (), snapshot_id)
    version = WIRE_VERSIONS[ApiKeys.FETCH]
    wire = bytes(FETCH_RESPONSE.encode(response_to_body(data), version).buf)
    assert response_from_body(ApiKeys.FETCH, FETCH_RESPONSE.decode(wire, version)) == data


def _compact_string(s: str) -> bytes:
    return bytes([len(s) + 1]) + s.encode()


def test_fetch_snapshot_request_v1_bytes_are_kafkas_layout():
    """From FetchSnapshotRequest.json: ReplicaId, MaxBytes, Topics[Name, Partitions[
    Partition, CurrentLeaderEpoch, SnapshotId{EndOffset, Epoch}, Position]], ClusterId
    as tagged field 0 of the request (ReplicaDirectoryId, tag 0 of a partition, left
    out at its default)."""
    req = FetchSnapshotRequest(3, 5, OffsetAndEpoch(42, 4), 100, 1000, "abc")
    _key, version, body = request_to_body(req)
    expected = (
        struct.pack(">ii", 3, 1000)
        + b"\x02"
        + _compact_string(METADATA_TOPIC)
        + b"\x02"
        + struct.pack(">ii", 0, 5)
        + struct.pack(">qi", 42, 4)
        + b"\x00"  # SnapshotId's tagged fields
        + struct.pack(">q", 100)
        + b"\x00"  # the partition's
        + b"\x00"  # the topic's
        + b"\x01\x00\x04"  # one tagged field: tag 0, 4 bytes
        + _compact_string("abc")
    )
    assert bytes(FETCH_SNAPSHOT_REQUEST.encode(body, version).buf) == expected
