"""KIP-630 on the sans-IO quorum: snapshots, the log start offset, a Fetch answered with
a SnapshotId and FetchSnapshot in chunks (tests/unit/raft_harness.py's network).

The state machine here is the log itself (raft_harness.snapshot_state): a snapshot
holds every entry below its end offset, so `full_log` rebuilds a voter's whole log
and the invariants of test_raft_properties.py hold across snapshots."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule
from raft_harness import (
    TEST_CONFIG,
    RaftNetwork,
    check_log_matching,
    full_log,
    snapshot_state,
)
from test_raft_properties import CONFIG as PROPERTY_CONFIG
from test_raft_properties import KRaftQuorum

from kafkalab.errors import Errors
from kafkalab.raft.errors import CorruptSnapshotError
from kafkalab.raft.quorum_state_store import MemoryQuorumStateStore
from kafkalab.raft.raft_log import (
    LogEntry,
    OffsetAndEpoch,
    RaftLog,
    ValidOffsetAndEpochKind,
)
from kafkalab.raft.raft_message import FetchSnapshotRequest, RaftMessage
from kafkalab.raft.snapshot import (
    decode_snapshot,
    encode_snapshot,
    parse_snapshot_filename,
    snapshot_filename,
)
from kafkalab.records import iter_batches

# snapshots of a few hundred bytes come in several FetchSnapshot chunks
CONFIG = replace(TEST_CONFIG, fetch_snapshot_max_bytes=100)


def committed_quorum(seed: int = 1, records: int = 12) -> RaftNetwork:
    net = RaftNetwork(config=CONFIG, seed=seed)
    net.run_until(net.has_stable_leader, max_ms=10_000)
    leader = net.leader()
    leader.append([f"r{i}" for i in range(records)], net.now)
    net.run_until(lambda: all(c.high_watermark == leader.log.end_offset for c in net.live()), 5_000)
    return net


# -- the log ----------------------------------------------------------------------------------


def test_a_snapshot_moves_the_log_start_and_answers_fetches_below_it():
    log = RaftLog()
    log.append_as_leader(["a", "b", "c"], 1)
    log.append_as_leader(["d", "e"], 2)
    sid = OffsetAndEpoch(4, 2)
    log.create_snapshot(sid, b"state")
    assert log.delete_before_snapshot(sid)
    assert (log.log_start_offset, log.end_offset, log.latest_snapshot_id) == (4, 5, sid)
    assert [e.offset for e in log.entries] == [4]
    with pytest.raises(ValueError, match="below the log start"):
        log.read(3, 1)
    with pytest.raises(ValueError, match="below the log start"):
        log.truncate_to(3)
    # Kafka's three SNAPSHOT cases, then the ordinary ones
    snap = ValidOffsetAndEpochKind.SNAPSHOT
    assert log.validate_offset_and_epoch(2, 1).kind is snap  # below the log start
    assert log.validate_offset_and_epoch(4, 1).kind is snap  # at it, another epoch
    assert log.validate_offset_and_epoch(0, 0).kind is snap  # an empty follower
    assert log.validate_offset_and_epoch(4, 2).kind is ValidOffsetAndEpochKind.VALID
    assert log.validate_offset_and_epoch(5, 2).kind is ValidOffsetAndEpochKind.VALID
    assert log.validate_offset_and_epoch(6, 2).kind is ValidOffsetAndEpochKind.DIVERGING
    # the snapshot's epoch ended at its end offset, as far as this log can tell
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(5, 2)
    log.truncate_to(4)
    assert log.end_offset_and_epoch() == OffsetAndEpoch(4, 2)  # the snapshot's epoch
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(4, 2)


def test_a_snapshot_must_name_a_place_the_log_holds():
    log = RaftLog()
    log.append_as_leader(["a", "b"], 1)
    log.append_as_leader(["c"], 3)
    with pytest.raises(ValueError, match="epoch"):
        log.create_snapshot(OffsetAndEpoch(3, 1), b"x")  # offset 2 is epoch 3
    with pytest.raises(ValueError, match="outside"):
        log.create_snapshot(OffsetAndEpoch(4, 3), b"x")
    log.create_snapshot(OffsetAndEpoch(3, 3), b"x")


def test_installing_a_snapshot_beyond_the_log_empties_it_and_starts_at_its_end():
    log = RaftLog([LogEntry(0, 1, "a"), LogEntry(1, 1, "b"), LogEntry(2, 2, "stale")])
    sid = OffsetAndEpoch(6, 3)
    log.install_snapshot(sid, b"s")
    assert (log.log_start_offset, log.end_offset, log.entries) == (6, 6, ())
    assert log.end_offset_and_epoch() == sid
    # one the log holds keeps what follows it
    log.append_as_follower([LogEntry(6, 3, "x"), LogEntry(7, 4, "y")])
    log.install_snapshot(OffsetAndEpoch(7, 3), b"t")
    assert [e.record for e in log.entries] == ["y"] and log.snapshot_ids == [OffsetAndEpoch(7, 3)]


def test_snapshot_bytes_are_record_batches_from_a_header_to_a_footer():
    sid = OffsetAndEpoch(17, 4)
    data = encode_snapshot(sid, [{"k": 1}, {"k": 2}], last_contained_log_timestamp=1234)
    batches = list(iter_batches(data))
    assert batches[0].header.is_control_batch and batches[-1].header.is_control_batch
    assert {b.header.partition_leader_epoch for b in batches} == {4}
    assert [r.key[2:] for r in batches[0].records] == [b"\x00\x03"]  # SnapshotHeader
    assert [r.key[2:] for r in batches[-1].records] == [b"\x00\x04"]  # SnapshotFooter
    got = decode_snapshot(data)
    assert got.records == ({"k": 1}, {"k": 2}) and got.last_contained_log_timestamp == 1234
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(data[:-5])  # torn: no whole footer
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(data[len(bytes(batches[0].records[0].value or b"")) :])
    assert snapshot_filename(sid) == "00000000000000000017-0000000004.checkpoint"
    assert parse_snapshot_filename(snapshot_filename(sid) + ".part") == (sid, True)


# -- the quorum -------------------------------------------------------------------------------


def test_a_voter_down_while_the_leader_snapshotted_catches_up_by_fetch_snapshot():
    """KIP-630: the leader's log no longer starts at the stopped voter's log end, so its
    Fetch is answered with a SnapshotId; it fetches the snapshot in chunks, installs it
    and fetches on from its end offset."""
    net = committed_quorum()
    leader = net.leader()
    down = next(v for v in net.voters if v != leader.local_id)
    net.crash(down)
    stale_end = net.logs[down].end_offset
    leader.append([f"s{i}" for i in range(15)], net.now)
    net.run_until(lambda: leader.high_watermark == leader.log.end_offset, 5_000)
    whole = full_log(leader.log)
    sid = snapshot_state(leader, leader.high_watermark - 2)
    assert leader.log.log_start_offset == sid.offset > stale_end
    leader.append(["after"], net.now)
    net.restart(down)
    back = net.clients[down]
    net.run_until(lambda: back.log.end_offset == leader.log.end_offset, 10_000)
    assert back.snapshots_installed == 1
    assert net.delivered["FetchSnapshotRequest"] >= 3  # the snapshot came in chunks
    assert back.log.log_start_offset == sid.offset
    assert back.log.read_snapshot(sid) == leader.log.read_snapshot(sid)
    assert full_log(back.log) == full_log(leader.log)
    assert full_log(back.log)[: len(whole)] == whole
    net.run_until(lambda: back.high_watermark == leader.high_watermark, 5_000)


def test_a_new_empty_voter_catches_up_by_fetch_snapshot():
    """A voter whose disk was replaced (empty log, empty quorum-state) rejoins: its
    Fetch (offset 0, epoch 0) is below the leader's log start."""
    net = committed_quorum(seed=2)
    leader = net.leader()
    for c in net.live():
        snapshot_state(c, c.high_watermark)
    new = next(v for v in net.voters if v != leader.local_id)
    net.crash(new)
    net.logs[new] = RaftLog()
    net.stores[new] = MemoryQuorumStateStore()
    net.restart(new)
    net.run_until(lambda: net.clients[new].log.end_offset == leader.log.end_offset, 10_000)
    assert net.clients[new].snapshots_installed == 1
    assert full_log(net.clients[new].log) == full_log(leader.log)
    # and it can lead: the old leader goes, the two others elect one of themselves
    net.crash(leader.local_id)
    net.run_until(lambda: net.leader() is not None and net.leader().epoch > leader.epoch, 20_000)
    successor = net.leader()
    successor.append(["after-failover"], net.now)
    net.run_until(lambda: successor.high_watermark == successor.log.end_offset, 5_000)
    assert full_log(successor.log)[: len(full_log(leader.log))] == full_log(leader.log)


