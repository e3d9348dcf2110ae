"""TxnOffsetCommit 0-5 and OffsetFetch 6-7 (require_stable): every version round-trips
and speaks the same bytes as kafka-python, whose classes are built from Kafka's own
JSON schemas (the independent peer, as in test_group_schemas)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.producer.transaction import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from test_group_schemas import _body, _decoded_form, _plain, _their_values, _to_kafka_python

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import APIS, TXN_GROUP_APIS

PEERS = {
    ApiKeys.TXN_OFFSET_COMMIT: (TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    ApiKeys.OFFSET_FETCH: (OffsetFetchRequest, OffsetFetchResponse),
}
CASES = [
    pytest.param(ApiKeys.TXN_OFFSET_COMMIT, v, id=f"TxnOffsetCommit-v{v}") for v in range(6)
] + [pytest.param(ApiKeys.OFFSET_FETCH, v, id=f"OffsetFetch-v{v}") for v in (6, 7, 8, 9, 10)]


def test_the_broker_advertises_them():
    assert (
        APIS[ApiKeys.TXN_OFFSET_COMMIT].min_version,
        APIS[ApiKeys.TXN_OFFSET_COMMIT].max_version,
    ) == (0, 5)
    assert APIS[ApiKeys.OFFSET_FETCH].max_version == 10
    for key, api in TXN_GROUP_APIS.items():
        assert APIS[key] is api
        for cls, msg in zip(PEERS[key], (api.request, api.response), strict=True):
            for v in range(api.min_version, api.max_version + 1):
                assert msg.is_flexible(v) == cls.flexible_version_q(v), (api.name, v)


@pytest.mark.parametrize(("key", "version"), CASES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_request_bytes_are_ours(key: ApiKeys, version: int, data: st.DataObject):
    msg = APIS[key].request
    obj = data.draw(_body(msg.fields, version))
    theirs = bytes(_to_kafka_python(PEERS[key][0], obj, version).encode(version=version))
    assert msg.encode(obj, version).getvalue() == theirs
    assert _plain(msg.decode(theirs, version)) == _decoded_form(msg.fields, obj, version)


@pytest.mark.parametrize(("key", "version"), CASES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_reads_our_responses(key: ApiKeys, version: int, data: st.DataObject):
    msg = APIS[key].response
    obj = data.draw(_body(msg.fields, version))
    ours = msg.encode(obj, version).getvalue()
    theirs = PEERS[key][1].decode(ours, version=version)
    assert _their_values(theirs.to_dict(json=False)) == obj
    assert bytes(theirs.encode()) == ours
