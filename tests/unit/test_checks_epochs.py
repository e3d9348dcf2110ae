"""kafkalab.labs.checks.epochs: each check passes a right answer, and says "not yet"
with the rule for a wrong one and for the placeholder, on live objects built the
way labs/04_epochs builds them (small)."""

from pathlib import Path

import pytest

from kafkalab.labs.checks import epochs
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.replication.partition import Partition
from kafkalab.specs.runner import find_check, run_check
from kafkalab.specs.tla.module import load_module
from kafkalab.specs.trace import Trace, load_trace
from kafkalab.storage import UnifiedLog
from kafkalab.storage.checkpoint_file import OffsetCheckpointFile

UNANSWERED = "not yet: replace the ..."


def replica(root: Path, run: str, broker_id: int, rule: str) -> Partition:
    log = UnifiedLog(root / run / f"broker-{broker_id}" / "t-0")
    return Partition("t", 0, broker_id, log, truncation_rule=rule)


def replicate(leader: Partition, follower: Partition, at_ms: int) -> None:
    leader.update_follower_fetch_state(follower.local_broker_id, follower.log.log_end_offset, at_ms)
    data = leader.log.read(follower.log.log_end_offset, 1 << 20).read_bytes()
    follower.append_records_to_follower(data, leader.log.high_watermark)


def write(leader: Partition, value: str) -> None:
    leader.append_records_to_leader(build_batch([SimpleRecord(value.encode())]), 1, 1)


@pytest.fixture
def scenario_one(tmp_path):
    """Part 1's scenario 1 at B's restart: m2 committed on A, B believes HW 1."""
    a, b = (
        replica(tmp_path, "s1", 1, "fenced-leader-epoch"),
        replica(tmp_path, "s1", 2, "fenced-leader-epoch"),
    )
    a.make_leader(1, [1, 2], [1, 2], 0, now_ms=0)
    b.make_follower(1, 1, [1, 2], [1, 2], 0)
    write(a, "m1")
    replicate(a, b, 1)
    replicate(a, b, 2)
    write(a, "m2")
    replicate(a, b, 3)
    a.update_follower_fetch_state(2, b.log.log_end_offset, 4)
    yield a, b
    a.log.close()
    b.log.close()


@pytest.fixture
def scenario_two(tmp_path):
    """Part 1's scenario 2 as A comes back: B leads epoch 2 with m1, m3."""
    a, b = (
        replica(tmp_path, "s2", 1, "fenced-leader-epoch"),
        replica(tmp_path, "s2", 2, "fenced-leader-epoch"),
    )
    a.make_leader(1, [1, 2], [1, 2], 0, now_ms=0)
    b.make_follower(1, 1, [1, 2], [1, 2], 0)
    write(a, "m1")
    write(a, "m2")
    for t in (1, 2, 3):
        replicate(a, b, t)
    b.log.truncate_to(1)
    b.make_leader(2, [2], [1, 2], 1, now_ms=10)
    write(b, "m3")
    a.make_follower(2, 2, [2], [1, 2], 1)
    yield a, b
    a.log.close()
    b.log.close()


@pytest.fixture
def history(tmp_path):
    """A replica that led epochs 0, 2, 3 and 5 and wrote 3, 2, 0 and 1 records."""
    c = replica(tmp_path, "history", 3, "fenced-leader-epoch")
    for epoch, values in [(0, "abc"), (2, "de"), (3, ""), (5, "f")]:
        c.make_leader(epoch, [3], [3], epoch, now_ms=0)
        for value in values:
            write(c, value)
    yield c
    c.log.close()


def test_truncation_points(scenario_one):
    a, b = scenario_one
    right = epochs.truncation_points({"high-watermark": 1, "fenced-leader-epoch": 2}, b, a)
    assert right, right
    assert b.log.log_end_offset == 2, "the check works on a copy: the notebook's B is untouched"
    wrong = epochs.truncation_points({"high-watermark": 2, "fenced-leader-epoch": 2}, b, a)
    assert not wrong and str(wrong).startswith("not yet:") and "own HW" in str(wrong)
    wrong = epochs.truncation_points({"leader-epoch": 1}, b, a)
    assert not wrong and "asks where its latest epoch ends" in str(wrong)
    assert str(
        epochs.truncation_points({"high-watermark": ..., "leader-epoch": 2}, b, a)
    ).startswith(UNANSWERED)
    assert str(epochs.truncation_points(..., b, a)).startswith(UNANSWERED)
    assert not epochs.truncation_points({"newest": 1}, b, a)


def test_first_round(scenario_two):
    a, b = scenario_two
    assert epochs.first_round((1, 1), 1, a, b)
    assert epochs.first_round([1, 1], 1, a, b), "a list is a pair too"
    wrong = epochs.first_round((1, 2), 1, a, b)
    assert not wrong and str(wrong).startswith("not yet:") and "next epoch starts" in str(wrong)
    wrong = epochs.first_round((1, 1), 2, a, b)
    assert not wrong and "unless its own log ends earlier" in str(wrong)
    assert str(epochs.first_round(..., 1, a, b)).startswith(UNANSWERED)
    assert a.log.log_end_offset == 2


def test_checkpoint_starts(history):
    assert epochs.checkpoint_starts({0: 0, 2: 3, 5: 5}, history.log.dir)
    wrong = epochs.checkpoint_starts({0: 0, 2: 3, 3: 5, 5: 5}, history.log.dir)
    assert not wrong and str(wrong).startswith("not yet:") and "version" in str(wrong)
    assert str(epochs.checkpoint_starts(..., history.log.dir)).startswith(UNANSWERED)


