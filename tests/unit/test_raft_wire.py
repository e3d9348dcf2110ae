"""KRaft on the wire: Vote, BeginQuorumEpoch, EndQuorumEpoch, DescribeQuorum and
Fetch's KRaft fields encode and decode field for field (Kafka's JSONs), and
kafkalab.raft's messages survive the trip through them (hypothesis)."""

from __future__ import annotations

import struct
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from test_metadata_record_serde import records as metadata_records

from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import (
    DESCRIBE_QUORUM_RESPONSE,
    RAFT_APIS,
    VOTE_REQUEST,
)
from kafkalab.protocol.messages.fetch import FETCH_REQUEST, FETCH_RESPONSE
from kafkalab.raft.kafka_raft_client import LeaderChangeMessage
from kafkalab.raft.raft_log import LogEntry, OffsetAndEpoch
from kafkalab.raft.raft_message import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)
from kafkalab.raft.raft_wire import (
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    WIRE_VERSIONS,
    describe_quorum_from_body,
    describe_quorum_to_body,
    request_from_body,
    request_to_body,
    response_from_body,
    response_to_body,
)
from kafkalab.raft.record_serde import decode_entries, encode_entries

ids = st.integers(0, 1000)
epochs = st.integers(0, 2**31 - 1)
offsets = st.integers(0, 2**62)
cluster_ids = st.one_of(st.none(), st.text(min_size=1, max_size=22))
errors = st.sampled_from(
    [
        Errors.NONE,
        Errors.FENCED_LEADER_EPOCH,
        Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.UNKNOWN_LEADER_EPOCH,
        Errors.INCONSISTENT_VOTER_SET,
        Errors.INCONSISTENT_CLUSTER_ID,
    ]
)
leaders = st.integers(-1, 1000)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def log_entries(draw: st.DrawFn) -> tuple[LogEntry, ...]:
    start = draw(st.integers(0, 10**6))
    epoch = draw(st.integers(0, 100))
    out = []
    for i in range(draw(st.integers(0, 8))):
        epoch += draw(st.integers(0, 2))
        record = draw(
            st.one_of(
                json_values,
                metadata_records,  # Kafka's binary records (issue 25)
                st.builds(
                    LeaderChangeMessage,
                    ids,
                    st.tuples(ids, ids, ids),
                    st.tuples(ids, ids),
                ),
            )
        )
        out.append(LogEntry(start + i, epoch, record))
    return tuple(out)


requests = st.one_of(
    st.builds(VoteRequest, epochs, ids, epochs, offsets, st.booleans(), cluster_ids),
    st.builds(BeginQuorumEpochRequest, ids, epochs, cluster_ids),
    st.builds(
        EndQuorumEpochRequest, ids, epochs, st.lists(ids, max_size=4).map(tuple), cluster_ids
    ),
    st.builds(FetchRequest, ids, epochs, offsets, epochs, cluster_ids),
)

responses = st.one_of(
    st.builds(VoteResponse, errors, leaders, epochs, st.booleans()),
    st.builds(BeginQuorumEpochResponse, errors, leaders, epochs),
    st.builds(EndQuorumEpochResponse, errors, leaders, epochs),
    st.builds(
        FetchResponse,
        errors,
        leaders,
        epochs,
        st.integers(-1, 2**62),
        st.one_of(st.none(), st.builds(OffsetAndEpoch, offsets, epochs)),
        log_entries(),
    ),
)


@settings(max_examples=300, deadline=None)
@given(requests)
def test_a_raft_request_survives_the_wire(data) -> None:
    key, version, body = request_to_body(data)
    schema = FETCH_REQUEST if key == ApiKeys.FETCH else RAFT_APIS[key].request
    wire = bytes(schema.encode(body, version).buf)
    assert request_from_body(key, schema.decode(wire, version)) == data


@settings(max_examples=300, deadline=None)
@given(responses)
def test_a_raft_response_survives_the_wire(data) -> None:
    key, _version, _ = request_to_body(
        {
            VoteResponse: VoteRequest(1, 1, 0, 0),
            BeginQuorumEpochResponse: BeginQuorumEpochRequest(1, 1),
            EndQuorumEpochResponse: EndQuorumEpochRequest(1, 1),
            FetchResponse: FetchRequest(1, 1, 0, 0),
        }[type(data)]
    )
    version = WIRE_VERSIONS[key]
    schema = FETCH_RESPONSE if key == ApiKeys.FETCH else RAFT_APIS[key].response
    wire = bytes(schema.encode(response_to_body(data), version).buf)
    assert response_from_body(key, schema.decode(wire, version)) == data


replica_states = st.builds(
    ReplicaState, ids, st.integers(-1, 2**62), st.integers(-1, 2**50), st.integers(-1, 2**50)
)


@settings(max_examples=200, deadline=None)
@given(
    st.builds(
        DescribeQuorumResponse,
        errors,
        leaders,
        epochs,
        st.integers(-1, 2**62),
        st.lists(replica_states, max_size=5).map(tuple),
        st.lists(replica_states, max_size=3).map(tuple),
    )
)
def test_describe_quorum_survives_the_wire(resp: DescribeQuorumResponse) -> None:
    wire = bytes(DESCRIBE_QUORUM_RESPONSE.encode(describe_quorum_to_body(resp), 2).buf)
    assert describe_quorum_from_body(DESCRIBE_QUORUM_RESPONSE.decode(wire, 2)) == resp


