"""The lab 09 checks: who can win an election, worked out from the voters' logs."""

from types import SimpleNamespace

from kafkalab.labs.checks import kraft
from kafkalab.raft.raft_log import LogEntry, RaftLog


def _log(*epochs: int) -> RaftLog:
    return RaftLog([LogEntry(i, e, f"r{i}") for i, e in enumerate(epochs)])


def test_a_higher_last_epoch_beats_a_longer_log():
    logs = {1: _log(1, 1, 1, 1), 2: _log(1, 2), 3: _log(1)}
    assert kraft.winners(logs) == {1, 2}  # 1 beats 3 and itself; 2 beats 1 and 3
    assert kraft.possible_winners({1, 2}, logs).right
    assert not kraft.possible_winners({2}, logs).right


def test_equal_logs_all_can_win_and_the_placeholder_is_not_yet():
    logs = {v: _log(1, 1) for v in (1, 2, 3)}
    assert kraft.possible_winners([1, 2, 3], logs).right
    assert not kraft.possible_winners(..., logs).right


def test_a_lagging_voter_cannot_win():
    logs = {1: _log(1), 2: _log(1, 1), 3: _log(1, 1, 2)}
    assert kraft.winners(logs) == {2, 3}


def _leader(log: RaftLog, epoch: int, hw: int = 0) -> SimpleNamespace:
    return SimpleNamespace(log=log, epoch=epoch, high_watermark=hw)


def test_the_hw_waits_for_a_majority_on_a_record_of_the_leaders_epoch():
    leader_log = _log(1, 1, 2)  # offsets 0, 1 inherited from epoch 1; LeaderChange at 2
    leader = _leader(leader_log, 2)
    short = {1: leader_log, 2: _log(1, 1), 3: _log(1)}
    assert kraft.leader_high_watermark(0, leader, short).right
    assert not kraft.leader_high_watermark(2, leader, short).right  # KAFKA-12619's answer
    caught_up = {1: leader_log, 2: _log(1, 1, 2), 3: _log(1)}
    assert kraft.leader_high_watermark(3, leader, caught_up).right
    assert not kraft.leader_high_watermark(..., leader, caught_up).right


def test_next_controllers_are_the_other_voters() -> None:
    from kafkalab.errors import Errors
    from kafkalab.raft.raft_message import DescribeQuorumResponse, ReplicaState

    quorum = DescribeQuorumResponse(
        Errors.NONE, 3001, 1, 5, tuple(ReplicaState(v, 5) for v in (3001, 3002, 3003))
    )
    assert kraft.next_controllers({3002, 3003}, quorum).right
    assert kraft.next_controllers([3003, 3002], quorum).right
    assert not kraft.next_controllers({3001, 3002, 3003}, quorum).right  # the killed leader
    assert not kraft.next_controllers({1, 2, 3}, quorum).right  # brokers never lead the quorum
    assert not kraft.next_controllers(..., quorum).right


def test_election_ms_is_prospective_to_leader_of_the_winner() -> None:
    timeline = SimpleNamespace(new_leader=3003, epoch=2, prospective_ms=1700.0, leader_ms=1725.4)
    assert kraft.election_ms(25.4, timeline).right
    assert kraft.election_ms(25, timeline).right  # to within 1 ms
    assert not kraft.election_ms(1725.4, timeline).right  # from the kill: the fetch timeout too
    assert not kraft.election_ms(10, timeline).right
    assert not kraft.election_ms(..., timeline).right


def test_check_quorum_waits_one_and_a_half_fetch_timeouts() -> None:
    assert kraft.check_quorum_deadline_ms(1500, 1000).right
    assert not kraft.check_quorum_deadline_ms(1000, 1000).right  # a follower's timeout
    assert not kraft.check_quorum_deadline_ms(2000, 1000).right
    assert not kraft.check_quorum_deadline_ms(..., 1000).right


