"""KafkaRaft traces replayed on kafkalab's Raft voters (kafkalab.specs.kraft_replay).

The broken variants' counterexamples reproduce their violation on kafkalab/raft
with the matching defect switched on (QuorumConfig.defects), and part from the
correct code at the step its fix forbids; a replay names the first step where
code and spec disagree. Random-walk conformance is in test_specs.py."""

from __future__ import annotations

import json

import pytest

from kafkalab.raft.quorum_config import KAFKA_10527, KAFKA_12619, QuorumConfig
from kafkalab.raft.quorum_state import CandidateState, ProspectiveState, QuorumState
from kafkalab.specs.kraft_replay import replay_kraft, trace_defects
from kafkalab.specs.replay import ReplayMismatch, random_trace, random_walk
from kafkalab.specs.runner import SPECS_DIR, follow_counterexample, follow_trace
from kafkalab.specs.trace import load_trace
from kafkalab.specs.trace_actions import KRAFT_ACTIONS

CEX = SPECS_DIR / "kraft" / "counterexamples"
HW = CEX / "kraft--hw-before-own-epoch.itf.json"
VOTE = CEX / "kraft--vote-not-persisted.itf.json"


def _steps(path):
    name = path.name.removesuffix(".itf.json").replace("--", "/")
    return follow_counterexample(name, json.loads(path.read_text()), KRAFT_ACTIONS)


def test_kafka_12619_on_kafkalab_loses_a_committed_record_as_the_spec_does():
    trace = load_trace(HW)
    assert trace_defects(trace) == {KAFKA_12619}
    report = replay_kraft(HW)
    assert len(report.steps) == len(trace) - 1
    # the history kafkalab's voters made is the spec's, step for step
    assert report.committed == {tuple(c) for c in trace.states[-1]["committed"]}
    assert report.violations == [
        "LeaderCompleteness: the record of epoch 1 at offset 0, committed in epoch 3, "
        "is not in the log of c2, leader of epoch 4"
    ]


def test_on_the_correct_code_kafka_12619s_trace_parts_where_the_hw_passes_the_epoch_start():
    steps = _steps(HW)
    trace = load_trace(HW)
    # the step where c1, leader of epoch 3, commits offset 0 before its own record
    moved = next(
        i
        for i in range(1, len(trace))
        if trace.states[i]["hw"]["c1"] > trace.states[i - 1]["hw"]["c1"]
        and trace.states[i]["epoch"]["c1"] == 3
    )
    with pytest.raises(ReplayMismatch) as e:
        replay_kraft(HW, defects=())
    assert e.value.step == moved and steps[moved - 1] == 'Fetch("c3")'
    assert "c1's hw is 0, the spec says 1" in str(e.value)
    assert "KAFKA-12619" in str(e.value) and "LeaderChange record at offset 1" in str(e.value)


def test_kafka_10527_on_kafkalab_elects_two_leaders_in_one_epoch_as_the_spec_does():
    report = replay_kraft(VOTE)
    assert report.defects == {KAFKA_10527}
    assert report.elected == {(1, "c1"), (1, "c2")}
    assert report.violations == ["ElectionSafety: epoch 1 had leaders c1, c2"]


def test_on_the_correct_code_the_vote_survives_the_restart():
    steps = _steps(VOTE)
    with pytest.raises(ReplayMismatch) as e:
        replay_kraft(VOTE, defects=())
    assert steps[e.value.step - 1] == 'Restart("c3")'
    assert "c3's votedFor is c1, the spec says none" in str(e.value)
    assert "fsynced before a vote is granted" in str(e.value)


def test_a_defect_the_spec_does_not_have_is_found_at_its_first_step():
    """The correct spec's counterexample-free walks, on code with KAFKA-10527 on: the
    first restart of a voter that voted or led differs, and the replay says why."""
    module = SPECS_DIR / "kraft" / "MC_kraft_restarts.tla"
    for seed in range(50):
        trace = random_trace(module, 30, seed)
        try:
            replay_kraft(trace, defects=[KAFKA_10527])
        except ReplayMismatch as e:
            assert "KAFKA-10527 switched on" in str(e) and "Restart" in e.action
            return
    pytest.fail("no walk restarted a voter that had voted")


def test_a_replay_names_the_step_where_the_code_stops_doing_what_the_spec_does(monkeypatch):
    """Bring a restarted candidate back Prospective (what kafkalab/raft did before the
    replay found Kafka's QuorumState.initialize builds a CandidateState): a walk that
    restarts a candidate parts at that restart."""
    initialize = QuorumState.initialize

    def prospective_after_restart(self, log_end, now_ms):
        state = initialize(self, log_end, now_ms)
        if isinstance(state, CandidateState):
            self._state = ProspectiveState(state.epoch, state.election_deadline_ms, self.local_id)
        return self._state

    monkeypatch.setattr(QuorumState, "initialize", prospective_after_restart)
    module = SPECS_DIR / "kraft" / "MC_kraft_restarts.tla"
    for seed in range(100):
        walk = random_walk(module, 30, seed)
        names, states = follow_trace(module, walk, KRAFT_ACTIONS), load_trace(walk).states
        restarts = [
            i
            for i, name in enumerate(names, start=1)
            if name.startswith("Restart") and states[i - 1]["role"][name[9:-2]] == "candidate"
        ]
        if not restarts:
            continue
        with pytest.raises(ReplayMismatch) as e:
            replay_kraft(walk)
        assert e.value.step == restarts[0] and "role is prospective" in str(e.value)
        return
    pytest.fail("no walk restarted a candidate")


def test_defects_are_off_by_default_and_named_for_their_jira():
    assert QuorumConfig().defects == frozenset()
    with pytest.raises(ValueError, match="KAFKA-10527"):
        QuorumConfig(defects=frozenset({"KAFKA-0"}))


def test_a_candidate_refused_from_a_newer_epoch_follows_the_leader_it_is_told_of():
    """What the replay found in the spec: Kafka's candidate takes the leader a voter
    of a newer epoch names in its VoteResponse (maybeTransition), where the spec
    left it Unattached. A walk with such a step replays, and the code follows."""
    for module in sorted((SPECS_DIR / "kraft").glob("MC_kraft*.tla")):
        for seed in range(100):
            walk = random_walk(module, 30, seed)
            names, states = follow_trace(module, walk, KRAFT_ACTIONS), load_trace(walk).states
            learnt = [
                (i, name.split('"')[1])
                for i, name in enumerate(names, start=1)
                if name.startswith("RequestVote")
                and states[i]["role"][name.split('"')[1]] == "follower"
            ]
            if learnt:
                step, c = learnt[0]
                report = replay_kraft(load_trace(walk))
                assert f"{c} is follower" in report.steps[step - 1]["implementation"]
                return
    pytest.fail("no walk has a candidate refused by a voter that knows a leader")
