"""RaftLog: the leader-epoch history, Fetch validation and the follower's truncation
rule for a DivergingEpoch (KIP-595's Fetch with LastFetchedEpoch, as KIP-101/279
do it for partitions)."""

from __future__ import annotations

import pytest

from kafkalab.raft.raft_log import (
    LogEntry,
    OffsetAndEpoch,
    RaftLog,
    ValidOffsetAndEpochKind,
)


def log_of(*epochs: int) -> RaftLog:
    return RaftLog(LogEntry(i, e, f"r{i}") for i, e in enumerate(epochs))


def test_epoch_history_and_end_offset_for_epoch():
    log = log_of(1, 1, 3, 3, 3, 4)
    assert log.epoch_history() == [(1, 0), (3, 2), (4, 5)]
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 1)  # largest epoch <= 2
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(5, 3)
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(6, 4)  # the last epoch ends at the LEO
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)
    assert log.end_offset_and_epoch() == OffsetAndEpoch(6, 4)


def test_validate_offset_and_epoch_valid_when_the_leader_holds_that_epoch_up_to_there():
    leader = log_of(1, 1, 3, 3, 3)
    assert leader.validate_offset_and_epoch(0, 0).kind is ValidOffsetAndEpochKind.VALID
    assert leader.validate_offset_and_epoch(2, 1).kind is ValidOffsetAndEpochKind.VALID
    assert leader.validate_offset_and_epoch(4, 3).kind is ValidOffsetAndEpochKind.VALID
    assert leader.validate_offset_and_epoch(5, 3).kind is ValidOffsetAndEpochKind.VALID


def test_validate_offset_and_epoch_diverging_names_where_the_leaders_epoch_ends():
    leader = log_of(1, 1, 3, 3, 3)
    # the follower wrote epoch 2 (never committed) after offset 2
    v = leader.validate_offset_and_epoch(4, 2)
    assert v.kind is ValidOffsetAndEpochKind.DIVERGING
    assert v.offset_and_epoch == OffsetAndEpoch(2, 1)
    # the follower holds more of epoch 1 than the leader
    v = leader.validate_offset_and_epoch(3, 1)
    assert v.kind is ValidOffsetAndEpochKind.DIVERGING
    assert v.offset_and_epoch == OffsetAndEpoch(2, 1)


@pytest.mark.parametrize(
    ("follower", "leader", "expected"),
    [
        ((1, 1, 2, 2), (1, 1, 3, 3, 3), 2),  # epoch 2 is not the leader's: cut it
        ((1, 1, 1, 1), (1, 1, 3), 2),  # more of epoch 1 than the leader has
        ((2, 2, 2), (1, 1, 3), 0),  # nothing in common
        ((1, 1), (1, 1, 3), 2),  # nothing to cut (never asked in practice)
    ],
)
def test_truncation_after_diverging_then_the_next_fetch_is_valid(follower, leader, expected):
    f, lead = log_of(*follower), log_of(*leader)
    v = lead.validate_offset_and_epoch(f.end_offset, f.last_fetched_epoch)
    while v.kind is ValidOffsetAndEpochKind.DIVERGING:  # KIP-279: repeat until it matches
        f.truncate_to_end_offset(v.offset_and_epoch)
        v = lead.validate_offset_and_epoch(f.end_offset, f.last_fetched_epoch)
    assert f.end_offset == expected
    assert f.entries == lead.entries[: f.end_offset]


def test_appends_keep_offsets_contiguous_and_epochs_non_decreasing():
    log = log_of(1, 2)
    with pytest.raises(ValueError, match="epoch"):
        log.append_as_leader(["x"], 1)
    with pytest.raises(ValueError, match="offset"):
        log.append_as_follower([LogEntry(5, 2, "x")])
    assert [e.offset for e in log.append_as_leader(["a", "b"], 3)] == [2, 3]
    log.truncate_to(1)
    assert log.end_offset == 1 and log.last_fetched_epoch == 1
