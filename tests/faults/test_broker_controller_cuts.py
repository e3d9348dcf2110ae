"""A link between a broker and a controller cut one way, on a 3-broker cluster with one
controller and with three (the cut from the active one), then healed (link_faults.py):

    controller deaf to broker 2   its heartbeats never arrive: the controller fences
                                  it after the session timeout (its replica leaves
                                  the ISR); healed, it is unfenced and back in the ISR
    broker 2 deaf to controller   its heartbeats arrive and keep it unfenced, but it
                                  learns nothing: a topic created meanwhile is unknown
                                  to it; healed, it learns it and replicates it
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import partition_state, wait_until

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.local_cluster import SINGLE_CONTROLLER_ID
from kafkalab.server.controller_channel import read_controller_state
from kafkalab.server.events import read_events

SESSION_TIMEOUT_MS = 3000
CUT = 2  # the broker cut from the (active) controller


@pytest.fixture(params=[1, 3], ids=["one-controller", "three-controllers"])
def cluster(request, tmp_path):
    with LocalCluster(
        brokers=3,
        controllers=request.param,
        base_dir=tmp_path,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        broker_props={"replica.lag.time.max.ms": "2000"},
        controller_props={
            "controller.quorum.election.timeout.ms": "500",
            "controller.quorum.fetch.timeout.ms": "1000",
            "controller.quorum.request.timeout.ms": "800",
        },
    ) as c:
        yield c


def _active(cluster) -> tuple[int, object]:
    """The active controller's node id and data directory."""
    if not cluster.controllers:
        return SINGLE_CONTROLLER_ID, cluster.controller.dir
    leader = cluster.active_controller(timeout_s=20)
    return leader, cluster.controllers[leader].dir


def _bootstrap(cluster, broker: int) -> str:
    return cluster.brokers[broker].bootstrap_servers


def _alive(cluster, asking: int) -> set[int]:
    """The unfenced brokers, as broker `asking` knows them (Metadata)."""
    md = AdminClient({"bootstrap.servers": _bootstrap(cluster, asking)}).list_topics(timeout=10)
    return set(md.brokers)


def _knows(cluster, broker: int, topic: str) -> bool:
    md = AdminClient({"bootstrap.servers": _bootstrap(cluster, broker)}).list_topics(timeout=10)
    return topic in md.topics and not md.topics[topic].error


def _fenced_since(controller_dir, broker: int, since_ms: float) -> bool:
    return any(
        e["event"] == "fenced" and e["broker"] == broker and e["time_ms"] >= since_ms
        for e in read_events(controller_dir)
    )


def _create(cluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": _bootstrap(cluster, 1)})
    for future in admin.create_topics([NewTopic(topic, 1, 3)]).values():
        future.result(20)


def test_a_controller_deaf_to_a_broker_fences_it(cluster):
    _create(cluster, "t")
    wait_until(lambda: partition_state(cluster.bootstrap_servers, "t")[1] == [1, 2, 3])
    controller, controller_dir = _active(cluster)
    cut_at = time.time() * 1000
    cluster.cut_link(CUT, controller, both_ways=False)  # the controller stops hearing 2
    wait_until(lambda: _fenced_since(controller_dir, CUT, cut_at), timeout=30)
    wait_until(lambda: _alive(cluster, 1) == {1, 3}, timeout=30)
    wait_until(lambda: CUT not in partition_state(_bootstrap(cluster, 1), "t")[1], timeout=30)
    cluster.heal_links()
    wait_until(lambda: _alive(cluster, 1) == {1, 2, 3}, timeout=30)
    wait_until(lambda: partition_state(_bootstrap(cluster, 1), "t")[1] == [1, 2, 3], timeout=30)


def test_a_broker_deaf_to_a_controller_goes_stale_but_stays_unfenced(cluster):
    controller, controller_dir = _active(cluster)
    cut_at = time.time() * 1000
    cluster.cut_link(controller, CUT, both_ways=False)  # broker 2 stops hearing it
    wait_until(
        lambda: (
            str(controller)
            in (read_controller_state(cluster.broker_dir(CUT)) or {}).get("unreachable", [])
        ),
        timeout=30,
    )
    _create(cluster, "stale")
    wait_until(lambda: _knows(cluster, 1, "stale") and _knows(cluster, 3, "stale"))
    # twice the session timeout: a broker whose heartbeats stopped would be fenced by now
    time.sleep(2 * SESSION_TIMEOUT_MS / 1000)
    assert not _fenced_since(controller_dir, CUT, cut_at)
    assert _alive(cluster, 1) == {1, 2, 3}
    assert not _knows(cluster, CUT, "stale")  # it learned nothing since the cut
    state = read_controller_state(cluster.broker_dir(CUT))
    assert state is not None and str(controller) in state["unreachable"], state
    cluster.heal_links()
    wait_until(lambda: _knows(cluster, CUT, "stale"), timeout=30)
    wait_until(lambda: partition_state(_bootstrap(cluster, 1), "stale")[1] == [1, 2, 3], timeout=30)
    assert not _fenced_since(controller_dir, CUT, cut_at)
