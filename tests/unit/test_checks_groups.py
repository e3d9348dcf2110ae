"""The checks of lab 06 (kafkalab.labs.checks.groups): right answers pass, wrong
ones are "not yet" with the rule, placeholders say what to do. The live objects
are built as the notebooks build them: the sans-IO coordinator stepped by hand,
the real assignors, a real log compacted by the real cleaner."""

import itertools

import pytest

from kafkalab.coordinator.group import GroupConfig, GroupCoordinator, GroupState
from kafkalab.labs.checks import groups as checks
from kafkalab.records import SimpleRecord, build_batch, iter_batches
from kafkalab.storage import LogConfig, UnifiedLog
from kafkalab.storage.log_cleaner import clean

GROUP = "shop"
PROTOCOLS = [("range", b"")]


def not_yet(verdict, *words: str) -> None:
    assert not verdict
    assert str(verdict).startswith("not yet:"), str(verdict)
    for word in words:
        assert word in str(verdict), str(verdict)


def new_coordinator() -> GroupCoordinator:
    ids = itertools.count(1)
    return GroupCoordinator(
        GroupConfig(),
        member_id_factory=lambda client_id, instance_id: f"{instance_id or client_id}-{next(ids)}",
    )


def join(c: GroupCoordinator, member_id: str, client_id: str, now_ms: int):
    effects = c.join_group(
        GROUP,
        member_id,
        protocol_type="consumer",
        protocols=PROTOCOLS,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=30_000,
        client_id=client_id,
        now_ms=now_ms,
        request=f"{client_id} join",
    )
    return c.complete_appends(effects, now_ms, [])


def two_members_in_the_initial_delay() -> GroupCoordinator:
    """Alice joins at 0 (twice: MEMBER_ID_REQUIRED first), Bob at 1000: notebook 01's start."""
    c = new_coordinator()
    for client_id, now in (("alice", 0), ("bob", 1000)):
        member_id = join(c, "", client_id, now).response.member_id
        join(c, member_id, client_id, now)
    return c


def stable_group() -> tuple[GroupCoordinator, int]:
    """Alice and Bob in generation 1, Stable, at 6010 ms."""
    c = two_members_in_the_initial_delay()
    now = c.next_deadline_ms()
    c.complete_appends(c.tick(now), now, [])
    now = c.next_deadline_ms()
    c.complete_appends(c.tick(now), now, [])
    group = c.groups[GROUP]
    assert group.state is GroupState.COMPLETING_REBALANCE
    now += 10
    assignments = {m: b"" for m in group.members}
    effects = c.sync_group(
        GROUP, group.generation_id, "alice-1", assignments=assignments, now_ms=now, request="s"
    )
    c.complete_appends(effects, now, [])
    c.sync_group(GROUP, group.generation_id, "bob-2", now_ms=now, request="s2")
    assert group.state is GroupState.STABLE
    return c, now


# ---------------------------------------------------------------- 06/01


def test_join_phase_end_right_wrong_and_placeholder() -> None:
    c = two_members_in_the_initial_delay()
    assert checks.join_phase_end(6000, "CompletingRebalance", c, GROUP)
    assert checks.join_phase_end(6000, GroupState.COMPLETING_REBALANCE, c, GROUP)
    assert c.groups[GROUP].state is GroupState.PREPARING_REBALANCE  # a copy was stepped
    not_yet(checks.join_phase_end(3000, "CompletingRebalance", c, GROUP), "extends it")
    not_yet(checks.join_phase_end(6000, "Stable", c, GROUP), "waiting for")
    assert "6000" not in str(checks.join_phase_end(3000, "Stable", c, GROUP))
    not_yet(checks.join_phase_end(..., "Stable", c, GROUP), "replace the ...")


def test_a_lone_member_ends_its_join_phase_after_one_delay() -> None:
    c = new_coordinator()
    join(c, join(c, "", "alice", 0).response.member_id, "alice", 0)
    assert checks.join_phase_end(3000, "CompletingRebalance", c, GROUP)
    not_yet(checks.join_phase_end(6000, "CompletingRebalance", c, GROUP))