def test_elections_count_the_epochs() -> None:
    assert kraft.elections(4, {1: 5, 2: 5, 3: 4}, 1).right
    assert not kraft.elections(5, {1: 5, 2: 5, 3: 4}, 1).right
    assert kraft.elections(0, {1: 1, 2: 1, 3: 1}, 1).right
    assert not kraft.elections(..., {1: 1}, 1).right


def test_records_lost_if_unclean_are_the_committed_ones_the_lagging_log_lacks() -> None:
    leader = SimpleNamespace(high_watermark=12)
    lagging = SimpleNamespace(local_id=3, log=_log(1, 1, 1, 1, 1))
    assert kraft.records_lost_if_unclean(7, leader, lagging).right
    assert not kraft.records_lost_if_unclean(0, leader, lagging).right
    assert not kraft.records_lost_if_unclean(12, leader, lagging).right
    caught_up = SimpleNamespace(local_id=2, log=_log(*([1] * 12)))
    assert kraft.records_lost_if_unclean(0, leader, caught_up).right
    assert not kraft.records_lost_if_unclean(..., leader, lagging).right


# -- part 3: the spec ----------------------------------------------------------------------


def test_the_first_invariant_a_second_vote_breaks_is_found_by_the_checker() -> None:
    assert kraft.double_vote_invariant("ElectionSafety").right
    wrong = kraft.double_vote_invariant("LeaderCompleteness")
    assert not wrong.right and "not 'LeaderCompleteness'" in wrong.why
    unknown = kraft.double_vote_invariant("OneVotePerEpoch")  # not an invariant of the spec
    assert not unknown.right and "ElectionSafety" in unknown.why  # it lists the real ones
    assert not kraft.double_vote_invariant(...).right


def _hw_rule_cases():
    from kafkalab.specs.replay import random_trace
    from kafkalab.specs.runner import SPECS_DIR, find_check
    from kafkalab.specs.tla import load_module
    from kafkalab.specs.trace import load_trace

    spec = load_module(str(find_check("kraft/correct").module))
    stored = SPECS_DIR / "kraft" / "counterexamples" / "kraft--hw-before-own-epoch.itf.json"
    traces = [load_trace(stored)]
    traces += [random_trace(find_check("kraft/restarts").module, 30, seed) for seed in range(3)]
    return spec, traces


def _majority(offsets: dict) -> int:
    ranked = sorted(offsets.values(), reverse=True)
    return ranked[len(ranked) // 2]


def test_the_hw_rule_is_kafkas_own_epoch_rule_checked_on_the_spec() -> None:
    spec, traces = _hw_rule_cases()

    def kafka(log, epoch, offsets, hw):
        start = sum(1 for e in log if e < epoch)  # where the LeaderChange record is
        m = _majority(offsets)
        return m if m > start and m > hw else hw

    def kafka_12619(log, epoch, offsets, hw):  # reaching the epoch start is enough
        start = sum(1 for e in log if e < epoch)
        m = _majority(offsets)
        return m if m >= start and m > hw else hw

    def backwards(log, epoch, offsets, hw):  # forgets that a HW never goes back
        start = sum(1 for e in log if e < epoch)
        m = _majority(offsets)
        return m if m > start else hw

    def no_majority(log, epoch, offsets, hw):  # the leader's own log end alone
        return max(hw, len(log))

    right = kraft.high_watermark_rule(kafka, spec, traces)
    assert right.right, right.why
    bug = kraft.high_watermark_rule(kafka_12619, spec, traces)
    assert not bug.right and "log [1, 3]" in bug.why  # the counterexample's leader of epoch 3
    assert not kraft.high_watermark_rule(backwards, spec, traces).right
    assert not kraft.high_watermark_rule(no_majority, spec, traces).right
    assert not kraft.high_watermark_rule(lambda *a: ..., spec, traces).right
    assert not kraft.high_watermark_rule(kafka, spec, []).right  # nothing to check against
