"""AddPartitionsToTxn 0-5: the clients' form (v0-3) and the brokers' batched form with
verify_only (v4-5, KIP-890) speak the same bytes as kafka-python, whose classes are
built from Kafka's own JSON schemas (the independent peer, as in test_group_schemas)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.producer.transaction import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from test_group_schemas import _body, _decoded_form, _plain, _their_values, _to_kafka_python

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import APIS

API = APIS[ApiKeys.ADD_PARTITIONS_TO_TXN]
VERSIONS = [pytest.param(v, id=f"v{v}") for v in range(6)]


def test_the_broker_advertises_0_to_5_flexible_from_3():
    assert (API.min_version, API.max_version) == (0, 5)
    for cls, msg in (
        (AddPartitionsToTxnRequest, API.request),
        (AddPartitionsToTxnResponse, API.response),
    ):
        for v in range(6):
            assert msg.is_flexible(v) == cls.flexible_version_q(v), v


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_request_bytes_are_ours(version: int, data: st.DataObject):
    obj = data.draw(_body(API.request.fields, version))
    theirs = bytes(
        _to_kafka_python(AddPartitionsToTxnRequest, obj, version).encode(version=version)
    )
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
    theirs = AddPartitionsToTxnResponse.decode(ours, version=version)
    assert _their_values(theirs.to_dict(json=False)) == obj
    assert bytes(theirs.encode()) == ours
