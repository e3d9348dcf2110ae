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

__all__ = ["leader_high_watermark", "next_controllers", "possible_winners", "winners"]


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


def leader_high_watermark(answer: Any, leader: Any, logs: Mapping[int, RaftLog]) -> Verdict:
    """`answer`: the high watermark `leader` (a KafkaRaftClient) may show now, given
    the voters' logs. Worked out from the logs: the largest end offset N that a
    majority of voters' logs reach and whose last entry (offset N - 1) is of the
    leader's epoch; while there is none the HW stays where it was (0 for a new leader
    that inherited nothing committed)."""
    if not answered(answer):
        return UNANSWERED
    majority = len(logs) // 2 + 1
    ends = sorted((log.end_offset for log in logs.values()), reverse=True)
    reached = ends[majority - 1]
    own = leader.log.entries
    candidates = [n for n in range(1, reached + 1) if own[n - 1].epoch == leader.epoch]
    expected = max(candidates) if candidates else leader.high_watermark
    return compare(
        answer,
        expected,
        what="the high watermark",
        why=(
            f"a majority reaches offset {reached}; the HW may only move to an offset whose "
            f"last record is of the leader's epoch {leader.epoch} (Raft's own-epoch commit rule)"
        ),
        hint="which records have a majority, and is the last of them of the leader's epoch?",
    )


def next_controllers(answer: Any, quorum: Any) -> Verdict:
    """`answer`: the node ids that can become the active controller once the leader in
    `quorum` (a DescribeQuorumResponse) is gone: every other voter (each can win a
    vote if its log is up to date enough; the dead leader cannot), never a broker or
    an observer."""
    if not answered(answer):
        return UNANSWERED
    voters = {v.replica_id for v in quorum.current_voters}
    expected = voters - {quorum.leader_id}
    return compare(
        set(answer),
        expected,
        what="the controllers that can take over",
        why=(
            f"the voters are {sorted(voters)}; {quorum.leader_id} leads and is killed, and only "
            "a voter can be elected (brokers and observers never vote or lead)"
        ),
        hint="which node ids does DescribeQuorum list as voters?",
    )
