"""Nemeses on real processes (kafkalab.server.link_faults, LocalCluster's fault API):
links cut in both kinds of failure, refused and silently dropped; clients cut off
from a broker; Jepsen's topologies (kafkalab.cluster.nemesis) under load."""

from __future__ import annotations

import time

import pytest
from faults_helpers import controller_isr, wait_until
from test_checked_histories import create

from kafkalab.cluster import LocalCluster
from kafkalab.server.events import read_events
from kafkalab.server.link_faults import CutMode

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
