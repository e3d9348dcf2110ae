"""DescribeCluster on a broker of a KRaft cluster: the live brokers, or (v2,
include_fenced_brokers, KIP-1073) every registered one with its fence; the
controller id is -1 when the broker named is not among those listed. The
brokers come from a real metadata image replayed from controller records; the
answer goes through the wire schema of each version."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafkalab.controller.metadata_image import MetadataImage
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import RequestHeader, decode_response, encode_response
from kafkalab.protocol.messages import APIS
from kafkalab.server.config import KafkaConfig
from kafkalab.server.kafka_apis import KafkaApis
from kafkalab.server.metadata_cache import KRaftMetadataCache


def cluster(fenced: set[int]) -> KafkaApis:
    image = MetadataImage()
    for broker_id in (1, 2, 3):
        image.replay(
            {
                "type": "RegisterBrokerRecord",
                "broker_id": broker_id,
                "host": f"b{broker_id}",
                "port": 9090 + broker_id,
                "incarnation_id": f"i{broker_id}",
                "broker_epoch": 10 + broker_id,
            }
        )
        if broker_id not in fenced:
            image.replay({"type": "UnfenceBrokerRecord", "broker_id": broker_id})
    cache = KRaftMetadataCache(SimpleNamespace(image=image), controller=None)
    config = KafkaConfig(log_dirs=["unused"], cluster_id="c1")
    return KafkaApis(config, replica_manager=None, metadata_cache=cache, producer_ids=None)


def describe(apis: KafkaApis, version: int, include_fenced: bool) -> dict:
    """The request and the answer each through the schema of `version`."""
    api = APIS[ApiKeys.DESCRIBE_CLUSTER]
    sent = {
        "include_cluster_authorized_operations": False,
        "endpoint_type": 1,
        "include_fenced_brokers": include_fenced,
    }
    body = api.request.decode(api.request.encode(sent, version).getvalue(), version)
    answer = apis.handle(RequestHeader(ApiKeys.DESCRIBE_CLUSTER, version, 5, "t"), body)
    frame = b"".join(bytes(part) for part in encode_response(api, version, 5, answer))
    _, decoded = decode_response(api, version, frame[4:])
    return decoded


def brokers(answer: dict) -> list[tuple[int, str, int, bool]]:
    return [(b["broker_id"], b["host"], b["port"], b["is_fenced"]) for b in answer["brokers"]]


def test_fenced_brokers_are_listed_only_when_asked_in_v2():
    apis = cluster(fenced={2})
    assert brokers(describe(apis, 2, include_fenced=False)) == [
        (1, "b1", 9091, False),
        (3, "b3", 9093, False),
    ]
    assert brokers(describe(apis, 2, include_fenced=True)) == [
        (1, "b1", 9091, False),
        (2, "b2", 9092, True),
        (3, "b3", 9093, False),
    ]


@pytest.mark.parametrize("version", [0, 1])
def test_versions_without_the_flag_list_the_live_brokers(version):
    # the flag is not on the wire before v2: the broker reads False whatever was sent
    apis = cluster(fenced={2})
    answer = describe(apis, version, include_fenced=True)
    assert [b["broker_id"] for b in answer["brokers"]] == [1, 3]
    assert answer["cluster_id"] == "c1"


def test_the_controller_id_is_a_listed_broker_or_minus_one():
    assert describe(cluster(fenced={2}), 2, include_fenced=False)["controller_id"] == 1
    assert describe(cluster(fenced={1, 2, 3}), 2, include_fenced=True)["controller_id"] == -1
