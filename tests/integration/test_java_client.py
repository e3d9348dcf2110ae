"""Kafka's own Java client (kafka-clients 4.3) against a kafkalab broker.

The client runs as a separate JVM through tests/java/KafkaPeer.java (built and
cached by java_peer.py; skipped with the reason when there is no JDK or the jars
cannot be fetched). Each test checks what the Java client sees record by record:
the producer's acknowledged offsets are the offsets the consumer reads back.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition
from java_peer import JavaPeerProcess, java_peer, require_java_peer, wait_for_all

from kafkalab.client import Admin
from kafkalab.server.broker import BrokerThread


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    require_java_peer()
    with BrokerThread({"log.dirs": str(tmp_path_factory.mktemp("java"))}) as b:
        yield b


def create_topic(bs: str, topic: str, partitions: int, *configs: str) -> dict:
    args = ["--topics", topic, "--partitions", str(partitions)]
    if configs:
        args += ["--topic-config", ",".join(configs)]
    (created,) = java_peer("admin", "createTopics", "--bootstrap", bs, *args)
    assert created["error"] is None, created
    return created


def of_kind(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["event"] == kind]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_idempotent_compressed_produce_reads_back_exactly(broker, codec):
    bs, topic = broker.bootstrap_servers, f"java-{codec}"
    create_topic(bs, topic, 3)
    sent = of_kind(
        java_peer(
            "produce", "--bootstrap", bs, "--topic", topic, "--count", "300",
            "--acks", "all", "--idempotence", "true", "--compression", codec,
        ),
        "sent",
    )  # fmt: skip
    assert len(sent) == 300
    consumed = java_peer("consume", "--bootstrap", bs, "--topic", topic, "--to-end", "true")
    got = of_kind(consumed, "record")
    by_position = {(r["partition"], r["offset"]): r for r in got}
    assert len(by_position) == len(got) == 300, "a record read twice or lost"
    for s in sent:
        r = by_position[(s["partition"], s["offset"])]
        assert (r["key"], r["value"], r["timestamp"]) == (s["key"], s["value"], s["timestamp"])
        assert r["headers"] == {"n": s["key"].removeprefix("key-")}
    # Offsets of each partition are dense from 0: nothing skipped, nothing doubled.
    for p in range(3):
        offsets = sorted(o for (q, o) in by_position if q == p)
        assert offsets == list(range(len(offsets)))


def latest_assignment(member: JavaPeerProcess) -> set[int]:
    assigned: set[int] = set()
    for e in member.events:
        if e["event"] == "assigned":
            assigned |= {p["partition"] for p in e["partitions"]}
        elif e["event"] == "revoked":
            assigned -= {p["partition"] for p in e["partitions"]}
    return assigned


def listed_group(bs: str, group: str) -> dict:
    """The group as the Java Admin's listConsumerGroups (ListGroups v5) shows it."""
    (listing,) = java_peer("admin", "listConsumerGroups", "--bootstrap", bs)
    (g,) = [g for g in listing["groups"] if g["groupId"] == group]
    return {"state": g["state"], "type": g["type"]}


