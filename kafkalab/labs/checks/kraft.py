"""Checks for lab 09: KRaft, the metadata quorum.

Each check works its answer out from the live objects the notebook built (the
voters' RaftLogs), never from the notebook's numbers.

The rule they turn around (Raft's election restriction, Kafka:
QuorumState.canGrantVote / EpochState.canGrantVote): a voter grants its vote only
to a candidate whose log is at least as up to date as its own, comparing the
(epoch of the last record, log end offset) pairs, epoch first. A candidate wins
when a majority of the voters, itself included, would grant it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalab.labs.checks import UNANSWERED, Verdict, answered, compare
from kafkalab.raft.raft_log import RaftLog

__all__ = ["possible_winners", "winners"]


def _up_to_date(log: RaftLog) -> tuple[int, int]:
    end = log.end_offset_and_epoch()
    return (end.epoch, end.offset)


def winners(logs: Mapping[int, RaftLog]) -> set[int]:
    """The voters that can collect a majority of votes with these logs."""
    majority = len(logs) // 2 + 1
    return {
        c
        for c, log in logs.items()
        if sum(_up_to_date(log) >= _up_to_date(other) for other in logs.values()) >= majority
    }


def possible_winners(answer: Any, logs: Mapping[int, RaftLog]) -> Verdict:
    """`answer`: the set of voter ids that could win the next election."""
    if not answered(answer):
        return UNANSWERED
    expected = winners(logs)
    ends = ", ".join(
        f"{v}: epoch {e} offset {o}"
        for v, (e, o) in sorted((v, _up_to_date(log)) for v, log in logs.items())
    )
    return compare(
        set(answer),
        expected,
        what="the voters that can win",
        why=f"a voter grants only a candidate at least as up to date (epoch first, then end offset): {ends}",
        hint="compare (last epoch, end offset) pairs: a higher last epoch beats any offset",
    )
