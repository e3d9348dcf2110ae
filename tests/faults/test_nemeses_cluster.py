"""Nemeses on real processes (kafkalab.server.link_faults, LocalCluster's fault API):
links cut in both kinds of failure, refused and silently dropped; clients cut off
from a broker; Jepsen's topologies (kafkalab.cluster.nemesis) under load."""

from __future__ import annotations

import logging
import time

import pytest
from faults_helpers import controller_isr, controller_isr_history, wait_until
from test_checked_histories import create

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.local_cluster import SINGLE_CONTROLLER_ID
from kafkalab.server.events import read_events
from kafkalab.server.link_faults import CutMode
from kafkalab.server.quorum_meta_log_listener import metadata_image_log_dir

LAG_MS = 4000  # replica.lag.time.max.ms
SOCKET_TIMEOUT_MS = 2000  # replica.socket.timeout.ms: a fetcher's request timeout


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=3000,
        broker_props={
            "replica.lag.time.max.ms": str(LAG_MS),
            "replica.socket.timeout.ms": str(SOCKET_TIMEOUT_MS),
        },
    ) as c:
        yield c


def isr_shrinks(cluster, topic: str) -> list[dict]:
    controller_dir = cluster.base_dir / "controller"
    return [
        e
        for e in read_events(controller_dir)
        if e["event"] == "partition_change" and e["topic"] == topic and len(e["isr"]) < 3
    ]


@pytest.mark.parametrize("mode", [CutMode.REFUSE, CutMode.DROP])
def test_a_follower_behind_a_cut_link_leaves_the_isr_after_the_lag_time(cluster, mode):
    """Leader 1 deaf to follower 3. Refused, 3's fetches fail at once and it retries;
    dropped, each of its fetches waits out replica.socket.timeout.ms, recorded in
    its events as a request that timed out. Either way the leader hears nothing from
    3 and takes it out of the ISR only after replica.lag.time.max.ms, not at once;
    healed, it comes back."""
    create(cluster, "dropped", replicas=(1, 2, 3))
    cut_ms = time.time() * 1000
    cluster.cut_link(3, 1, both_ways=False, mode=mode)
    wait_until(lambda: controller_isr(cluster, "dropped") == [1, 2], timeout=60)
    [shrink, *_] = isr_shrinks(cluster, "dropped")
    # 3's last fetch that reached 1 was at most one replica.fetch.wait.max.ms
    # (500 ms) before the cut: the shrink comes a lag time after it
    assert shrink["time_ms"] - cut_ms >= LAG_MS - 1000, (shrink, cut_ms)
    timeouts = [
        e
        for e in read_events(cluster.broker_dir(3))
        if e["event"] == "request_timed_out" and e["time_ms"] > cut_ms
    ]
    if mode == CutMode.DROP:
        assert timeouts, "a dropped fetch times out"
        assert {(e["leader"], e["api"], e["timeout_ms"]) for e in timeouts} == {
            (1, "FETCH", SOCKET_TIMEOUT_MS)
        }
        # the first fetch the leader dropped was sent after the cut
        assert timeouts[0]["time_ms"] - cut_ms >= SOCKET_TIMEOUT_MS - 100
    else:
        assert timeouts == [], "a refused fetch fails at once, it does not time out"
    cluster.heal_links()
    wait_until(lambda: controller_isr(cluster, "dropped") == [1, 2, 3], timeout=60)


