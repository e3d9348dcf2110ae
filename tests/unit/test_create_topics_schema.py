"""CreateTopics 0-7: v5 (flexible) answers each topic's partitions, replication factor
and configs, v7 its topic id. Our bytes are kafka-python's, whose classes are built
from Kafka's own JSON schemas (the independent peer, as in test_group_schemas)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from test_group_schemas import _body, _decoded_form, _plain, _their_values, _to_kafka_python

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import APIS

API = APIS[ApiKeys.CREATE_TOPICS]
VERSIONS = [pytest.param(v, id=f"v{v}") for v in range(8)]


def test_the_broker_advertises_0_to_7_flexible_from_5():
    assert (API.min_version, API.max_version) == (0, 7)
    for cls, msg in ((CreateTopicsRequest, API.request), (CreateTopicsResponse, API.response)):
        for v in range(8):
            assert msg.is_flexible(v) == cls.flexible_version_q(v), v


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_request_bytes_are_ours(version: int, data: st.DataObject):
    obj = data.draw(_body(API.request.fields, version))
    theirs = bytes(_to_kafka_python(CreateTopicsRequest, obj, version).encode(version=version))
    assert API.request.encode(obj, version).getvalue() == theirs
    assert _plain(API.request.decode(theirs, version)) == _decoded_form(
        API.request.fields, obj, version
    )


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_reads_our_responses(version: int, data: st.DataObject):
    obj = data.draw(_body(API.response.fields, version))
    ours = API.response.encode(obj, version).getvalue()
    theirs = CreateTopicsResponse.decode(ours, version=version)
    values = _their_values(theirs.to_dict(json=False))
    for topic in values["topics"]:
        # the tagged topic_config_error_code, which we never send: NONE to them
        assert topic.pop("topic_config_error_code", 0) == 0
    assert values == obj
    assert bytes(theirs.encode()) == ours


def test_a_failed_topic_answers_minus_ones_and_null_configs():
    """A topic that failed leaves the v5+ fields at Kafka's defaults: -1, -1, null
    configs, the zero topic id; they round-trip as such."""
    failed = {"name": "t", "error_code": 36, "error_message": "exists"}
    body = {"throttle_time_ms": 0, "topics": [failed]}
    decoded = API.response.decode(API.response.encode(body, 7).getvalue(), 7)["topics"][0]
    assert decoded["num_partitions"] == -1
    assert decoded["replication_factor"] == -1
    assert decoded["configs"] is None
    assert decoded["topic_id"] == uuid.UUID(int=0)
    assert "_tagged" not in decoded  # topic_config_error_code: absent, i.e. NONE
    theirs = CreateTopicsResponse.decode(API.response.encode(body, 7).getvalue(), version=7)
    topic = theirs.to_dict(json=False)["topics"][0]
    assert (topic["num_partitions"], topic["replication_factor"]) == (-1, -1)
    assert topic["configs"] is None
