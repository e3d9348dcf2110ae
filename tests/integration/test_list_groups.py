"""ListGroups v0-v5 with librdkafka's admin client: v4 filters by state, v5 by
type and names each group's type (`classic` for the classic protocol, `consumer`
for KIP-848), so list_consumer_groups shows a group's type and can filter by it."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.client import Admin
from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.server.broker import BrokerThread


def joined(bs: str, group: str, protocol: str) -> Consumer:
    config = {"bootstrap.servers": bs, "group.id": group, "group.protocol": protocol}
    if protocol == "classic":
        config["session.timeout.ms"] = 6000
    consumer = Consumer(config)
    consumer.subscribe(["lg"])
    deadline = time.time() + 60
    while not consumer.assignment() and time.time() < deadline:
        consumer.poll(0.2)
    assert consumer.assignment(), f"{group} got no assignment"
    return consumer


@pytest.fixture(scope="module")
def groups(tmp_path_factory):
    with BrokerThread(
        {
            "log.dirs": str(tmp_path_factory.mktemp("broker")),
            "offsets.topic.num.partitions": "1",
            "group.consumer.heartbeat.interval.ms": "500",
            "group.initial.rebalance.delay.ms": "0",
        }
    ) as broker:
        bs = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for future in admin.create_topics([NewTopic("lg", 2, 1)]).values():
            future.result(10)
        classic = joined(bs, "lg-classic", "classic")
        kip848 = joined(bs, "lg-consumer", "consumer")
        try:
            yield broker, admin
        finally:
            classic.close()
            kip848.close()


def test_list_consumer_groups_names_each_group_type(groups):
    _, admin = groups
    listed = admin.list_consumer_groups().result(15)
    assert not listed.errors
    types = {g.group_id: g.type for g in listed.valid}
    assert types == {
        "lg-classic": ConsumerGroupType.CLASSIC,
        "lg-consumer": ConsumerGroupType.CONSUMER,
    }


@pytest.mark.parametrize(
    "wanted, expected",
    [
        ({ConsumerGroupType.CONSUMER}, {"lg-consumer"}),
        ({ConsumerGroupType.CLASSIC}, {"lg-classic"}),
    ],
)
def test_list_consumer_groups_filters_by_type(groups, wanted, expected):
    _, admin = groups
    listed = admin.list_consumer_groups(types=wanted).result(15)
    assert {g.group_id for g in listed.valid} == expected


def test_list_consumer_groups_filters_by_state(groups):
    _, admin = groups
    stable = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(15)
    assert {g.group_id for g in stable.valid} == {"lg-classic", "lg-consumer"}
    empty = admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(15)
    assert not empty.valid


@pytest.mark.parametrize("version", range(6))
def test_every_version_on_the_wire(groups, version):
    broker, _ = groups
    admin = Admin(broker.bootstrap_servers)
    try:
        conn = admin.coordinator("lg-classic")
        body = {"states_filter": [], "types_filter": ["CONSUMER"] if version >= 5 else []}
        _, answer = conn._call(ApiKeys.LIST_GROUPS, version, body)
    finally:
        admin.close()
    assert answer["error_code"] == Errors.NONE
    got = {g["group_id"]: g for g in answer["groups"]}
    if version >= 5:  # filtered by type, case-insensitively
        assert set(got) == {"lg-consumer"}
        assert got["lg-consumer"]["group_type"] == "consumer"
    else:
        assert set(got) == {"lg-classic", "lg-consumer"}
    if version >= 4:
        assert {g["group_state"] for g in got.values()} == {"Stable"}
