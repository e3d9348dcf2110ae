"""Checks for lab 06, consumer groups: the classic coordinator's states, the
assignors, cooperative rebalancing, KIP-848's epochs and the compaction of
``__consumer_offsets``.

Every expected answer is worked out here from the live objects the notebook
built: a copy of the notebook's own GroupCoordinator stepped one step further,
kafkalab's real assignors, the group as ConsumerGroupDescribe described it,
the records the real log cleaner kept.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kafkalab.client.assignors import RebalanceProtocol, assignor_for
from kafkalab.coordinator.group import GroupState
from kafkalab.labs.checks import UNANSWERED, Verdict, answered, compare, run_student_code, verdict
from kafkalab.protocol.consumer_protocol import Subscription

TopicPartition = tuple[str, int]

__all__ = [
    "compaction_survivors",
    "cooperative_rounds",
    "epochs_after_a_join",
    "join_phase_end",
    "moved_and_revoked",
    "range_assignment",
    "state_after_leaving",
    "state_after_session_timeout",
]


def _state(state: Any) -> str:
    """'PreparingRebalance', GroupState.PREPARING_REBALANCE, 'preparing_rebalance': one name."""
    if isinstance(state, GroupState):
        return state.value
    text = str(state).replace("_", "").replace(" ", "").lower()
    return next((s.value for s in GroupState if s.value.lower() == text), str(state))


def _settle(coordinator: Any, effects: Any, now_ms: int) -> None:
    # The notebook's stand-in log: every append succeeds (the records go nowhere here).
    coordinator.complete_appends(effects, now_ms, [])


# ---------------------------------------------------------------- 06/01: the classic coordinator


def join_phase_end(ends_at_ms: Any, state_after: Any, coordinator: Any, group_id: str) -> Verdict:
    """When does the join phase of a new group end, and in which state is it then?

    The rule (Kafka's InitialDelayedJoin): an Empty group's first join waits
    ``group.initial.rebalance.delay.ms``; a member joining during that wait
    extends it by another delay (never past ``rebalance.timeout.ms``). When the
    join phase ends, every parked JoinGroup is answered and the group waits in
    CompletingRebalance for the leader's SyncGroup. Worked out by letting a
    copy of the notebook's coordinator's clock run to each deadline in turn.
    """
    if not answered(ends_at_ms, state_after):
        return UNANSWERED
    twin = copy.deepcopy(coordinator)
    group = twin.groups[group_id]
    now = None
    for _ in range(100):
        if group.state is not GroupState.PREPARING_REBALANCE:
            break
        now = twin.next_deadline_ms()
        _settle(twin, twin.tick(now), now)
    expected_state = group.state.value
    when = compare(
        ends_at_ms,
        now,
        what="the time the join phase ends (ms)",
        why="Bob joined during the initial delay, so the coordinator waited another "
        "group.initial.rebalance.delay.ms from the end of the first delay",
        hint="the first delay is group.initial.rebalance.delay.ms after the first join; a "
        "member joining during it extends it by one more delay (up to rebalance.timeout.ms)",
    )
    if not when:
        return when
    state = compare(
        _state(state_after),
        expected_state,
        what="the state once the join phase is over",
        why="every JoinGroup is answered, and the group waits for the leader's SyncGroup",
        hint="the JoinGroups are answered; the group has members and a leader, but nobody "
        "has an assignment yet: what is it waiting for?",
    )
    return Verdict(True, f"{when.why}; {state.why}") if state else state


def state_after_session_timeout(
    state: Any, members: Any, coordinator: Any, group_id: str, now_ms: int
) -> Verdict:
    """The group's state and members once the clock reaches a silent member's deadline.

    The rule: a member whose heartbeats stopped for ``session.timeout.ms`` is
    removed when the clock passes its deadline; a Stable group then prepares
    a rebalance for the members left, who learn of it from their next
    heartbeat (REBALANCE_IN_PROGRESS). Worked out with ``tick(now_ms)`` on a
    copy of the notebook's coordinator.
    """
    if not answered(state, members):
        return UNANSWERED
    twin = copy.deepcopy(coordinator)
    _settle(twin, twin.tick(now_ms), now_ms)
    group = twin.groups[group_id]
    expected_members = set(group.members)
    if isinstance(members, str) or not isinstance(members, Iterable):
        return Verdict(False, "give the members as a list of member ids, e.g. ['alice-1']")
    if set(members) != expected_members:
        return Verdict(
            False,
            f"the members are not {sorted(members)}: the coordinator removes exactly the "
            "members whose session deadline has passed; the others stay (with their ids)",
        )
    return compare(
        _state(state),
        group.state.value,
        what="the state after the session timeout",
        why=f"the coordinator removed the silent member and waits for {sorted(expected_members)} "
        "to rejoin for a new generation",
        hint="a member's departure changes the membership: what must happen before the "
        "remaining members can have a new assignment?",
    )


def state_after_leaving(
    state: Any,
    generation: Any,
    coordinator: Any,
    group_id: str,
    leaving: Sequence[str],
    now_ms: int,
) -> Verdict:
    """State and generation of the group once every member in ``leaving`` sent LeaveGroup.

    The rule: a LeaveGroup removes the member and starts a rebalance; when the
    last member is gone the join phase completes at once with nobody in it,
    which is a new generation like any other, and the group is Empty (the
    coordinator writes the empty group to ``__consumer_offsets``; the
    committed offsets stay, until they expire). Worked out by sending the
    LeaveGroups to a copy of the notebook's coordinator.
    """
    if not answered(state, generation):
        return UNANSWERED
    twin = copy.deepcopy(coordinator)
    effects = twin.leave_group(
        group_id, [(m, None) for m in leaving], now_ms=now_ms, request="leave"
    )
    _settle(twin, effects, now_ms)
    group = twin.groups[group_id]
    before = coordinator.groups[group_id].generation_id
    gen = compare(
        generation,
        group.generation_id,
        what="the generation after everyone left",
        why=f"the rebalance the leaves started completed with no members: generation {before} "
        "plus one, with nobody in it",
        hint="a LeaveGroup starts a rebalance; does a rebalance with no members left still "
        "complete, and what does completing a join phase do to the generation?",
    )
    if not gen:
        return gen
    st = compare(
        _state(state),
        group.state.value,
        what="the state after everyone left",
        why="a group without members, whose offsets are still kept",
        hint="which state does a group with no members at all have?",
    )
    return Verdict(True, f"{gen.why}; {st.why}") if st else st


# ---------------------------------------------------------------- 06/02: assignors


def _normalise(plan: Mapping[str, Iterable[TopicPartition]]) -> dict[str, list[TopicPartition]]:
    return {m: sorted((str(t), int(p)) for t, p in parts) for m, parts in plan.items()}


def range_assignment(answer: Any, topics: Mapping[str, int], members: Sequence[str]) -> Verdict:
    """The range assignor's answer for ``members``, all subscribed to every topic.

    The rule (Kafka's RangeAssignor): topic by topic, partitions in order and
    members sorted by member id; each member gets ``n // len(members)``
    consecutive partitions, and the first ``n % len(members)`` members one more.
    Worked out by kafkalab's RangeAssignor.
    """
    if not answered(answer):
        return UNANSWERED
    subscriptions = {m: Subscription(tuple(sorted(topics))) for m in members}
    expected = _normalise(assignor_for("range").assign(topics, subscriptions))
    if not isinstance(answer, Mapping):
        return Verdict(False, "give a dict: member -> list of (topic, partition)")
    try:
        given = _normalise(answer)
    except (TypeError, ValueError):
        return Verdict(False, "each member's value is a list of (topic, partition) pairs")
    if set(given) != set(expected):
        return Verdict(False, f"give one entry for each of the members {sorted(expected)}")
    everything = sorted(tp for parts in given.values() for tp in parts)
    if everything != sorted((t, p) for t, n in topics.items() for p in range(n)):
        return Verdict(
            False,
            "every partition of every topic goes to exactly one member (none left out, none twice)",
        )
    if given == expected:
        return Verdict(
            True,
            "range deals each topic on its own, from the first member in sorted order: "
            "with partitions that do not divide evenly the first members get one more in "
            "every topic, so the group ends unbalanced",
        )
    for topic in sorted(topics):
        mine = {m: [p for t, p in parts if t == topic] for m, parts in given.items()}
        theirs = {m: [p for t, p in parts if t == topic] for m, parts in expected.items()}
        if mine != theirs:
            return Verdict(
                False,
                f"topic {topic!r} is not dealt as range deals it: partitions in order, members "
                "sorted by member id, each gets n // members consecutive partitions and the "
                "first n % members get one more",
            )
    return Verdict(False, "compare your answer with the range rule, topic by topic")


def _d_joins(strategy: str, topics: Mapping[str, int]) -> tuple[int, int, list[int]]:
    """Members a, b, c form a group; then d joins. Returns (moved, revoked) for d's join,
    and how many partitions d owns after each round of it.

    Played with the real assignor, as the notebook's ``play`` does: each member
    has its own assignor object; eager members revoke everything before they
    rejoin; cooperative ones send what they own and revoke what the answer no
    longer holds, and rebalance again while anyone revoked something.
    """
    names = ["a", "b", "c"]
    assignors = {n: assignor_for(strategy) for n in "abcd"}
    cooperative = assignors["a"].supported_protocols[0] is RebalanceProtocol.COOPERATIVE
    owned: dict[str, list[TopicPartition]] = {n: [] for n in "abcd"}
    member_generation = dict.fromkeys("abcd", -1)
    generation = 0

    def rebalance() -> int:
        nonlocal generation
        generation += 1
        revoked = 0
        if not cooperative:
            revoked = sum(len(owned[n]) for n in names)
            for n in names:
                owned[n] = []
        subscriptions = {
            n: Subscription(
                tuple(sorted(topics)),
                user_data=assignors[n].subscription_user_data(set(topics)),
                owned_partitions=tuple(owned[n]) if cooperative else (),
                generation_id=member_generation[n] if cooperative else -1,
            )
            for n in names
        }
        plan = assignors[names[0]].assign(topics, subscriptions)
        for n in names:
            new = list(plan[n])
            assignors[n].on_assignment(new, generation)
            member_generation[n] = generation
            if cooperative:
                revoked += len([tp for tp in owned[n] if tp not in new])
            owned[n] = new
        return revoked

    while rebalance() and cooperative:
        pass
    before = {tp: n for n in names for tp in owned[n]}
    names.append("d")
    revoked = more = rebalance()
    d_per_round = [len(owned["d"])]
    while cooperative and more:  # a second round hands over what the first revoked
        more = rebalance()
        revoked += more
        d_per_round.append(len(owned["d"]))
    after = {tp: n for n in names for tp in owned[n]}
    moved = sum(1 for tp, n in before.items() if after.get(tp) != n)
    return moved, revoked, d_per_round


def moved_and_revoked(moved: Any, revoked: Any, topics: Mapping[str, int]) -> Verdict:
    """How many partitions move, and how many are revoked, when d joins a, b and c?

    Answers are dicts keyed ``"sticky"`` and ``"cooperative-sticky"``. The rule:
    both sticky assignors move only what balance requires (the same number);
    the eager one has every member revoke everything it owns before it
    rejoins; the cooperative one revokes only what moves. Worked out by
    playing the step with kafkalab's real assignors.
    """
    if not answered(moved, revoked):
        return UNANSWERED
    strategies = ("sticky", "cooperative-sticky")
    for name, answer in (("moved", moved), ("revoked", revoked)):
        if not isinstance(answer, Mapping) or set(answer) != set(strategies):
            return Verdict(False, f"give {name} as a dict with the keys {list(strategies)}")
    expected = {s: _d_joins(s, topics)[:2] for s in strategies}
    total = sum(topics.values())
    for s in strategies:
        if moved[s] != expected[s][0]:
            return Verdict(
                False,
                f"under {s}, {moved[s]!r} partitions do not move: count the partitions whose "
                f"owner changes; {total} partitions over 3 members, then over 4, and a sticky "
                "assignor takes from each member only what balance requires",
            )
    for s in strategies:
        if revoked[s] != expected[s][1]:
            why = (
                "an eager member revokes everything it owns before it rejoins, whether or not "
                "it gets it back"
                if s == "sticky"
                else "a cooperative member keeps what stays its own and revokes only what moves"
            )
            return Verdict(False, f"under {s}, {revoked[s]!r} partitions are not revoked: {why}")
    return Verdict(
        True,
        f"both move {expected['sticky'][0]} (what balance requires); sticky revokes "
        f"{expected['sticky'][1]} (everything, eagerly) and cooperative-sticky "
        f"{expected['cooperative-sticky'][1]} (only what moves, handed over in a second round)",
    )


def cooperative_rounds(d_owns_after_round: Any, topics: Mapping[str, int]) -> Verdict:
    """What ``d`` owns after each round of its join under cooperative-sticky.

    The answer is a list, one number per round. The rule (KIP-429): round 1's
    assignment leaves out every partition that changes owner, so its old owner
    revokes it and nobody gets it; the members that revoked something rejoin at
    once, and round 2, with those partitions owned by nobody, gives them to
    ``d``. Worked out by playing the step with kafkalab's CooperativeStickyAssignor.
    """
    if not answered(d_owns_after_round):
        return UNANSWERED
    expected = _d_joins("cooperative-sticky", topics)[2]
    if isinstance(d_owns_after_round, (str, bytes)) or not isinstance(d_owns_after_round, Sequence):
        return Verdict(False, "give a list: how many partitions d owns after each round")
    if len(d_owns_after_round) != len(expected):
        return Verdict(
            False,
            f"the join does not take {len(d_owns_after_round)} round(s): a round that revoked "
            "something is followed by another, until one revokes nothing",
        )
    if d_owns_after_round[0] != expected[0]:
        return Verdict(
            False,
            f"d does not own {d_owns_after_round[0]!r} after round 1: the first round's "
            "assignment leaves out every partition that changes owner (its old owner still "
            "holds it)",
        )
    return compare(
        list(d_owns_after_round),
        expected,
        what="d's partitions after each round",
        why="round 1 only takes partitions away (nobody may own one twice); round 2 gives "
        "d what round 1 freed, its share of the group",
        hint="after round 2, d has its balanced share of all the partitions",
    )


# ---------------------------------------------------------------- 06/03: KIP-848 and compaction


def epochs_after_a_join(group_epoch: Any, member_epoch: Any, snapshots: Sequence[Any]) -> Verdict:
    """KIP-848: the group epoch after a member joins, and the epoch each member ends at.

    ``snapshots`` are ConsumerGroupDescribe answers (``Admin.describe_consumer_group``)
    from before the join until the group was Stable again. The rule: the group
    epoch goes up by one for each change of membership or subscriptions; the
    coordinator computes the target assignment at that epoch (the assignment
    epoch); each member's epoch reaches the assignment epoch once it has given
    up what the target takes from it, so in a Stable group every member's
    epoch is the group epoch.
    """
    if not answered(group_epoch, member_epoch):
        return UNANSWERED
    first, last = snapshots[0], snapshots[-1]
    g = compare(
        group_epoch,
        last.group_epoch,
        what="the group epoch after the join",
        why=f"one more than {first.group_epoch}: one membership change, one bump",
        hint="the group epoch counts changes of membership (and of subscriptions): how many "
        "did the join make?",
    )
    if not g:
        return g
    epochs = {m.member_epoch for m in last.members}
    if len(epochs) != 1:
        return Verdict(False, f"the last snapshot is not reconciled yet ({sorted(epochs)})")
    m = compare(
        member_epoch,
        epochs.pop(),
        what="every member's epoch once the group is Stable",
        why=f"the assignment epoch ({last.assignment_epoch}): a member reaches it once it has "
        "revoked what the new target takes from it",
        hint="a member's epoch moves to the assignment epoch, the group epoch the target "
        "assignment was computed at, once the member has given up what moves",
    )
    return Verdict(True, f"{g.why}; {m.why}") if m else m


def compaction_survivors(
    survivors: Callable[[list[tuple[int, str, str]]], Iterable[int]],
    records: Sequence[tuple[int, str, str]],
    kept: Iterable[int],
) -> Verdict:
    """The student's ``survivors(records)`` against what the real log cleaner kept.

    ``records`` are the closed segment's records as ``(offset, key, value)``,
    a tombstone's value being ``"<DELETE>"``; ``kept`` the offsets in the log
    after the cleaner's first pass (those of later segments are ignored). The rule:
    the cleaner keeps the latest record of each key; a tombstone is the latest
    record of its key, and a first pass keeps it too (it goes in the first
    pass after ``delete.retention.ms`` has passed since it was first cleaned).
    """
    if not answered(survivors):
        return UNANSWERED
    result, problem = run_student_code(survivors, list(records))
    if problem is not None:  # a Verdict, falsy: test for None
        return problem
    try:
        mine = {int(o) for o in result}
    except (TypeError, ValueError):
        return Verdict(False, "return the offsets that survive, e.g. a set of ints")
    key_of = {o: k for o, k, _ in records}
    real = set(kept) & set(key_of)  # what the pass kept of this segment (not what came after)
    latest: dict[str, int] = {}
    for o, k, _ in records:
        latest[k] = o
    tombstones = {o for o, _, v in records if "<DELETE>" in str(v)}
    if unknown := mine - set(key_of):
        return Verdict(False, f"{len(unknown)} offsets you kept are not records of the segment")
    if extra := mine - real:
        o = min(extra)
        return Verdict(
            False,
            f"{len(extra)} of your survivors are gone, e.g. offset {o}, key {key_of[o]}: "
            "a later record of the same key supersedes it",
        )
    missing = real - mine
    if missing - tombstones:
        o = min(missing - tombstones)
        return Verdict(
            False,
            f"{len(missing - tombstones)} records the cleaner kept are missing, e.g. offset {o}, "
            f"key {key_of[o]}: the latest record of every key survives",
        )
    if missing:
        return Verdict(
            False,
            "you dropped tombstones: the first pass keeps a tombstone (it is the latest record "
            "of its key), so that a reader that is behind still sees the deletion; it goes "
            "only delete.retention.ms after that pass",
        )
    agrees = real == set(latest.values())
    return verdict(
        agrees,
        f"the cleaner kept {len(real)} of {len(records)} records: the latest of each of the "
        f"{len(latest)} keys, tombstones included (their values are gone already)",
        "your answer matches the cleaner, but the cleaner did not keep exactly one record per key",
    )