def test_fetch_snapshot_of_a_snapshot_the_leader_no_longer_holds_is_refused():
    net = committed_quorum(seed=3)
    leader = net.leader()
    follower = next(v for v in net.voters if v != leader.local_id)
    first = snapshot_state(leader, leader.high_watermark - 4)
    second = snapshot_state(leader, leader.high_watermark)
    assert leader.log.snapshot_ids == [second]

    def ask(sid, position):
        req = FetchSnapshotRequest(follower, leader.epoch, sid, position, 50)
        [resp] = leader.handle(RaftMessage(99, follower, leader.local_id, req), net.now)[:1]
        return resp.data

    assert ask(first, 0).error_code == Errors.SNAPSHOT_NOT_FOUND
    size = len(leader.log.read_snapshot(second))
    assert ask(second, size).error_code == Errors.POSITION_OUT_OF_RANGE
    chunk = ask(second, 10)
    assert (chunk.error_code, chunk.size, chunk.position, len(chunk.data)) == (
        Errors.NONE,
        size,
        10,
        50,
    )


def test_a_torn_snapshot_is_never_installed_and_is_fetched_again():
    """The bytes of a FetchSnapshot answer are not a whole snapshot (no footer): the
    follower drops them, fetches again and installs the leader's snapshot whole."""
    net = committed_quorum(seed=5)
    leader = net.leader()
    down = next(v for v in net.voters if v != leader.local_id)
    net.crash(down)
    leader.append(["x"] * 8, net.now)
    net.run_until(lambda: leader.high_watermark == leader.log.end_offset, 5_000)
    sid = snapshot_state(leader, leader.high_watermark)
    whole = leader.log.read_snapshot(sid)
    leader.log._snapshots[sid] = whole[:-20] + bytes(20)  # the footer torn
    net.restart(down)
    back = net.clients[down]
    net.run(2_000)
    assert back.snapshots_installed == 0 and back.log.log_start_offset == 0
    leader.log._snapshots[sid] = whole
    net.run_until(lambda: back.log.end_offset == leader.log.end_offset, 10_000)
    assert back.snapshots_installed == 1 and back.log.read_snapshot(sid) == whole


