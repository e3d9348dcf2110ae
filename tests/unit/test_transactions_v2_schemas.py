"""The versions that carry transactions v2 (KIP-890 part 2), byte for byte against
kafka-python, whose classes are built from Kafka's own JSON schemas: EndTxn v4-v5
(v5's response carries the next producer id and epoch), Produce v9-v12 (flexible;
v12 is v11's body) and ApiVersions v3-v4 with the features a Kafka 4 client
reads (`transaction.version` finalized)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import ApiVersionsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import EndTxnRequest, EndTxnResponse
from test_group_schemas import _body, _decoded_form, _plain, _their_values, _to_kafka_python

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import APIS, api_versions_body
from kafkalab.protocol.messages.api_versions import features_tagged, read_features
from kafkalab.server import features

PEERS = {
    ApiKeys.END_TXN: (EndTxnRequest, EndTxnResponse),
    ApiKeys.PRODUCE: (ProduceRequest, ProduceResponse),
}
CASES = [pytest.param(ApiKeys.END_TXN, v, id=f"EndTxn-v{v}") for v in range(6)] + [
    pytest.param(ApiKeys.PRODUCE, v, id=f"Produce-v{v}") for v in range(9, 13)
]


def test_the_broker_advertises_them():
    assert APIS[ApiKeys.END_TXN].max_version == 5
    assert APIS[ApiKeys.PRODUCE].max_version == 12
    assert APIS[ApiKeys.TXN_OFFSET_COMMIT].max_version == 5
    assert APIS[ApiKeys.API_VERSIONS].max_version == 4
    for key, (request, response) in PEERS.items():
        api = APIS[key]
        for v in range(api.min_version, api.max_version + 1):
            assert api.request.is_flexible(v) == request.flexible_version_q(v), (api.name, v)
            assert api.response.is_flexible(v) == response.flexible_version_q(v), (api.name, v)


@pytest.mark.parametrize(("key", "version"), [c for c in CASES if c.values[0] == ApiKeys.END_TXN])
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
    if key == ApiKeys.END_TXN:  # Produce's names differ (Kafka's PartitionResponses)
        assert _their_values(theirs.to_dict(json=False)) == obj
    assert bytes(theirs.encode()) == ours


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("version", [3, 4])
def test_kafka_python_reads_the_features(version: int, level: int):
    extra = {features.TRANSACTION_VERSION: str(level)}
    body = api_versions_body(APIS)
    body["_tagged"] = features_tagged(
        version,
        {f.name: (f.min_version, f.max_version) for f in features.SUPPORTED_FEATURES},
        features.finalized_features(extra),
        features.FINALIZED_FEATURES_EPOCH,
    )
    ours = APIS[ApiKeys.API_VERSIONS].response.encode(body, version).getvalue()
    theirs = ApiVersionsResponse.decode(ours, version=version)
    assert theirs.finalized_features_epoch == 0
    finalized = {
        f.name: (f.min_version_level, f.max_version_level) for f in theirs.finalized_features
    }
    assert finalized["transaction.version"] == (level, level)
    supported = {f.name: (f.min_version, f.max_version) for f in theirs.supported_features}
    # v3 leaves out what starts at 0 (KAFKA-17011); v4 lists it
    assert ("transaction.version" in supported) == (version >= 4)
    assert supported["metadata.version"] == (7, 25)
    assert read_features(APIS[ApiKeys.API_VERSIONS].response.decode(ours, version)) == (
        supported,
        0,
        {n: hi for n, (_, hi) in finalized.items()},
    )


def test_only_levels_1_and_2_are_spoken():
    with pytest.raises(ValueError, match="transaction versions 1 and 2"):
        features.transaction_version({features.TRANSACTION_VERSION: "3"})
    assert features.transaction_version({}) == features.DEFAULT_TRANSACTION_VERSION == 2