@settings(max_examples=200, deadline=None)
@given(log_entries())
def test_entries_survive_record_batches(entries: tuple[LogEntry, ...]) -> None:
    assert decode_entries(encode_entries(entries)) == entries


@given(st.sampled_from(sorted(RAFT_APIS)), st.data())
def test_every_version_of_every_raft_schema_round_trips(key: ApiKeys, data: st.DataObject) -> None:
    api = RAFT_APIS[key]
    version = data.draw(st.integers(api.min_version, api.max_version))
    for schema in (api.request, api.response):
        body = schema.decode(bytes(schema.encode({}, version).buf), version)
        assert schema.decode(bytes(schema.encode(body, version).buf), version) == body


def _compact_string(s: str) -> bytes:
    return bytes([len(s) + 1]) + s.encode()


def test_vote_request_v2_bytes_are_kafkas_layout() -> None:
    """VoteRequest v2, written out by hand from Kafka's VoteRequest.json: ClusterId,
    VoterId, Topics[TopicName, Partitions[PartitionIndex, ReplicaEpoch, ReplicaId,
    ReplicaDirectoryId, VoterDirectoryId, LastOffsetEpoch, LastOffset, PreVote]]."""
    _key, version, body = request_to_body(VoteRequest(7, 2, 6, 42, True, "abc"))
    expected = (
        _compact_string("abc")
        + struct.pack(">i", -1)
        + b"\x02"
        + _compact_string(METADATA_TOPIC)
        + b"\x02"
        + struct.pack(">iii", 0, 7, 2)
        + bytes(32)
        + struct.pack(">iq?", 6, 42, True)
        + b"\x00\x00\x00"  # tagged fields of the partition, the topic, the request
    )
    assert version == 2
    assert bytes(VOTE_REQUEST.encode(body, version).buf) == expected


def test_fetch_response_tagged_current_leader_and_diverging_epoch_bytes() -> None:
    """The KRaft fields of a FetchResponse partition are tagged (KIP-482): tag 0
    DivergingEpoch {Epoch, EndOffset}, tag 1 CurrentLeader {LeaderId, LeaderEpoch},
    each a struct with its own (empty) tag section; defaults are not written."""
    body = response_to_body(FetchResponse(Errors.NONE, 3, 9, 10, OffsetAndEpoch(5, 4), ()))
    wire = bytes(FETCH_RESPONSE.encode(body, 16).buf)
    tags = (
        b"\x02"
        + b"\x00\x0d"
        + struct.pack(">iq", 4, 5)
        + b"\x00"
        + b"\x01\x09"
        + struct.pack(">ii", 3, 9)
        + b"\x00"
    )
    records_then_tags = b"\x01" + tags  # compact records: empty (length 0 -> 1)
    assert records_then_tags in wire
    decoded = FETCH_RESPONSE.decode(wire, 16)
    part = decoded["responses"][0]["partitions"][0]
    assert part["current_leader"] == {"leader_id": 3, "leader_epoch": 9}
    assert part["diverging_epoch"] == {"epoch": 4, "end_offset": 5}
    assert part["snapshot_id"] == {"end_offset": -1, "epoch": -1}
    assert decoded["responses"][0]["topic_id"] == METADATA_TOPIC_ID


def test_fetch_request_carries_cluster_id_and_replica_state_tagged() -> None:
    _key, version, body = request_to_body(FetchRequest(2, 5, 100, 4, "cid"))
    wire = bytes(FETCH_REQUEST.encode(body, version).buf)
    # the request's own tag section ends it: 2 fields, tag 0 ClusterId, tag 1 ReplicaState
    tail = (
        b"\x02"
        + b"\x00\x04"
        + _compact_string("cid")
        + b"\x01\x0d"
        + struct.pack(">iq", 2, -1)
        + b"\x00"
    )
    assert wire.endswith(tail)
    decoded = FETCH_REQUEST.decode(wire, version)
    assert decoded["cluster_id"] == "cid"
    assert decoded["replica_state"] == {"replica_id": 2, "replica_epoch": -1}
    assert decoded["topics"][0]["partitions"][0]["last_fetched_epoch"] == 4


def test_an_unknown_tag_is_kept_raw_beside_known_ones() -> None:
    _key, version, body = request_to_body(FetchRequest(2, 5, 100, 4, None))
    body["_tagged"] = {7: b"\x01\x02"}
    decoded = FETCH_REQUEST.decode(bytes(FETCH_REQUEST.encode(body, version).buf), version)
    assert decoded["_tagged"] == {7: b"\x01\x02"}
    assert decoded["replica_state"]["replica_id"] == 2
    assert decoded["cluster_id"] is None


def test_old_fetch_versions_are_unchanged_by_the_kraft_fields() -> None:
    """v11 (what the broker serves) has no tagged fields: the KRaft fields do not
    appear in its bytes."""
    body = {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 3}]}],
        "cluster_id": "ignored",
        "replica_state": {"replica_id": 9, "replica_epoch": 1},
    }
    with_kraft = bytes(FETCH_REQUEST.encode(body, 11).buf)
    del body["cluster_id"], body["replica_state"]
    assert with_kraft == bytes(FETCH_REQUEST.encode(body, 11).buf)
    assert uuid.UUID(int=1) == METADATA_TOPIC_ID