def test_state_after_session_timeout() -> None:
    c, now = stable_group()
    for t in range(now + 3000, now + 10_000, 3000):  # Bob stays silent
        c.heartbeat(GROUP, 1, "alice-1", now_ms=t, request="hb")
    deadline = c.groups[GROUP].members["bob-2"].heartbeat_deadline_ms
    assert checks.state_after_session_timeout("PreparingRebalance", ["alice-1"], c, GROUP, deadline)
    assert GROUP in c.groups and "bob-2" in c.groups[GROUP].members  # untouched
    not_yet(
        checks.state_after_session_timeout(
            "PreparingRebalance", ["alice-1", "bob-2"], c, GROUP, deadline
        ),
        "session deadline",
    )
    not_yet(
        checks.state_after_session_timeout("Stable", ["alice-1"], c, GROUP, deadline), "membership"
    )
    not_yet(checks.state_after_session_timeout("Stable", "alice-1", c, GROUP, deadline), "list")
    not_yet(checks.state_after_session_timeout(..., ..., c, GROUP, deadline), "replace the ...")
    # before the deadline nobody is removed: the same answer is wrong then
    not_yet(
        checks.state_after_session_timeout(
            "PreparingRebalance", ["alice-1"], c, GROUP, deadline - 1
        )
    )


def test_state_after_leaving() -> None:
    c, now = stable_group()
    both = ["alice-1", "bob-2"]
    assert checks.state_after_leaving("Empty", 2, c, GROUP, both, now + 1000)
    assert c.groups[GROUP].state is GroupState.STABLE
    not_yet(checks.state_after_leaving("Empty", 1, c, GROUP, both, now + 1000), "generation")
    not_yet(checks.state_after_leaving("Dead", 2, c, GROUP, both, now + 1000), "no members")
    # one of two leaving: a rebalance is prepared, no new generation yet
    assert checks.state_after_leaving("PreparingRebalance", 1, c, GROUP, ["bob-2"], now + 1000)
    not_yet(checks.state_after_leaving(..., 2, c, GROUP, both, now + 1000), "replace the ...")


# ---------------------------------------------------------------- 06/02

TOPICS = {"orders": 6, "payments": 6}


def range_by_hand() -> dict:
    def per_topic(parts: dict) -> dict:
        return {m: [(t, p) for t in sorted(TOPICS) for p in ps] for m, ps in parts.items()}

    return per_topic({"a": [0, 1], "b": [2, 3], "c": [4], "d": [5]})


def test_range_assignment() -> None:
    members = ["a", "b", "c", "d"]
    assert checks.range_assignment(range_by_hand(), TOPICS, members)
    # round robin over everything: balanced, but not range's answer
    everything = [(t, p) for t in sorted(TOPICS) for p in range(6)]
    dealt = {m: everything[i::4] for i, m in enumerate(members)}
    not_yet(checks.range_assignment(dealt, TOPICS, members), "'orders'", "n // members")
    # range's share, but c before d in one topic only
    wrong = range_by_hand()
    wrong["c"], wrong["d"] = [("orders", 5), ("payments", 4)], [("orders", 4), ("payments", 5)]
    not_yet(checks.range_assignment(wrong, TOPICS, members), "'orders'")
    missing = range_by_hand()
    del missing["d"]
    not_yet(checks.range_assignment(missing, TOPICS, members), "one entry")
    twice = range_by_hand()
    twice["d"] = twice["d"] + [("orders", 0)]
    not_yet(checks.range_assignment(twice, TOPICS, members), "exactly one member")
    not_yet(checks.range_assignment([("orders", 0)], TOPICS, members), "dict")
    not_yet(checks.range_assignment(..., TOPICS, members), "replace the ...")


def test_moved_and_revoked() -> None:
    moved = {"sticky": 3, "cooperative-sticky": 3}
    revoked = {"sticky": 12, "cooperative-sticky": 3}
    assert checks.moved_and_revoked(moved, revoked, TOPICS)
    # three topics (16 partitions: 6, 5, 5 over three members, 4 each over four)
    three = {**TOPICS, "refunds": 4}
    assert checks.moved_and_revoked(
        {"sticky": 4, "cooperative-sticky": 4}, {"sticky": 16, "cooperative-sticky": 4}, three
    )
    not_yet(checks.moved_and_revoked(moved, {**revoked, "sticky": 3}, TOPICS), "eager")
    not_yet(
        checks.moved_and_revoked(moved, {**revoked, "cooperative-sticky": 12}, TOPICS),
        "only what moves",
    )
    not_yet(checks.moved_and_revoked({**moved, "sticky": 12}, revoked, TOPICS), "balance requires")
    not_yet(checks.moved_and_revoked({"sticky": 3}, revoked, TOPICS), "keys")
    not_yet(checks.moved_and_revoked(moved, ..., TOPICS), "replace the ...")


def test_cooperative_rounds() -> None:
    assert checks.cooperative_rounds([0, 3], TOPICS)
    assert checks.cooperative_rounds((0, 4), {**TOPICS, "refunds": 4})
    not_yet(checks.cooperative_rounds([3, 3], TOPICS), "round 1", "changes owner")
    not_yet(checks.cooperative_rounds([0, 4], TOPICS), "balanced share")
    not_yet(checks.cooperative_rounds([3], TOPICS), "round(s)")
    not_yet(checks.cooperative_rounds(3, TOPICS), "list")
    not_yet(checks.cooperative_rounds(..., TOPICS), "replace the ...")


