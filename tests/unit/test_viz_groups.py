"""The group pictures of labs/06_groups draw what the coordinator allows and
what members held: checked on small inputs whose answers are known."""

from kafkalab.coordinator.group import VALID_PREVIOUS_STATES, GroupState
from kafkalab.viz.groups import group_state_graph, unowned_intervals

S = GroupState


def test_state_graph_has_every_state_and_every_allowed_transition():
    lines = [line.strip() for line in group_state_graph().source.splitlines()]
    nodes = {line.split(" [")[0] for line in lines if "->" not in line and "[label=" in line}
    assert nodes == {state.value for state in GroupState}
    edges = {tuple(line.split(" [")[0].split(" -> ")) for line in lines if "->" in line}
    allowed = {
        (s.value, dst.value)
        for dst, srcs in VALID_PREVIOUS_STATES.items()
        for s in srcs
        if s is not dst
    }
    assert edges == allowed


def test_state_graph_marks_the_path_taken_with_step_numbers():
    path = [(0, S.EMPTY, S.PREPARING_REBALANCE), (5, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE)]
    src = group_state_graph(path).source
    red = [line for line in src.splitlines() if "#d62728" in line]
    assert len(red) == 2
    assert any("Empty -> PreparingRebalance" in line and "1@0ms" in line for line in red)
    assert any("CompletingRebalance" in line and "2@5ms" in line for line in red)


def test_unowned_intervals_from_member_samples():
    parts = [("t", 0), ("t", 1)]
    samples = {
        "a": [
            (0.0, frozenset()),
            (1.0, frozenset(parts)),
            (3.0, frozenset()),
            (4.0, frozenset(parts[:1])),
        ],
        "b": [(0.5, frozenset()), (4.5, frozenset(parts[1:]))],
    }
    assert unowned_intervals(samples, parts, end=6.0) == [
        (0.0, 0.5, 2),
        (0.5, 1.0, 2),
        (3.0, 4.0, 2),
        (4.0, 4.5, 1),
    ]
