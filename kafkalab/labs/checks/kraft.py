"""Checks for lab 09: KRaft, the metadata quorum.

Each check works its answer out from the live objects the notebook built (the
voters' RaftLogs), never from the notebook's numbers.

The rule they turn around (Raft's election restriction, Kafka:
QuorumState.canGrantVote / EpochState.canGrantVote): a voter grants its vote only
to a candidate whose log is at least as up to date as its own, comparing the
(epoch of the last record, log end offset) pairs, epoch first. A candidate wins
when a majority of the voters, itself included, would grant it.

Part 3's checks turn to the spec (specs/kraft/KafkaRaft.tla): which invariant the
model checker finds broken first when a voter can vote twice in an epoch (the check
runs the checker), and the leader's high watermark rule written as a Python
function, compared with the spec's `NewHw` evaluated by the TLA+ evaluator in the
states of the traces the notebook has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from itertools import product
from typing import Any

from kafkalab.labs.checks import (
    UNANSWERED,
    Verdict,
    answered,
    compare,
    run_student_code,
    verdict,
)
from kafkalab.raft.raft_log import RaftLog

__all__ = [
    "check_quorum_deadline_ms",
    "double_vote_invariant",
    "election_ms",
    "elections",
    "high_watermark_rule",
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


#: The configuration in which a voter can vote twice in one epoch: a restart loses
#: the vote it gave (PersistElectionState = FALSE, KAFKA-10527).
DOUBLE_VOTE_CHECK = "kraft/vote-not-persisted"


def double_vote_invariant(answer: Any, check: str = DOUBLE_VOTE_CHECK) -> Verdict:
    """`answer`: the name of the spec's invariant the model checker finds broken
    first when a voter can vote a second time in an epoch. Worked out by running the
    built-in checker on `check` (breadth first: the first broken state it meets is
    one of the closest to the start)."""
    if not answered(answer):
        return UNANSWERED
    from kafkalab.specs.runner import find_check, run_check

    spec_check = find_check(check)
    if answer not in spec_check.invariants:
        return Verdict(
            False,
            f"{answer!r} is not one of the invariants checked: {', '.join(spec_check.invariants)}",
        )
    result = run_check(spec_check)
    if result.verdict != "violation":
        return Verdict(False, f"{check} broke nothing ({result.line()}): the spec changed?")
    return compare(
        answer,
        result.invariant,
        what="the first invariant broken",
        why=(
            f"the checker found it after {result.depth - 1} steps ({result.states:,} states): "
            "a voter that forgets its vote grants a second candidate in the same epoch, "
            "and two candidates each with a majority lead one epoch"
        ),
        hint=(
            "what is the first thing that goes wrong when two candidates can each collect "
            "a majority in the same epoch, before any record is committed?"
        ),
    )


def high_watermark_rule(function: Callable[..., Any], spec, traces: Iterable) -> Verdict:
    """The student's leader HW rule, `function(log, epoch, offsets, hw) -> new hw`,
    against the spec's `NewHw(l, off)` (with `CommitOwnEpochFirst = TRUE`, Kafka's
    rule) evaluated by the TLA+ evaluator in `spec` (an MC_kraft*.tla module): `log` is the leader's log as the epochs of its records, `epoch` its
    epoch, `offsets` {voter: offset} the offsets it counts (its own log end for
    itself, -1 for a follower it has not heard from), `hw` its HW now. Each leader
    of the traces (its log and epoch) is tried with every HW up to its log end and
    every combination of its followers' fetch offsets, -1 to its log end."""
    from kafkalab.specs.tla import solve_constants
    from kafkalab.specs.tla.values import Fn

    traces = list(traces)
    if not traces:
        return Verdict(False, "no case to check: pass the traces the notebook loaded")
    cases: set[tuple] = set()
    for trace in traces:
        for state in trace.states:
            for l, role in state["role"].items():  # noqa: E741
                if role != "leader":
                    continue
                log = tuple(state["log"][l])
                followers = sorted(v for v in state["role"] if v != l)
                values = range(-1, len(log) + 1)
                for fetched in product(values, repeat=len(followers)):
                    offsets = tuple(
                        sorted({**dict(zip(followers, fetched, strict=True)), l: len(log)}.items())
                    )
                    for hw in range(len(log) + 1):
                        cases.add((l, log, state["epoch"][l], offsets, hw))
    constants = dict(solve_constants(spec, "ConstInit", None))
    constants["CommitOwnEpochFirst"] = True
    (init,) = spec.initial_states("Init", constants)
    for l, log, epoch, offsets, hw in sorted(cases):  # noqa: E741
        # A state in which l leads `epoch` with `log`, `hw` and these followers' fetch
        # offsets: what NewHw(l, Offsets(l)) reads (Offsets counts l's own log end).
        state = dict(init)
        fetched = Fn({**init["fetched"].d, l: Fn({v: o for v, o in offsets if v != l} | {l: -1})})
        for var, value in (("role", "leader"), ("epoch", epoch), ("log", log), ("hw", hw)):
            state[var] = Fn({**init[var].d, l: value})
        state["fetched"] = fetched
        expected = spec.evaluate(f'NewHw("{l}", Offsets("{l}"))', constants, state)
        answer, problem = run_student_code(function, list(log), epoch, dict(offsets), hw)
        if problem is not None:
            return problem
        if answer != expected:
            return Verdict(
                False,
                f"a leader of epoch {epoch} with log {list(log)} (record epochs), HW {hw} and "
                f"offsets {dict(offsets)}: your rule says {answer!r}, the spec's NewHw "
                f"{expected}. The rule: the largest offset a majority of voters has reached "
                "(the leader counts its own log end), taken only if it passes the leader's "
                "LeaderChange record (the first record of its epoch) and is above the HW",
            )
    return Verdict(
        True,
        f"your rule agrees with the spec's NewHw in all {len(cases)} cases (every leader of "
        "the traces, with every HW and every fetch offset of its followers)",
    )