def test_offsets_for_epochs(history):
    right = {1: (0, 3), 3: (2, 5), 5: (5, 6), 6: (-1, -1)}
    assert epochs.offsets_for_epochs(right, history)
    wrong = epochs.offsets_for_epochs({**right, 3: (3, 5)}, history)
    assert not wrong and str(wrong).startswith("not yet:") and "[3]" in str(wrong)
    assert str(epochs.offsets_for_epochs({1: ...}, history)).startswith(UNANSWERED)
    assert str(epochs.offsets_for_epochs(..., history)).startswith(UNANSWERED)


def test_cut_from_files(tmp_path):
    """Files like part 2's scenario 2 as broker 1 comes back: it has m0, m1 of epoch 0
    (HW 2); broker 2 leads epoch 3 with n0, n1 from offset 0."""
    snap = tmp_path / "snap"
    for broker, epoch, values in [(1, 0, ["m0", "m1"]), (2, 3, ["n0", "n1"])]:
        p = Partition("s2", 0, broker, UnifiedLog(snap / f"broker-{broker}" / "s2-0"))
        p.make_leader(epoch, [broker], [broker], 0, now_ms=0)
        for value in values:
            write(p, value)
        p.log.close()
        OffsetCheckpointFile(snap / f"broker-{broker}" / "replication-offset-checkpoint").write(
            {("s2", 0): 2}
        )
    right = epochs.cut_from_files({"high-watermark": 2, "fenced-leader-epoch": 0}, snap, "s2", 1, 2)
    assert right and "asked (0, 3)" in str(right), right
    wrong = epochs.cut_from_files({"fenced-leader-epoch": 2}, snap, "s2", 1, 2)
    assert not wrong and str(wrong).startswith("not yet:") and "latest epoch" in str(wrong)
    wrong = epochs.cut_from_files({"high-watermark": 0}, snap, "s2", 1, 2)
    assert not wrong and "own HW" in str(wrong)
    assert str(epochs.cut_from_files({"high-watermark": ...}, snap, "s2", 1, 2)).startswith(
        UNANSWERED
    )


def _state(committed, isr, logs):
    return {"committed": committed, "quorum": {"isr": isr}, "log": logs}


def test_losing_step():
    r1 = {"id": 1, "epoch": 0}
    trace = Trace(
        ["log", "quorum", "committed"],
        [
            _state([], ["b1", "b2"], {"b1": [], "b2": []}),
            _state([[0, r1]], ["b1", "b2"], {"b1": [r1], "b2": [r1]}),
            _state([[0, r1]], ["b1"], {"b1": [r1], "b2": []}),  # b2 out of the ISR: fine
            _state([[0, r1]], ["b1", "b2"], {"b1": [r1], "b2": []}),  # back in without r1
        ],
    )
    assert epochs.losing_step(3, trace)
    wrong = epochs.losing_step(2, trace)
    assert not wrong and str(wrong).startswith("not yet:") and "ISR" in str(wrong)
    assert str(epochs.losing_step(..., trace)).startswith(UNANSWERED)


def _end(epochs_, leo, epoch):
    if epoch < 0 or not epochs_:
        return -1, -1
    if epochs_[-1][0] == epoch:
        return epoch, leo
    later = [i for i, (e, _) in enumerate(epochs_) if e > epoch]
    if not later:
        return -1, -1
    if later[0] == 0:
        return epoch, epochs_[0][1]
    return epochs_[later[0] - 1][0], epochs_[later[0]][1]


def right_round(leo, hw, epochs_, answer):
    if answer is None or answer[0] < 0 or answer[1] < 0:
        return min(hw, leo), True
    epoch, end = answer
    ours, our_end = _end(epochs_, leo, epoch)
    if our_end < 0:
        return min(end, leo), True
    if ours != epoch:
        return min(our_end, leo), False
    return min(our_end, end, leo), True


def without_kip_279(leo, hw, epochs_, answer):
    if answer is None or answer[0] < 0 or answer[1] < 0:
        return min(hw, leo), True
    _, our_end = _end(epochs_, leo, answer[0])
    return (min(answer[1], leo) if our_end < 0 else min(our_end, answer[1], leo)), True


@pytest.fixture(scope="module")
def spec_and_traces():
    traces = [
        load_trace(run_check(f"replication/{rule}").counterexample)
        for rule in ("high-watermark", "leader-epoch")
    ]
    return load_module(str(find_check("replication/high-watermark").module)), traces


def test_truncation_round_function(spec_and_traces):
    spec, traces = spec_and_traces
    right = epochs.truncation_round_function(right_round, spec, traces)
    assert right and "cases" in str(right), right
    for wrong_function in (
        lambda leo, hw, e, a: (min(hw, leo), True),  # the high-watermark rule everywhere
        lambda leo, hw, e, a: (
            min(hw, leo) if a is None else min(a[1], leo),
            True,
        ),  # no -1 fallback
        without_kip_279,
    ):
        wrong = epochs.truncation_round_function(wrong_function, spec, traces)
        assert not wrong and str(wrong).startswith("not yet:") and "The rule:" in str(wrong), wrong

    def placeholder(leo, hw, e, a): ...

    assert str(epochs.truncation_round_function(placeholder, spec, traces)).startswith(UNANSWERED)
    crash = epochs.truncation_round_function(lambda leo, hw, e, a: 1 // 0, spec, traces)
    assert not crash and "ZeroDivisionError" in str(crash)
    assert not epochs.truncation_round_function(lambda leo, hw, e, a: leo, spec, traces)
    assert not epochs.truncation_round_function(right_round, spec, [])