def test_an_idempotent_producer_cut_off_from_the_leader_by_drops_times_out_then_lands_once(
    cluster,
):
    """librdkafka (acks=all, idempotent) partitioned from the partition's leader in
    drop mode: its Produce is never answered, so it waits out socket.timeout.ms and
    reports the request timed out (then disconnects and retries); another client
    still writes through the same broker. Healed, the record is either acknowledged
    or reported failed, and the log holds it at most once, exactly once if
    acknowledged."""
    from confluent_kafka import Producer

    from kafkalab.cluster.history import History
    from kafkalab.cluster.workload import read_final_log

    create(cluster, "cutoff", replicas=(1, 2, 3), configs={"min.insync.replicas": "2"})
    logged: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logged.append(record.getMessage())

    rdkafka_log = logging.getLogger("nemeses.librdkafka")
    rdkafka_log.addHandler(Collect())
    rdkafka_log.setLevel(logging.DEBUG)
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "client.id": "p1-producer",
            "enable.idempotence": True,
            "acks": "all",
            "socket.timeout.ms": 2000,
            "message.timeout.ms": 60000,
            "logger": rdkafka_log,
        }
    )
    other = Producer({"bootstrap.servers": cluster.bootstrap_servers, "client.id": "p2-other"})
    reports: dict[bytes, object] = {}

    def report(err, msg):
        reports[msg.value()] = err if err is not None else msg.offset()

    try:
        producer.produce("cutoff", b"before", partition=0, on_delivery=report)
        assert producer.flush(30) == 0 and reports[b"before"] == 0
        cluster.isolate_clients(1, mode=CutMode.DROP, client_id_prefix="p1-")
        producer.produce("cutoff", b"during", partition=0, on_delivery=report)
        # librdkafka's own words: "Timed out ProduceRequest in flight (after 20xx ms)"
        wait_until(
            lambda: (
                producer.poll(0.2) is not None
                and any("Timed out ProduceRequest" in line for line in logged)
            ),
            timeout=30,
        )
        assert b"during" not in reports, "nothing answered it while the link dropped"
        other.produce("cutoff", b"another client", partition=0)
        assert other.flush(30) == 0, "a client of another prefix is still heard"
        cluster.heal_links()
        assert producer.flush(60) == 0
        during = reports[b"during"]
        history = History()
        log = [
            value for _, value in read_final_log(cluster.bootstrap_servers, "cutoff", 0, history)
        ]
        if isinstance(during, int):
            assert log.count(b"during") == 1 and log[during] == b"during"
        else:
            assert log.count(b"during") <= 1, during
        assert log.count(b"before") == 1
    finally:
        cluster.heal_links()
        producer.flush(10)
        other.flush(10)


