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


def commit(conn, version: int, group: str, member_id: str, epoch: int, topics: list) -> dict:
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": epoch,
        "member_id": member_id,
        "group_instance_id": None,
        "topics": topics,
    }
    return conn._call(ApiKeys.OFFSET_COMMIT, version, body)[1]


def commit_errors(response: dict, key: str = "name") -> dict:
    return {
        (t[key], p["partition_index"]): Errors(p["error_code"])
        for t in response["topics"]
        for p in t["partitions"]
    }


def test_a_kip848_members_offsets_by_version(admin):
    """OffsetCommit v9/v10 and OffsetFetch v8-v10 as Kafka 4's Java consumer sends
    them: member epochs checked, topics by id from v10, several groups per fetch."""
    group = "g-offsets"
    conn = admin.coordinator(group)
    (topic,) = conn.request(ApiKeys.METADATA, {"topics": [{"name": TOPIC}]})["topics"]
    topic_id, nowhere = topic["topic_id"], uuid.UUID(int=99)
    joined = heartbeat(
        conn, group, "m", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=[TOPIC]
    )
    epoch = joined["member_epoch"]
    assert joined["error_code"] == 0 and epoch >= 1

    def partition(i: int, offset: int) -> dict:
        return {"partition_index": i, "committed_offset": offset, "committed_metadata": "x"}

    by_id = commit(
        conn, 10, group, "m", epoch,
        [
            {"topic_id": topic_id, "partitions": [partition(0, 5), partition(1, 6)]},
            {"topic_id": nowhere, "partitions": [partition(0, 1)]},
        ],
    )  # fmt: skip
    assert commit_errors(by_id, "topic_id") == {
        (topic_id, 0): Errors.NONE,
        (topic_id, 1): Errors.NONE,
        (nowhere, 0): Errors.UNKNOWN_TOPIC_ID,
    }
    by_name = [{"name": TOPIC, "partitions": [partition(2, 7)]}]
    assert commit_errors(commit(conn, 9, group, "m", epoch, by_name)) == {(TOPIC, 2): Errors.NONE}
    # a stale epoch, an id the group does not have, and v7 (a generation, not an epoch)
    stale = commit_errors(commit(conn, 9, group, "m", epoch + 1, by_name))
    assert stale == {(TOPIC, 2): Errors.STALE_MEMBER_EPOCH}
    stranger = commit_errors(commit(conn, 9, group, "stranger", epoch, by_name))
    assert stranger == {(TOPIC, 2): Errors.UNKNOWN_MEMBER_ID}
    old = commit_errors(commit(conn, 7, group, "m", epoch, by_name))
    assert old == {(TOPIC, 2): Errors.UNSUPPORTED_VERSION}

    def fetch(version: int, groups: list) -> dict:
        body = {"groups": groups, "require_stable": False}
        answer = conn._call(ApiKeys.OFFSET_FETCH, version, body)[1]
        return {g["group_id"]: g for g in answer["groups"]}

    asked = [{"topic_id": topic_id, "partition_indexes": [0, 1, 2, 3]},
             {"topic_id": nowhere, "partition_indexes": [0]}]  # fmt: skip
    groups = fetch(
        10,
        [
            {"group_id": group, "member_id": "m", "member_epoch": epoch, "topics": asked},
            {"group_id": "g-never", "member_id": None, "member_epoch": -1, "topics": asked},
            {"group_id": group, "member_id": "m", "member_epoch": epoch + 1, "topics": asked},
        ],
    )
    assert len(groups) == 2  # the same group twice: answered twice, the last shown here
    assert groups[group]["error_code"] == Errors.STALE_MEMBER_EPOCH
    assert groups[group]["topics"] == []
    never = {
        (t["topic_id"], p["partition_index"]): (p["committed_offset"], Errors(p["error_code"]))
        for t in groups["g-never"]["topics"]
        for p in t["partitions"]
    }
    assert never == {
        **{(topic_id, i): (-1, Errors.NONE) for i in range(4)},
        (nowhere, 0): (-1, Errors.UNKNOWN_TOPIC_ID),
    }
    (mine,) = fetch(10, [{"group_id": group, "member_id": "m", "member_epoch": epoch,
                          "topics": asked}]).values()  # fmt: skip
    assert mine["error_code"] == 0
    offsets = {
        (t["topic_id"], p["partition_index"]): (p["committed_offset"], p["metadata"])
        for t in mine["topics"]
        for p in t["partitions"]
        if p["error_code"] == 0
    }
    assert offsets == {
        (topic_id, 0): (5, "x"),
        (topic_id, 1): (6, "x"),
        (topic_id, 2): (7, "x"),
        (topic_id, 3): (-1, ""),  # nothing committed: Kafka's NO_METADATA
    }
    # v8: by name, every topic (null), no member fields
    (all_v8,) = fetch(8, [{"group_id": group, "topics": None}]).values()
    assert {
        (t["name"], p["partition_index"]): p["committed_offset"]
        for t in all_v8["topics"]
        for p in t["partitions"]
    } == {(TOPIC, 0): 5, (TOPIC, 1): 6, (TOPIC, 2): 7}
    unknown_member = fetch(9, [{"group_id": group, "member_id": "x", "member_epoch": 1,
                                "topics": None}])  # fmt: skip
    assert unknown_member[group]["error_code"] == Errors.UNKNOWN_MEMBER_ID
    assert heartbeat(conn, group, "m", -1)["error_code"] == 0
