"""QuorumConfig's teaching switches, each setting: `pre_vote` (KIP-996) and
`check_quorum` (KAFKA-15489's fix), on by default as in Kafka 4.x; lab 09 part 4
turns them off to show what they prevent. Stepped by hand (raft_harness)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from raft_harness import TEST_CONFIG, RaftNetwork

from kafkalab.raft.quorum_config import QuorumConfig
from kafkalab.raft.quorum_state import StateName

OFF = replace(TEST_CONFIG, pre_vote=False, check_quorum=False)


def test_both_switches_are_on_by_default():
    assert QuorumConfig().pre_vote and QuorumConfig().check_quorum


def _stable(net: RaftNetwork):
    net.run_until(net.has_stable_leader, 20_000)
    net.run(500)  # every follower has fetched: the LeaderChange is committed everywhere
    return net.leader()


def _follower(net: RaftNetwork, leader) -> int:
    return next(v for v in net.voters if v != leader.local_id)


@pytest.mark.parametrize("pre_vote", [True, False])
def test_a_fetch_timeout_asks_for_pre_votes_or_bumps_the_epoch_at_once(pre_vote):
    net = RaftNetwork(config=replace(TEST_CONFIG, pre_vote=pre_vote), seed=3)
    leader = _stable(net)
    follower = net.clients[_follower(net, leader)]
    epoch = follower.epoch
    net.crash(leader.local_id)
    net.run_until(lambda: follower.state_name != StateName.FOLLOWER, 5_000, step=1)
    if pre_vote:  # KIP-996: asks first, in its current epoch; nothing on disk changed
        assert (follower.state_name, follower.epoch) == (StateName.PROSPECTIVE, epoch)
    else:  # before KIP-996: a Candidate of the next epoch, its vote for itself persisted
        assert (follower.state_name, follower.epoch) == (StateName.CANDIDATE, epoch + 1)
        assert net.stores[follower.local_id].read_election_state().voted_id == follower.local_id


@pytest.mark.parametrize("check_quorum", [True, False])
def test_a_leader_cut_off_from_both_followers_resigns_only_with_check_quorum(check_quorum):
    net = RaftNetwork(config=replace(TEST_CONFIG, check_quorum=check_quorum), seed=5)
    old = _stable(net)
    epoch = old.epoch
    net.isolate(old.local_id)
    others = [net.clients[v] for v in net.voters if v != old.local_id]
    # the other two elect a leader of a higher epoch either way
    net.run_until(lambda: any(c.is_leader() and c.epoch > epoch for c in others), 10_000)
    net.run(3 * TEST_CONFIG.check_quorum_timeout_ms)
    if check_quorum:  # resigned (then moved on) after 1.5 x fetch timeout with no majority
        assert not old.is_leader()
    else:  # KAFKA-15489: still Leader of its old epoch, beside the new leader
        assert old.is_leader() and old.epoch == epoch
        assert len(net.leaders()) == 2
    net.heal()
    net.run_until(net.has_stable_leader, 10_000)
    assert net.leader().epoch > epoch


def _flap(net: RaftNetwork, leader: int, voter: int, flaps: int) -> list[int]:
    """Cut the link leader <-> voter for 1.5 fetch timeouts, heal it for one, `flaps`
    times; the highest epoch any voter is in after each flap."""
    highest = []
    for _ in range(flaps):
        net.cut.add(frozenset((leader, voter)))
        net.run(int(TEST_CONFIG.fetch_timeout_ms * 1.5))
        net.cut.clear()
        net.run(TEST_CONFIG.fetch_timeout_ms)
        highest.append(max(c.epoch for c in net.live()))
    return highest


def test_a_flapping_link_churns_no_epoch_with_pre_vote_and_check_quorum():
    net = RaftNetwork(seed=7)
    leader = _stable(net)
    epoch = leader.epoch
    assert _flap(net, leader.local_id, _follower(net, leader), 6) == [epoch] * 6
    # the other follower kept hearing the leader and refused every pre-vote
    assert net.has_stable_leader() and net.leader() is leader


def test_a_flapping_link_churns_epochs_with_both_switches_off():
    net = RaftNetwork(config=OFF, seed=7)
    leader = _stable(net)
    epoch = leader.epoch
    highest = _flap(net, leader.local_id, _follower(net, leader), 6)
    # every flap times a voter out and it bumps the epoch, winning the third voter's
    # vote: one election a flap
    assert highest == [epoch + i for i in range(1, 7)], highest


def test_pre_vote_off_alone_churns_and_check_quorum_off_alone_does_not():
    churn = RaftNetwork(config=replace(TEST_CONFIG, pre_vote=False), seed=7)
    leader = _stable(churn)
    epoch = leader.epoch
    assert _flap(churn, leader.local_id, _follower(churn, leader), 4)[-1] > epoch
    calm = RaftNetwork(config=replace(TEST_CONFIG, check_quorum=False), seed=7)
    leader = _stable(calm)
    epoch = leader.epoch
    assert _flap(calm, leader.local_id, _follower(calm, leader), 4) == [epoch] * 4
