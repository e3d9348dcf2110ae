"""A failover taken apart, and a graceful one: the phases of a SIGKILLed leader's
failover read from the processes' own events, and a rolling restart (each broker
SIGTERMed in turn: a controlled shutdown) that loses nothing and fails no send."""

from __future__ import annotations

from collections import Counter

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import assert_nothing_found, judged

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import LABS_PRODUCER, PHASES, measure_failover
from kafkalab.cluster.history import History, check
from kafkalab.cluster.workload import (
    ProducerWorkload,
    read_final_log,
    record_replicas,
    wait_for_replicas_in_sync,
)
from kafkalab.server.events import read_events


def create(cluster, topic):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})
    for future in admin.create_topics([new]).values():
        future.result(10)
    wait_for_replicas_in_sync(cluster, topic)


@pytest.fixture
def cluster(tmp_path):
    # Shorter than Kafka's, longer than the labs' 500 ms: a loaded CI machine must
    # not fence a live broker in the middle of the test.
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=1500,
        # replica.lag.time.max.ms stays Kafka's 30 s: a replica wrongly kept in the ISR
        # (say, a late AlterPartition answer putting back a broker the controller had
        # fenced, see test_partition.py) would stall acks=all sends past their 30 s
        # message.timeout.ms, and the rolling restart test would see them fail.
        broker_props={"broker.heartbeat.interval.ms": "100"},
    ) as c:
        yield c


def test_a_failover_has_every_phase_in_order(cluster):
    create(cluster, "fo")
    timeline = measure_failover(cluster, "fo", producer_config=LABS_PRODUCER)
    assert timeline.new_leader not in (-1, timeline.killed)
    assert timeline.first_ack_ms is not None, "no record was acknowledged after the kill"
    ends = timeline.phase_ends()
    assert list(ends) == list(PHASES)
    assert None not in ends.values(), ends
    # The controller fenced the dead broker, then committed the election; the new
    # leader applied it after that; the other ISR member fetched from it.
    assert 0 <= ends["session timeout"] <= ends["election"] <= ends["leader applies"]
    surviving = {1, 2, 3} - {timeline.killed, timeline.new_leader}
    assert set(timeline.followers_fetching_ms) == surviving
    table = timeline.phases()
    assert list(table.phase) == list(PHASES) and table.ms.notna().all()
    assert table["end ms"].iloc[-1] == pytest.approx(timeline.total_ms)


def test_a_rolling_restart_loses_nothing_and_fails_no_send(cluster):
    create(cluster, "roll")
    history = History()
    workload = ProducerWorkload(
        cluster.bootstrap_servers, "roll", history, acks="all", config=LABS_PRODUCER
    ).start()
    try:
        cluster.rolling_restart()
    finally:
        unknown = workload.stop()
    assert unknown == 0
    errors = Counter(op.error for op in history.ops if op.kind == "fail")
    assert workload.failed == 0, f"sends failed during the rolling restart: {errors}"
    wait_for_replicas_in_sync(cluster, "roll")
    read_final_log(cluster.bootstrap_servers, "roll", 0, history)
    record_replicas(cluster, "roll", 0, history)
    verdict = check(history)
    assert verdict.valid, verdict.summary()
    assert verdict.acknowledged == workload.acked > 0
    assert_nothing_found(judged(history))
    # Each broker asked to be fenced (a controlled shutdown) before it stopped:
    # the controller fenced every one, and no session ran out meanwhile.
    fenced = [
        e["broker"] for e in read_events(cluster.base_dir / "controller") if e["event"] == "fenced"
    ]
    assert sorted(fenced) == [1, 2, 3]
