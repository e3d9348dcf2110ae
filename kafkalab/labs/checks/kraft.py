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

from kafkalab.labs.checks import UNANSWERED, Verdict, answered, compare, verdict
from kafkalab.raft.raft_log import RaftLog

__all__ = [
    "check_quorum_deadline_ms",
    "election_ms",
    "elections",
    "leader_high_watermark",
    "next_controllers",
    "possible_winners",
    "records_lost_if_unclean",
    "winners",
]


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


def election_ms(answer: Any, timeline: Any) -> Verdict:
    """`answer`: how many ms the winner of a controller failover took from turning
    Prospective (its fetch timeout) to becoming Leader: its pre-vote and its vote,
    read from `timeline` (a ControllerFailoverTimeline) to within 1 ms."""
    if not answered(answer):
        return UNANSWERED
    expected = timeline.leader_ms - timeline.prospective_ms
    return verdict(
        abs(float(answer) - expected) <= 1,
        f"the election took {expected:.1f} ms: voter {timeline.new_leader} turned Prospective, "
        f"won its pre-votes (Candidate, epoch {timeline.epoch}), then its votes (Leader): two "
        "round trips, against a fetch timeout of a second before it",
        f"{answer!r} ms is not it: take voter {timeline.new_leader}'s rows of "
        "timeline.transitions(), from the one to 'prospective' to the one to 'leader'",
    )


def check_quorum_deadline_ms(answer: Any, fetch_timeout_ms: int) -> Verdict:
    """`answer`: at the latest, how many ms after it last heard from a majority a leader
    resigns by check-quorum (Kafka: CHECK_QUORUM_TIMEOUT_FACTOR = 1.5 x the fetch
    timeout, KAFKA-15489)."""
    if not answered(answer):
        return UNANSWERED
    return compare(
        answer,
        int(fetch_timeout_ms * 1.5),
        what="the check-quorum timeout",
        why=(
            "a leader that no majority has fetched from for 1.5 x "
            f"controller.quorum.fetch.timeout.ms ({fetch_timeout_ms} ms) resigns: longer than "
            "a follower waits, so a healthy leader is never resigned by one slow fetch"
        ),
        hint="check-quorum waits a fixed multiple of the fetch timeout (LeaderState)",
    )


def elections(answer: Any, epochs: Mapping[int, int], start_epoch: int) -> Verdict:
    """`answer`: how many elections the quorum went through, given the voters' epochs
    now (`epochs`: voter -> epoch) and the epoch it started in: every election bumps the
    epoch by one, and the highest epoch any voter reached counts them."""
    if not answered(answer):
        return UNANSWERED
    expected = max(epochs.values()) - start_epoch
    return compare(
        answer,
        expected,
        what="the number of elections",
        why=(
            f"the quorum started in epoch {start_epoch} and reached {max(epochs.values())}: "
            "a candidate runs in epoch + 1, so each election (won or not) is one epoch"
        ),
        hint="each election is one epoch more: compare the highest epoch with the first",
    )


def records_lost_if_unclean(answer: Any, leader: Any, lagging: Any) -> Verdict:
    """`answer`: how many committed records would be lost if `lagging` (a
    KafkaRaftClient behind) were made leader as a partition's unclean election would:
    the committed ones (below `leader`'s high watermark) its log does not hold."""
    if not answered(answer):
        return UNANSWERED
    expected = max(0, leader.high_watermark - lagging.log.end_offset)
    return compare(
        answer,
        expected,
        what="the committed records lost",
        why=(
            f"the leader committed up to offset {leader.high_watermark}; voter "
            f"{lagging.local_id}'s log ends at {lagging.log.end_offset}: as leader it would "
            "make every follower truncate to its log"
        ),
        hint="committed is below the leader's high watermark; what does the lagging log end at?",
    )