# ---------------------------------------------------------------- 06/03


def kip848_snapshots() -> list:
    """a and b Stable (group epoch 2); c joins; heartbeats until Stable: describe at each step."""
    c = new_coordinator()
    c.update_topic_metadata({"epochs": 6})
    owned: dict[str, list] = {}
    epoch: dict[str, int] = {}

    def heartbeat(m: str) -> None:
        first = m not in epoch
        r = c.consumer_group_heartbeat(
            "g",
            m,
            0 if first else epoch[m],
            subscribed_topic_names=["epochs"] if first else None,
            rebalance_timeout_ms=30_000 if first else -1,
            owned_partitions=None if first else owned[m],
            client_id=m,
            now_ms=0,
        ).response
        epoch[m] = r.member_epoch
        if r.assignment is not None:
            owned[m] = sorted(r.assignment)
        owned.setdefault(m, [])

    for m in ("a", "b", "a", "b", "a", "b"):
        heartbeat(m)
    snapshots = [c.consumer_group_describe("g")]
    assert snapshots[0].state == "Stable" and snapshots[0].group_epoch == 2
    for m in ("c", "a", "b", "c", "a", "b", "c", "a", "b", "c"):
        heartbeat(m)
        snapshots.append(c.consumer_group_describe("g"))
    assert snapshots[-1].state == "Stable"
    return snapshots


def test_epochs_after_a_join() -> None:
    snapshots = kip848_snapshots()
    assert checks.epochs_after_a_join(3, 3, snapshots)
    not_yet(checks.epochs_after_a_join(4, 3, snapshots), "how many")
    not_yet(checks.epochs_after_a_join(3, 2, snapshots), "assignment epoch")
    not_yet(checks.epochs_after_a_join(3, ..., snapshots), "replace the ...")
    not_yet(checks.epochs_after_a_join(3, 3, snapshots[:2]), "not reconciled")


@pytest.fixture
def compacted(tmp_path):
    """A real log: commits of three keys, a deleted key (tombstone), rolled and cleaned once."""
    log = UnifiedLog(tmp_path / "__consumer_offsets-0", LogConfig(cleanup_policy="compact"))
    writes = [(b"p0", b"1"), (b"p1", b"1"), (b"p0", b"2"), (b"gone", b"x"), (b"p2", b"1")]
    writes += [(b"p1", b"2"), (b"gone", None), (b"p0", b"3")]
    for key, value in writes:
        log.append_as_leader(build_batch([SimpleRecord(value, key=key)]), leader_epoch=0)
    records = [
        (offset, key.decode(), "<DELETE>" if value is None else value.decode())
        for offset, (key, value) in enumerate(writes)
    ]
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clean(log)
    kept = [r.offset for s in log.segments for b in iter_batches(s.log.read()) for r in b.records]
    log.close()
    return records, kept


def test_compaction_survivors(compacted) -> None:
    records, kept = compacted
    assert sorted(kept) == [4, 5, 6, 7]  # the real cleaner: latest per key, the tombstone kept

    def latest_per_key(rs):
        return {k: o for o, k, _ in rs}.values()

    def first_per_key(rs):
        out = {}
        for o, k, _ in rs:
            out.setdefault(k, o)
        return out.values()

    def without_tombstones(rs):
        latest = {k: o for o, k, _ in rs}
        return {o for o, k, v in rs if latest[k] == o and v != "<DELETE>"}

    def everything(rs):
        return [o for o, _, _ in rs]

    def placeholder(rs): ...

    def crashes(rs):
        return rs[100]

    assert checks.compaction_survivors(latest_per_key, records, kept + [8, 9])
    not_yet(checks.compaction_survivors(first_per_key, records, kept), "supersedes")
    not_yet(checks.compaction_survivors(everything, records, kept), "supersedes")
    not_yet(checks.compaction_survivors(without_tombstones, records, kept), "tombstones")
    not_yet(
        checks.compaction_survivors(lambda rs: [7], records, kept), "latest record of every key"
    )
    not_yet(checks.compaction_survivors(lambda rs: [42], records, kept), "not records")
    not_yet(checks.compaction_survivors(lambda rs: 7, records, kept), "set of ints")
    not_yet(checks.compaction_survivors(placeholder, records, kept), "replace the ...")
    not_yet(checks.compaction_survivors(crashes, records, kept), "IndexError")
    not_yet(checks.compaction_survivors(..., records, kept), "replace the ...")
