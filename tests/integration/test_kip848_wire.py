"""KIP-848 through a real socket, request by request, with the teaching client's
connection: what the handlers turn into coordinator calls and back.

A member joins with ConsumerGroupHeartbeat (epoch 0) and is handed partitions by
topic id; Metadata v12 names that id (and answers UNKNOWN_TOPIC_ID for an id no
topic has); ConsumerGroupDescribe shows the member; a second member makes the
first revoke before the second gets anything; epoch -1 leaves. librdkafka as a
whole member is in test_consumer_groups.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest

from kafkalab.client import Admin
from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.server.broker import BrokerThread

TOPIC = "kip848"
PARTITIONS = 4


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(
        {
            "log.dirs": str(tmp_path_factory.mktemp("kip848")),
            "offsets.topic.num.partitions": "3",
            "group.consumer.heartbeat.interval.ms": "1000",
        }
    ) as b:
        yield b


@pytest.fixture
def admin(broker):
    a = Admin(broker.bootstrap_servers)
    a.create_topic(TOPIC, PARTITIONS)
    yield a
    a.delete_topic(TOPIC)
    a.close()


def heartbeat(conn, group: str, member_id: str, epoch: int, **fields) -> dict:
    body = {"group_id": group, "member_id": member_id, "member_epoch": epoch, **fields}
    while True:
        r = conn.request(ApiKeys.CONSUMER_GROUP_HEARTBEAT, body)
        if r["error_code"] != Errors.COORDINATOR_LOAD_IN_PROGRESS:
            return r
        time.sleep(0.1)


def assigned(response: dict, names: dict[uuid.UUID, str]) -> set[tuple[str, int]]:
    return {
        (names[t["topic_id"]], p)
        for t in response["assignment"]["topic_partitions"]
        for p in t["partitions"]
    }


def test_members_are_assigned_by_topic_id_and_metadata_names_the_ids(broker, admin):
    group = "g-wire"
    conn = admin.coordinator(group)
    meta = conn.request(ApiKeys.METADATA, {"topics": [{"name": TOPIC}]})
    (topic,) = meta["topics"]
    topic_id = topic["topic_id"]
    assert topic_id != uuid.UUID(int=0)
    by_id = conn.request(
        ApiKeys.METADATA,
        {
            "topics": [
                {"topic_id": topic_id, "name": None},
                {"topic_id": uuid.UUID(int=9), "name": None},
            ]
        },
    )
    assert [(t["name"], t["error_code"]) for t in by_id["topics"]] == [
        (TOPIC, 0),
        (None, Errors.UNKNOWN_TOPIC_ID),
    ]
    names = {topic_id: TOPIC}
    join = {"rebalance_timeout_ms": 30_000, "subscribed_topic_names": [TOPIC]}

    a = heartbeat(conn, group, "member-a", 0, **join)
    assert a["error_code"] == 0 and a["member_id"] == "member-a"  # its own id (KIP-1082)
    assert a["heartbeat_interval_ms"] == 1000 and a["member_epoch"] >= 1
    everything = {(TOPIC, p) for p in range(PARTITIONS)}
    assert assigned(a, names) == everything

    b = heartbeat(conn, group, "member-b", 0, **join)
    assert b["error_code"] == 0
    # b gets nothing a still owns: a must first give up what the target takes from it
    assert assigned(b, names) == set()
    owned = [{"topic_id": topic_id, "partitions": list(range(PARTITIONS))}]
    a2 = heartbeat(conn, group, "member-a", a["member_epoch"], topic_partitions=owned)
    kept = assigned(a2, names)
    assert kept and kept < everything
    a3 = heartbeat(
        conn,
        group,
        "member-a",
        a2["member_epoch"],
        topic_partitions=[{"topic_id": topic_id, "partitions": sorted(p for _, p in kept)}],
    )
    assert a3["error_code"] == 0 and a3["member_epoch"] > a["member_epoch"]
    b2 = heartbeat(conn, group, "member-b", b["member_epoch"], topic_partitions=[])
    assert assigned(b2, names) == everything - kept

    described = admin.describe_consumer_group(group)
    assert described.state == "Stable" and described.assignor == "uniform"
    members = {m.member_id: m for m in described.members}
    assert set(members["member-a"].partitions) == kept
    assert set(members["member-b"].partitions) == everything - kept
    assert all(m.partitions == m.target for m in described.members)
    assert {m.subscribed_topics for m in described.members} == {(TOPIC,)}

    described = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafkalab",
            "groups",
            "-b",
            broker.bootstrap_servers,
            "--describe",
            group,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0].startswith(f"group {group}: Stable, consumer protocol (KIP-848), assignor")
    owners = {int(row.split("\t")[1]): row.split("\t")[5] for row in lines[2:]}
    assert owners == {p: "member-a" if (TOPIC, p) in kept else "member-b" for p in range(4)}

    left = heartbeat(conn, group, "member-b", -1)
    assert left["error_code"] == 0 and left["member_epoch"] == -1
    assert [m.member_id for m in admin.describe_consumer_group(group).members] == ["member-a"]


def test_what_kafkalab_refuses(admin):
    conn = admin.coordinator("g-refused")
    regex = heartbeat(
        conn,
        "g-refused",
        "m",
        0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=[],
        subscribed_topic_regex="kip.*",
    )
    assert regex["error_code"] == Errors.INVALID_REQUEST
    assert "SubscribedTopicRegex" in regex["error_message"]
    unknown = heartbeat(conn, "g-refused", "nobody", 3)
    assert unknown["error_code"] == Errors.GROUP_ID_NOT_FOUND
    r = conn.request(
        ApiKeys.CONSUMER_GROUP_DESCRIBE,
        {"group_ids": ["g-refused"], "include_authorized_operations": False},
    )
    assert r["groups"][0]["error_code"] == Errors.GROUP_ID_NOT_FOUND