def committed_offsets(bs: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def test_classic_group_of_two_java_members_shares_and_commits(broker):
    bs, topic, group = broker.bootstrap_servers, "java-classic", "java-classic-group"
    create_topic(bs, topic, 4)
    member_args = [
        "--bootstrap", bs, "--topic", topic, "--group", group, "--protocol", "classic",
        "--commit", "sync", "--stop-on-stdin", "true",
    ]  # fmt: skip
    with JavaPeerProcess("consume", *member_args, "--client-id", "a") as a:
        a.wait_for(lambda _: latest_assignment(a) == {0, 1, 2, 3})
        with JavaPeerProcess("consume", *member_args, "--client-id", "b") as b:
            # The second member's join rebalances the group: the four partitions split.
            def split() -> bool:
                mine, theirs = latest_assignment(a), latest_assignment(b)
                return (
                    bool(mine)
                    and bool(theirs)
                    and not mine & theirs
                    and mine | theirs == {0, 1, 2, 3}
                )

            wait_for_all([a, b], split, timeout=90)
            split_a, split_b = latest_assignment(a), latest_assignment(b)
            assert listed_group(bs, group) == {"state": "STABLE", "type": "CLASSIC"}
            sent = of_kind(
                java_peer("produce", "--bootstrap", bs, "--topic", topic, "--count", "200"),
                "sent",
            )

            def union_complete() -> bool:
                return len(a.records()) + len(b.records()) >= len(sent)

            wait_for_all([a, b], union_complete, timeout=90)
            b.stop()
        a.stop()
    # Nothing was produced before the split, so each member read its own partitions only.
    for member, mine in ((a, split_a), (b, split_b)):
        assert member.records(), f"member {member.name} read nothing"
        assert {r["partition"] for r in member.records()} <= mine
    got = {(r["partition"], r["offset"]) for m in (a, b) for r in m.records()}
    assert got == {(s["partition"], s["offset"]) for s in sent}
    assert len(a.records()) + len(b.records()) == len(sent), "a record was read twice"
    ends = {p: 0 for p in range(4)}
    for s in sent:
        ends[s["partition"]] = max(ends[s["partition"]], s["offset"] + 1)
    assert committed_offsets(bs, group, topic, 4) == ends


def test_transactions_commit_and_abort_seen_by_read_committed(broker):
    bs, topic = broker.bootstrap_servers, "java-txn"
    create_topic(bs, topic, 2)
    txns = of_kind(
        java_peer(
            "transactions", "--bootstrap", bs, "--topic", topic, "--transactional-id", "java-tx",
            "--transactions", "6", "--records-per-txn", "5", "--pattern", "cca",
        ),
        "txn",
    )  # fmt: skip
    assert [t["outcome"] for t in txns] == ["commit", "commit", "abort"] * 2
    committed = {r["value"] for t in txns if t["outcome"] == "commit" for r in t["records"]}
    aborted = {r["value"] for t in txns if t["outcome"] == "abort" for r in t["records"]}
    assert len(committed) == 20 and len(aborted) == 10

    def read(isolation: str) -> list[dict]:
        events = java_peer(
            "consume", "--bootstrap", bs, "--topic", topic, "--to-end", "true",
            "--isolation", isolation,
        )  # fmt: skip
        return of_kind(events, "record")

    read_committed = read("read_committed")
    assert sorted(r["value"] for r in read_committed) == sorted(committed)
    read_uncommitted = read("read_uncommitted")
    assert sorted(r["value"] for r in read_uncommitted) == sorted(committed | aborted)
    # DescribeProducers: the transactional producer, its transactions all ended
    states = java_peer(
        "admin", "describeProducers", "--bootstrap", bs, "--topic", topic, "--partitions", "0,1"
    )
    producers = [p for s in of_kind(states, "producers") for p in s["producers"]]
    assert producers and {p["currentTransactionStartOffset"] for p in producers} == {None}
    assert len({p["producerId"] for p in producers}) == 1


def test_admin_describe_cluster_create_topics_describe_configs(broker):
    bs = broker.bootstrap_servers
    (cluster,) = java_peer("admin", "describeCluster", "--bootstrap", bs)
    host, port = bs.rsplit(":", 1)
    assert cluster["nodes"] == [{"id": 1, "host": host, "port": int(port), "rack": None}]
    assert cluster["controller"]["id"] == 1
    assert cluster["clusterId"]

    create_topic(bs, "java-admin", 2, "retention.ms=123456", "cleanup.policy=compact")
    (again,) = java_peer(
        "admin", "createTopics", "--bootstrap", bs, "--topics", "java-admin", "--partitions", "2"
    )
    assert again["error"] == "TopicExistsException"

    (listing,) = java_peer("admin", "listTopics", "--bootstrap", bs)
    assert "java-admin" in {t["name"] for t in listing["topics"]}

    (configs,) = java_peer(
        "admin", "describeConfigs", "--bootstrap", bs, "--type", "topic", "--names", "java-admin"
    )
    entries = configs["entries"]
    assert entries["retention.ms"]["value"] == "123456"
    assert entries["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert entries["cleanup.policy"]["value"] == "compact"
    assert entries["segment.bytes"]["source"] == "DEFAULT_CONFIG"


def test_without_a_jdk_the_peer_is_unavailable_with_the_reason(monkeypatch, tmp_path):
    import java_peer as peer

    monkeypatch.setenv("PATH", str(tmp_path))  # no java, no javac
    monkeypatch.setenv("KAFKALAB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(peer.JavaPeerUnavailable, match="`java` is not on PATH"):
        peer._build_peer()
    assert not (tmp_path / "cache").exists(), "nothing is fetched without a JDK"


def test_kip848_group_of_two_java_members_shares_commits_and_hands_over(broker):
    """group.protocol=consumer: ConsumerGroupHeartbeat, OffsetCommit and OffsetFetch
    v10 with member epochs and topic ids. Two members split the topic and commit
    what they read; one leaves; the other takes its partitions over from the
    committed offsets: every record read once, none lost."""
    bs, topic, group = broker.bootstrap_servers, "java-kip848", "java-kip848-group"
    create_topic(bs, topic, 4)
    member_args = [
        "--bootstrap", bs, "--topic", topic, "--group", group, "--protocol", "consumer",
        "--commit", "sync", "--stop-on-stdin", "true",
    ]  # fmt: skip
    everything = {0, 1, 2, 3}
    with JavaPeerProcess("consume", *member_args, "--client-id", "a") as a:
        a.wait_for(lambda _: latest_assignment(a) == everything, timeout=90)
        with JavaPeerProcess("consume", *member_args, "--client-id", "b") as b:

            def split() -> bool:
                mine, theirs = latest_assignment(a), latest_assignment(b)
                return (
                    bool(mine)
                    and bool(theirs)
                    and not mine & theirs
                    and mine | theirs == everything
                )

            wait_for_all([a, b], split, timeout=90)
            split_a, split_b = latest_assignment(a), latest_assignment(b)
            with Admin(bs) as admin:
                described = admin.describe_consumer_group(group)
            assert {m.client_id for m in described.members} == {"a", "b"}
            owned = {m.client_id: {p for _, p in m.partitions} for m in described.members}
            assert owned == {"a": split_a, "b": split_b}
            assert listed_group(bs, group) == {"state": "STABLE", "type": "CONSUMER"}

            first = of_kind(
                java_peer("produce", "--bootstrap", bs, "--topic", topic, "--count", "200"),
                "sent",
            )
            wait_for_all(
                [a, b], lambda: len(a.records()) + len(b.records()) >= len(first), timeout=90
            )
            b.stop()  # commits what it read (it committed after each poll) and leaves
        assert {r["partition"] for r in b.records()} <= split_b
        assert {r["partition"] for r in a.records()} <= split_a
        a.wait_for(lambda _: latest_assignment(a) == everything, timeout=90)
        second = of_kind(
            java_peer(
                "produce", "--bootstrap", bs, "--topic", topic, "--count", "200",
                "--key-prefix", "second-",
            ),
            "sent",
        )  # fmt: skip
        sent = first + second
        a.wait_for(lambda _: len(a.records()) + len(b.records()) >= len(sent), timeout=90)
        a.stop()
    read = [(r["partition"], r["offset"]) for m in (a, b) for r in m.records()]
    assert sorted(read) == sorted((s["partition"], s["offset"]) for s in sent)
    assert len(read) == len(set(read)), "a record was read twice"
    # b's partitions: a read only the second batch there, from b's committed offsets
    taken_over = [r for r in a.records() if r["partition"] in split_b]
    assert taken_over and all(r["key"].startswith("second-") for r in taken_over)
    ends = {p: 0 for p in everything}
    for s in sent:
        ends[s["partition"]] = max(ends[s["partition"]], s["offset"] + 1)
    assert committed_offsets(bs, group, topic, 4) == ends