def test_the_cluster_command_line_cuts_with_drops_isolates_clients_and_steps_clocks(tmp_path):
    import subprocess
    import sys

    def run(*args, timeout=120):
        done = subprocess.run(
            [sys.executable, "-m", "kafkalab", "cluster", *args, "--dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    run("up", "--brokers", "2")
    try:
        assert run("cut", "1", "2", "--mode", "drop").splitlines() == [
            "broker 2 no longer hears broker 1 (dropped)",
            "broker 1 no longer hears broker 2 (dropped)",
        ]
        out = run("isolate-clients", "2", "--mode", "drop", "--client-id-prefix", "p1-")
        assert out.strip() == "broker 2 no longer hears clients p1-* (drop)"
        status = run("status").splitlines()
        [broker_2] = [line for line in status if line.startswith("broker 2\t")]
        assert "does not hear [1] (dropped: [1])" in broker_2
        assert "does not hear clients p1-* (drop)" in broker_2
        run("heal")
        assert "does not hear" not in run("status")
        assert run("clock", "2", "--step", "-3600").strip() == "2: clock stepped -3600 s"
        assert run("clock", "3001", "--skew", "2").strip() == "3001: clock runs at 2x"
        status = run("status").splitlines()
        assert any(line.startswith("broker 2\t") and "clock -3600 s" in line for line in status)
        assert any(line.startswith("controller\t") and "2x" in line for line in status)
        run("clock", "2", "--reset")
        run("clock", "3001", "--reset")
        assert "clock" not in run("status")
    finally:
        run("down")


def test_a_majorities_ring_under_acks_all_load_loses_nothing_acknowledged(cluster):
    """Jepsen's majorities ring on three brokers (each hears itself and one other,
    no two the same: one-way cuts around the ring), dropped and then refused, under
    an idempotent acks=all producer (RF=3, min.insync.replicas=2). The ring shrinks
    the ISR; healed, every acknowledged record is in the log once, as the checker
    (kafkalab.cluster.checker, from the recorded history) judges it."""
    import random

    from kafkalab.cluster.checker import check, from_history
    from kafkalab.cluster.history import History
    from kafkalab.cluster.nemesis import Topology, heard_by, nemesis_for
    from kafkalab.cluster.workload import (
        ProducerWorkload,
        read_final_log,
        wait_for_replicas_in_sync,
    )

    create(cluster, "ring", replicas=(1, 2, 3), configs={"min.insync.replicas": "2"})
    history = History()
    rng = random.Random(26)
    applied = []
    workload = ProducerWorkload(cluster.bootstrap_servers, "ring", history, acks="all", rate=200)
    with workload:
        for mode in (CutMode.DROP, CutMode.REFUSE):
            time.sleep(1.5)
            nemesis = nemesis_for(cluster, Topology.MAJORITIES_RING, rng, mode)
            heard = heard_by(nemesis.pairs, [1, 2, 3])
            assert sorted(map(len, heard.values())) == [2, 2, 2], nemesis.describe()
            nemesis.apply(cluster)
            applied.append(nemesis.describe())
            wait_until(lambda: len(controller_isr(cluster, "ring")) < 3, timeout=60)
            time.sleep(2)
            nemesis.heal(cluster)
            wait_until(lambda: controller_isr(cluster, "ring") == [1, 2, 3], timeout=60)
        time.sleep(1)
    wait_for_replicas_in_sync(cluster, "ring")
    read_final_log(cluster.bootstrap_servers, "ring", 0, history)
    ops, settings = from_history(history)
    verdict = check(ops, settings)
    assert verdict.valid, (applied, verdict.summary())
    assert workload.acked > 300, verdict.summary()
    for anomaly in ("lost-write", "unseen", "duplicate", "inconsistent-offsets"):
        assert not verdict.anomalies.get(anomaly), verdict.summary()
    assert any(len(isr) < 3 for isr in controller_isr_history(cluster, "ring"))


def test_clocks_stepped_an_hour_stamp_records_by_it_and_time_nothing_out(cluster):
    """Leader 1's wall clock an hour back, the controller's an hour ahead. Records of
    a LogAppendTime topic are stamped by the leader's clock, so their timestamps show
    the step, and the controller's metadata batches carry its own. Timers run on a
    monotonic clock: no broker is fenced, the ISR stays whole while every follower
    keeps up, and a paused follower still leaves the ISR after
    replica.lag.time.max.ms (on the stepped wall clock it would stay an hour)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from kafkalab.records import iter_batches

    create(cluster, "clock", configs={"message.timestamp.type": "LogAppendTime"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})

    def produce(value: bytes) -> None:
        producer.produce("clock", value, partition=0)
        assert producer.flush(30) == 0

    def timestamps() -> dict[bytes, int]:
        consumer = Consumer(
            {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "clock-reader"}
        )
        consumer.assign([TopicPartition("clock", 0, 0)])
        out = {}
        try:
            while len(out) < 2:
                msg = consumer.poll(10)
                assert msg is not None and msg.error() is None
                out[msg.value()] = msg.timestamp()[1]
        finally:
            consumer.close()
        return out

    produce(b"before")
    stepped_ms = time.time() * 1000
    cluster.clock_step(1, -3600)
    cluster.clock_step(SINGLE_CONTROLLER_ID, 3600)
    time.sleep(0.5)  # the processes look at their clock.json every 50 ms
    produce(b"after")
    ts = timestamps()
    assert 3_590_000 < ts[b"before"] - ts[b"after"] <= 3_600_000, ts
    time.sleep(2 * LAG_MS / 1000)  # twice the lag time, twice the session timeout
    assert controller_isr(cluster, "clock") == [1, 2, 3]
    assert not [e for e in read_events(cluster.base_dir / "controller") if e["event"] == "fenced"]
    cluster.pause(3)
    try:
        wait_until(lambda: controller_isr(cluster, "clock") == [1, 2], timeout=60)
    finally:
        cluster.resume(3)
    [shrink, *_] = isr_shrinks(cluster, "clock")
    assert shrink["time_ms"] > stepped_ms  # events stay on the real clock
    # the committed records as the controller wrote them (what brokers fetch)
    metadata = metadata_image_log_dir(cluster.base_dir / "controller")
    newest = max(
        batch.header.max_timestamp
        for path in metadata.glob("*.log")
        for batch in iter_batches(path.read_bytes())
    )
    assert newest - time.time() * 1000 > 3_500_000, "the controller's batches an hour ahead"
    cluster.clock_reset()
    wait_until(lambda: controller_isr(cluster, "clock") == [1, 2, 3], timeout=60)
