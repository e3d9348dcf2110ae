"""Every broker fenced at once under an idempotent acks=all librdkafka load: no duplicate.

The soak once found one record written twice (README, Benchmarks, soak: v-42834) when a
newly active controller fenced every broker at once: the leader answered an acks=all
batch NOT_LEADER_OR_FOLLOWER, librdkafka sent the same batch again, and the next
leader appended it a second time. Here the single controller stops hearing every
broker (`cut_link(broker, controller, both_ways=False)`) for longer than the session
timeout: it fences all three (each leaves the ISR but the last, and the partition
has no leader), while the brokers, deaf to it too, go on serving the stale
leadership; healed, they learn of the fences at once (every in-flight acks=all
batch answered NOT_LEADER_OR_FOLLOWER), are unfenced by their next heartbeats, and
the last ISR member leads again. Three rounds; then the partition is read back and
the history checker must find nothing: no duplicate, no loss, replicas byte-identical.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import assert_nothing_found, controller_isr, judged, wait_until

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import LABS_PRODUCER
from kafkalab.cluster.history import History, check
from kafkalab.cluster.local_cluster import SINGLE_CONTROLLER_ID
from kafkalab.cluster.workload import (
    ProducerWorkload,
    read_final_log,
    record_replicas,
    wait_for_replicas_in_sync,
)
from kafkalab.server.events import read_events

TOPIC = "fenced"
BROKERS = (1, 2, 3)
SESSION_TIMEOUT_MS = 1000
ROUNDS = 3
#: librdkafka drops every broker it knows when Metadata lists none (every broker
#: fenced) and bootstraps again after this long (its default: 5 minutes)
PRODUCER = {
    **LABS_PRODUCER,
    "metadata.recovery.rebootstrap.trigger.ms": 1000,
    "message.timeout.ms": 120_000,
}


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        broker_props={"replica.lag.time.max.ms": "10000"},
    ) as c:
        yield c


def _fenced_since(cluster, since_ms: float) -> set[int]:
    """The brokers the controller fenced since `since_ms` (its events log)."""
    return {
        e["broker"]
        for e in read_events(cluster.controller.dir)
        if e["event"] == "fenced" and e["time_ms"] >= since_ms
    }


def test_no_duplicate_when_every_broker_is_fenced_at_once(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})
    for future in admin.create_topics([new]).values():
        future.result(30)
    del admin
    wait_for_replicas_in_sync(cluster, TOPIC)
    history = History()
    workload = ProducerWorkload(
        cluster.bootstrap_servers, TOPIC, history, acks="all", rate=300, config=PRODUCER
    )
    with workload:
        for _ in range(ROUNDS):
            time.sleep(1.5)
            acked = workload.acked
            cut_at = time.time() * 1000
            for broker in BROKERS:  # the controller hears no broker: no heartbeat arrives
                cluster.cut_link(broker, SINGLE_CONTROLLER_ID, both_ways=False)
            wait_until(lambda t=cut_at: _fenced_since(cluster, t) == set(BROKERS), timeout=60)
            cluster.heal_links()
            wait_until(lambda: controller_isr(cluster, TOPIC) == list(BROKERS), timeout=60)
            wait_until(lambda a=acked: workload.acked > a + 100, timeout=60)  # writing again
    assert workload.failed == 0, workload.failed_by_error
    leaderless = [
        e
        for b in BROKERS
        for e in read_events(cluster.broker_dir(b))
        if e["event"] == "follower" and e.get("topic") == TOPIC and e["leader"] == -1
    ]
    assert leaderless, "no broker saw the partition without a leader: the fault did not happen"
    wait_for_replicas_in_sync(cluster, TOPIC)
    read_final_log(cluster.bootstrap_servers, TOPIC, 0, history)
    record_replicas(cluster, TOPIC, 0, history)
    verdict = check(history)
    assert not verdict.duplicated, verdict.summary()
    assert verdict.valid, verdict.summary()
    assert verdict.acknowledged > 1000
    assert len(history.replicas[(TOPIC, 0)]) == 3  # three replicas compared byte for byte
    assert_nothing_found(judged(history))
