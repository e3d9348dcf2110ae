"""A controller failover taken apart: three controllers (a KRaft quorum) and three
brokers as processes, the active controller SIGKILLed once under an acks=all load;
every phase (fetch timeout, pre-vote, vote, LeaderChange committed, activation,
brokers on the new leader, a topic created, its first record) read from the
processes' own events, in order, and the producer to an existing topic not held up."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import partition_state, wait_until

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.controller_failover import PHASES, measure_controller_failover
from kafkalab.cluster.failover import LABS_QUORUM


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(
        brokers=3,
        controllers=3,
        base_dir=tmp_path,
        session_timeout_ms=3000,
        broker_props={"replica.lag.time.max.ms": "2000"},
        controller_props=LABS_QUORUM,
    ) as c:
        yield c


def test_a_controller_failover_has_every_phase_in_order(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic("load", 1, 3)]).values():
        future.result(20)
    wait_until(lambda: partition_state(cluster.bootstrap_servers, "load")[1] == [1, 2, 3])
    first = cluster.describe_quorum(20)

    timeline = measure_controller_failover(cluster, "after", load_topic="load")

    assert timeline.killed == first.leader_id and timeline.old_epoch == first.leader_epoch
    assert timeline.new_leader in set(cluster.controller_ids) - {timeline.killed}
    assert timeline.epoch > timeline.old_epoch
    ends = timeline.phase_ends()
    assert list(ends) == list(PHASES)
    assert None not in ends.values(), ends
    # The winner's own transitions, in Raft's order, and the controller on top of them
    raft = [ends[p] for p in ("fetch timeout", "pre-vote", "vote", "LeaderChange committed")]
    assert 0 <= raft[0] <= raft[1] <= raft[2] <= raft[3] <= ends["activation"]
    # The winner was a follower of the old epoch that timed out (no graceful resignation
    # told it: a SIGKILL sends no EndQuorumEpoch)
    mine = [e for e in timeline.events if e["voter"] == timeline.new_leader]
    timed_out = next(e for e in mine if e["state"] == "prospective")
    assert (timed_out["from"], timed_out["from_epoch"]) == ("follower", timeline.old_epoch)
    # Every broker heartbeated the new leader; the topic was created after it activated
    assert set(timeline.brokers_ms) == {1, 2, 3}
    assert ends["activation"] <= ends["topic created"] <= ends["first record"]
    assert timeline.total_ms == pytest.approx(ends["first record"])
    table = timeline.phases()
    assert list(table.phase) == list(PHASES) and table.ms.notna().all()
    # The Raft transitions seen: the winner went prospective -> candidate -> leader in the
    # new epoch, and no voter led in an epoch other than the old and the new one
    moves = timeline.transitions()
    won = moves[moves.voter == timeline.new_leader]
    assert ["prospective", "candidate", "leader"] == [
        s for s in won.to if s in ("prospective", "candidate", "leader")
    ][-3:]
    assert set(moves[moves.to == "leader"].epoch) == {timeline.epoch}
    # The partitions' leaders never needed the controller: the load went on meanwhile
    assert timeline.load_acked_during is not None and timeline.load_acked_during > 0
    # The picture draws every phase
    import matplotlib

    matplotlib.use("Agg")
    from kafkalab.viz.failover import controller_failover_plot

    ax = controller_failover_plot(timeline)
    assert len(ax.collections) == len(PHASES)
