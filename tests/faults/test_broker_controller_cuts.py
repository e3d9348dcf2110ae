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
        # the quorum on Kafka's timeouts: no election on a loaded machine moves the
        # active controller away from the cut while the test looks
        broker_props={"replica.lag.time.max.ms": "2000"},
    ) as c:
        yield c


def _active(cluster) -> int:
    """The active controller's node id."""
    if not cluster.controllers:
        return SINGLE_CONTROLLER_ID
    return cluster.active_controller(timeout_s=20)


def _controller_dirs(cluster) -> list:
    if not cluster.controllers:
        return [cluster.controller.dir]
    return [p.dir for p in cluster.controllers.values()]


def _bootstrap(cluster, broker: int) -> str:
    return cluster.brokers[broker].bootstrap_servers


def _alive(cluster, asking: int) -> set[int]:
    """The unfenced brokers, as broker `asking` knows them (Metadata)."""
    md = AdminClient({"bootstrap.servers": _bootstrap(cluster, asking)}).list_topics(timeout=10)
    return set(md.brokers)


def _knows(cluster, broker: int, topic: str) -> bool:
    md = AdminClient({"bootstrap.servers": _bootstrap(cluster, broker)}).list_topics(timeout=10)
    return topic in md.topics and not md.topics[topic].error


def _fenced_since(cluster, broker: int, since_ms: float) -> bool:
    """Did any controller fence `broker` since `since_ms`?"""
    return any(
        e["event"] == "fenced" and e["broker"] == broker and e["time_ms"] >= since_ms
        for d in _controller_dirs(cluster)
        for e in read_events(d)
    )


def _create(cluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": _bootstrap(cluster, 1)})
    for future in admin.create_topics([NewTopic(topic, 1, 3)]).values():
        future.result(20)


def test_a_controller_deaf_to_a_broker_fences_it(cluster):
    _create(cluster, "t")
    wait_until(lambda: partition_state(cluster.bootstrap_servers, "t")[1] == [1, 2, 3])
    controller = _active(cluster)
    cut_at = time.time() * 1000
    cluster.cut_link(CUT, controller, both_ways=False)  # the controller stops hearing 2
    wait_until(lambda: _fenced_since(cluster, CUT, cut_at), timeout=60)
    wait_until(lambda: _alive(cluster, 1) == {1, 3}, timeout=60)
    wait_until(lambda: CUT not in partition_state(_bootstrap(cluster, 1), "t")[1], timeout=60)
    cluster.heal_links()
    wait_until(lambda: _alive(cluster, 1) == {1, 2, 3}, timeout=60)
    wait_until(lambda: partition_state(_bootstrap(cluster, 1), "t")[1] == [1, 2, 3], timeout=60)


def test_a_broker_deaf_to_a_controller_goes_stale_but_stays_unfenced(cluster):
    controller = _active(cluster)
    cut_at = time.time() * 1000
    cluster.cut_link(controller, CUT, both_ways=False)  # broker 2 stops hearing it
    wait_until(
        lambda: (
            str(controller)
            in (read_controller_state(cluster.broker_dir(CUT)) or {}).get("unreachable", [])
        ),
        timeout=60,
    )
    _create(cluster, "stale")
    wait_until(lambda: _knows(cluster, 1, "stale") and _knows(cluster, 3, "stale"))
    # twice the session timeout: a broker whose heartbeats stopped would be fenced by now
    time.sleep(2 * SESSION_TIMEOUT_MS / 1000)
    assert not _fenced_since(cluster, CUT, cut_at)
    assert _alive(cluster, 1) == {1, 2, 3}
    assert not _knows(cluster, CUT, "stale")  # it learned nothing since the cut
    state = read_controller_state(cluster.broker_dir(CUT))
    assert state is not None and str(controller) in state["unreachable"], state
    cluster.heal_links()
    wait_until(lambda: _knows(cluster, CUT, "stale"), timeout=60)
    wait_until(lambda: partition_state(_bootstrap(cluster, 1), "stale")[1] == [1, 2, 3], timeout=60)
    assert not _fenced_since(cluster, CUT, cut_at)