def test_a_snapshot_is_taken_only_below_the_high_watermark():
    net = committed_quorum(seed=4)
    leader = net.leader()
    leader.append(["uncommitted"], net.now)
    with pytest.raises(ValueError, match="high watermark"):
        snapshot_state(leader, leader.log.end_offset)


# -- the state machine of test_raft_properties, with snapshots --------------------------------


class KRaftQuorumWithSnapshots(KRaftQuorum):
    """Any voter snapshots at or below its high watermark and drops its prefix; the
    invariants compare whole logs (snapshot + entries)."""

    @rule(data=st.data(), back=st.integers(0, 3))
    def voter_snapshots(self, data: st.DataObject, back: int) -> None:
        c = self.net.clients[data.draw(st.sampled_from(self.net.voters))]
        if c.local_id in self.net.down:
            return
        end = c.high_watermark - back
        if end > c.log.log_start_offset:
            snapshot_state(c, end)

    @rule(data=st.data(), ms=st.integers(200, 2000), every=st.integers(1, 10))
    def a_voter_misses_snapshots(self, data: st.DataObject, ms: int, every: int) -> None:
        """A voter is down while the leader, under load, snapshots every `every` steps;
        it comes back (rebuilt from its log and store) and must catch up across them."""
        v = data.draw(st.sampled_from(self.net.voters))
        self.net.crash(v)
        for i in range(ms // 20):
            self.append_on_leader(1)
            self.net.step(20)
            leader = self.net.leader()
            if i % every == 0 and leader is not None:
                if leader.high_watermark > leader.log.log_start_offset:
                    snapshot_state(leader, leader.high_watermark)
        self.net.restart(v)

    @invariant()
    def log_matching(self) -> None:
        logs = [full_log(self.net.logs[v]) for v in self.net.voters]
        for i, a in enumerate(logs):
            for b in logs[i + 1 :]:
                check_log_matching(a, b)

    @invariant()
    def committed_records_are_never_lost(self) -> None:
        for c in self.net.live():
            prefix = full_log(c.log)[: c.high_watermark]
            n = min(len(prefix), len(self.committed))
            assert prefix[:n] == self.committed[:n], f"voter {c.local_id} changed a committed one"
            if len(prefix) > len(self.committed):
                self.committed = prefix
        for c in self.net.leaders():
            held = full_log(c.log)[: len(self.committed)]
            assert held == self.committed, f"leader {c.local_id} lacks committed records"

    @invariant()
    def a_log_starts_at_its_snapshot(self) -> None:
        for v in self.net.voters:
            log = self.net.logs[v]
            if log.log_start_offset > 0:
                assert log.earliest_snapshot_id is not None
                assert log.earliest_snapshot_id.offset == log.log_start_offset


KRaftQuorumWithSnapshots.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
assert PROPERTY_CONFIG.fetch_max_entries == 1
test_kraft_quorum_with_snapshots = KRaftQuorumWithSnapshots.TestCase
