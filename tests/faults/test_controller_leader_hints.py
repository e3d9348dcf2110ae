"""Brokers follow the quorum's leader: three controllers and three brokers as
processes; the active controller is SIGKILLed. Every broker finds the new leader (the
controllers name it in their metadata Fetch answers, CurrentLeader), and from the
moment a broker knows a live leader it asks the dead controller nothing more: its
heartbeats, AlterPartition, forwarding and metadata fetches all go to the leader.

Counted from the brokers' own records (a dead controller keeps none): each change of a
broker's known leader is an event (`controller_leader`) carrying how many requests the
broker had sent to each controller by then, and `controller-channel.json` carries the
counts since (controller_channel.py)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import partition_state, wait_until

from kafkalab.cluster import LocalCluster
from kafkalab.server.controller_channel import read_controller_state
from kafkalab.server.events import read_events


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(
        brokers=3,
        controllers=3,
        base_dir=tmp_path,
        # Kafka's quorum timeouts: no election but the one the kill starts, even on a
        # loaded machine (another would send the brokers looking for a leader again)
        session_timeout_ms=3000,
    ) as c:
        yield c


def _states(cluster) -> dict[int, dict | None]:
    return {b: read_controller_state(cluster.broker_dir(b)) for b in cluster.brokers}


def _all_on(cluster, controller: int) -> dict[int, dict] | None:
    states = _states(cluster)
    if all(s is not None and s["leader"] == str(controller) for s in states.values()):
        return states  # type: ignore[return-value]
    return None


def test_brokers_follow_the_new_leader_and_leave_the_dead_one(cluster):
    first = cluster.active_controller(timeout_s=20)
    wait_until(lambda: _all_on(cluster, first))
    killed_at_ms = time.time() * 1000
    cluster.kill(first)
    new = wait_until(
        lambda: (lambda q: q.leader_id if q.leader_id != first else None)(
            cluster.describe_quorum(timeout_s=20)
        ),
        timeout=30,
    )
    # every broker talks to the new leader, and works through it: a topic created
    # (forwarded), its partitions led and replicated (the brokers' metadata fetches)
    wait_until(lambda: _all_on(cluster, new), timeout=30)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic("after", 1, 3)]).values():
        future.result(20)
    wait_until(lambda: partition_state(cluster.bootstrap_servers, "after")[1] == [1, 2, 3])

    dead = str(first)
    for broker in cluster.brokers:
        events = [
            e
            for e in read_events(cluster.broker_dir(broker))
            if e["event"] == "controller_leader" and e["time_ms"] >= killed_at_ms
        ]
        found = next((i for i, e in enumerate(events) if e["controller"] == str(new)), None)
        assert found is not None, (broker, events)
        assert events[-1]["controller"] == str(new), (broker, events)
        # once a hint named the new leader, more requests went to it and none at all to
        # the dead controller: not from a later change of mind, not since
        at = events[found]["sent"]
        assert [e["sent"][dead] for e in events[found:]] == [at[dead]] * len(events[found:])
        state = wait_until(
            lambda broker=broker, at=at: (
                lambda s: s if s["sent"][str(new)] > at[str(new)] + 20 else None
            )(read_controller_state(cluster.broker_dir(broker))),
            timeout=30,
        )
        assert state["leader"] == str(new)
        assert state["sent"][dead] == at[dead], (broker, events[found], state)
