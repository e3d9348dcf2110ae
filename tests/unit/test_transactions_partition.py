"""Transactions in one partition: producer state, last stable offset and the `.txnindex`.

The hypothesis test drives a real UnifiedLog with random transactional and plain
batches, COMMIT/ABORT markers, high watermark moves, truncations, clean restarts
and crashes (with damaged `.txnindex` files), and checks after every step the
ongoing transactions, the LSO, every segment's `.txnindex` and
collect_aborted_transactions against a model that recomputes everything from the
list of batches in the log.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalab.records import SimpleRecord, build_batch
from kafkalab.records.control_record import ControlRecordType, build_end_txn_marker_batch
from kafkalab.storage import LogConfig, UnifiedLog
from kafkalab.storage.errors import ControlBatchFromClientError
from kafkalab.storage.producer_state_manager import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from kafkalab.storage.transaction_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
)
from kafkalab.storage.unified_log import AppendOrigin, FetchIsolation

COORDINATOR = AppendOrigin.COORDINATOR


def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = 0) -> bytes:
    return build_batch(
        [SimpleRecord(b"t%d-%d" % (pid, seq + i)) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


def marker(pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_end_txn_marker_batch(pid, epoch, kind, coordinator_epoch)


def next_seq(log: UnifiedLog, pid: int) -> int:
    entry = log.producer_state.producers.get(pid)
    return 0 if entry is None else entry.last_seq + 1


# -- examples ---------------------------------------------------------------------------------


def test_lso_follows_open_transactions_and_the_high_watermark(tmp_path):
    log = UnifiedLog(tmp_path / "t-0")
    log.append_as_leader(build_batch([b"a"]))  # 0
    log.append_as_leader(txn_batch(1, 0))  # 1-2, opens pid 1
    log.append_as_leader(txn_batch(2, 0))  # 3-4, opens pid 2
    assert log.last_stable_offset == 0  # the HW is still 0
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 1
    assert log.last_fetchable_offset(FetchIsolation.TXN_COMMITTED) == 1
    assert log.last_fetchable_offset(FetchIsolation.HIGH_WATERMARK) == 5
    log.append_as_leader(marker(1, commit=False), origin=COORDINATOR)  # 5: abort pid 1
    # The abort is not yet below the HW: the transaction is not stable yet.
    assert log.last_stable_offset == 1
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 3  # pid 2's transaction holds it now
    aborted = log.collect_aborted_transactions(0, log.log_end_offset)
    assert aborted == [AbortedTxn(1, 1, 5, 3)]  # LSO at the abort: pid 2's first offset
    log.append_as_leader(marker(2, commit=True), origin=COORDINATOR)  # 6
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 7 == log.high_watermark
    assert log.collect_aborted_transactions(6, 7) == []  # the abort ended before 6
    described = log.producer_state.producers
    assert described[1].current_txn_first_offset is None
    assert described[2].coordinator_epoch == 0
    info = log.read(0, 10_000, max_offset=log.last_stable_offset)
    assert info.size_in_bytes == log.size
    log.close()


def test_txnindex_is_kafkas_byte_format(tmp_path):
    log = UnifiedLog(tmp_path / "t-0")
    log.append_as_leader(txn_batch(9, 0, n=3))  # 0-2
    log.append_as_leader(marker(9, commit=False), origin=COORDINATOR)  # 3
    log.close()
    data = (tmp_path / "t-0" / "00000000000000000000.txnindex").read_bytes()
    assert len(data) == ENTRY_SIZE == 34
    # version int16 0, producerId int64, firstOffset, lastOffset, lastStableOffset int64
    assert data == (
        (0).to_bytes(2, "big")
        + (9).to_bytes(8, "big")
        + (0).to_bytes(8, "big")
        + (3).to_bytes(8, "big")
        + (4).to_bytes(8, "big")
    )
    from kafkalab.viz import index_entries  # what the labs show of it

    table = index_entries(tmp_path / "t-0" / "00000000000000000000.txnindex")
    assert table.to_dict("records") == [
        {
            "version": 0,
            "producer id": 9,
            "first offset": 0,
            "last offset": 3,
            "last stable offset": 4,
        }
    ]


def test_a_segment_without_aborts_has_no_txnindex(tmp_path):
    log = UnifiedLog(tmp_path / "t-0")
    log.append_as_leader(txn_batch(1, 0))
    log.append_as_leader(marker(1, commit=True), origin=COORDINATOR)
    log.close()
    assert not list((tmp_path / "t-0").glob("*.txnindex"))


def test_clients_may_not_write_markers_and_markers_are_checked(tmp_path):
    log = UnifiedLog(tmp_path / "t-0")
    with pytest.raises(ControlBatchFromClientError, match="transaction coordinator") as e:
        log.append_as_leader(marker(1, commit=True))
    assert e.value.code == 87  # INVALID_RECORD, as Kafka answers
    log.append_as_leader(txn_batch(1, 0, epoch=2))
    with pytest.raises(InvalidTxnStateError):  # a plain batch inside its own transaction
        log.append_as_leader(build_batch([b"x"], producer_id=1, producer_epoch=2, base_sequence=2))
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(marker(1, commit=True, epoch=1), origin=COORDINATOR)
    log.append_as_leader(marker(1, True, epoch=2, coordinator_epoch=5), origin=COORDINATOR)
    with pytest.raises(TransactionCoordinatorFencedError) as fenced:
        log.append_as_leader(marker(1, True, epoch=2, coordinator_epoch=4), origin=COORDINATOR)
    assert fenced.value.code == 52
    with pytest.raises(InvalidProducerEpochError):  # a fenced producer's data
        log.append_as_leader(txn_batch(1, 0, epoch=1))
    log.close()


def test_open_transactions_survive_a_restart_in_the_snapshot(tmp_path):
    config = LogConfig(segment_bytes=300)
    log = UnifiedLog(tmp_path / "t-0", config)
    for seq in range(0, 12, 2):
        log.append_as_leader(txn_batch(4, seq))
    log.update_high_watermark(log.log_end_offset)
    assert len(log.segments) > 1
    hw = log.high_watermark
    log.close()
    reopened = UnifiedLog(tmp_path / "t-0", config, high_watermark=hw, clean_shutdown=True)
    assert reopened.producer_state.producers[4].current_txn_first_offset == 0
    assert reopened.last_stable_offset == 0
    reopened.append_as_leader(marker(4, commit=True, coordinator_epoch=3), origin=COORDINATOR)
    reopened.update_high_watermark(reopened.log_end_offset)
    assert reopened.last_stable_offset == reopened.log_end_offset
    reopened.close()


def test_recovery_rebuilds_the_txnindex_and_forgets_replicated_markers(tmp_path):
    config = LogConfig(segment_bytes=300)
    log = UnifiedLog(tmp_path / "t-0", config)
    log.append_as_leader(txn_batch(1, 0))  # 0-1
    log.append_as_leader(txn_batch(2, 0))  # 2-3
    log.append_as_leader(marker(1, commit=False), origin=COORDINATOR)  # 4
    for seq in range(2, 10, 2):
        log.append_as_leader(txn_batch(2, seq))
    log.append_as_leader(marker(2, commit=False), origin=COORDINATOR)
    log.update_high_watermark(log.log_end_offset)
    want = log.collect_aborted_transactions(0, log.log_end_offset)
    assert [t.producer_id for t in want] == [1, 2] and len(log.segments) > 1
    hw = log.high_watermark
    for segment in log.segments:
        segment.txn_index.close()
    for path in (tmp_path / "t-0").glob("*.txnindex"):
        path.unlink()  # lost in the crash
    crashed = UnifiedLog(tmp_path / "t-0", config, high_watermark=hw, recovery_point=0)
    assert crashed.collect_aborted_transactions(0, crashed.log_end_offset) == want
    # Both markers are below the HW: nothing is unstable after the replay.
    assert crashed.last_stable_offset == hw
    crashed.close()


def test_a_damaged_txnindex_is_rebuilt_even_after_a_clean_shutdown(tmp_path):
    config = LogConfig(segment_bytes=300)
    log = UnifiedLog(tmp_path / "t-0", config)
    log.append_as_leader(txn_batch(1, 0))
    log.append_as_leader(marker(1, commit=False), origin=COORDINATOR)
    while len(log.segments) < 3:
        log.append_as_leader(build_batch([b"filler"] * 4))
    log.update_high_watermark(log.log_end_offset)
    want = log.collect_aborted_transactions(0, log.log_end_offset)
    hw = log.high_watermark
    log.close()
    index = tmp_path / "t-0" / "00000000000000000000.txnindex"
    with open(index, "ab") as f:
        f.write(b"\x00\x00torn")  # half an entry: the sanity check refuses the file
    reopened = UnifiedLog(tmp_path / "t-0", config, high_watermark=hw, clean_shutdown=True)
    assert (0, 0) in reopened.recovered
    assert reopened.collect_aborted_transactions(0, reopened.log_end_offset) == want
    assert index.stat().st_size == ENTRY_SIZE
    reopened.close()


def test_followers_keep_the_same_txnindex(tmp_path):
    leader = UnifiedLog(tmp_path / "l-0")
    follower = UnifiedLog(tmp_path / "f-0")
    leader.append_as_leader(txn_batch(1, 0))
    leader.append_as_leader(build_batch([b"plain"]))
    leader.append_as_leader(marker(1, commit=False), origin=COORDINATOR)
    follower.append_as_follower(leader.read(0, 1 << 20).read_bytes())
    assert [s.txn_index.all_aborted_txns() for s in follower.segments] == [
        s.txn_index.all_aborted_txns() for s in leader.segments
    ]
    assert follower.collect_aborted_transactions(0, 10) == [AbortedTxn(1, 0, 3, 4)]
    leader.close()
    follower.close()


# -- the model ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    base: int
    last: int
    pid: int  # -1 for a plain batch
    kind: str  # "txn", "plain", "commit", "abort"


def model(batches: list[Batch], hw: int) -> tuple[dict[int, int], list[AbortedTxn], int]:
    """(ongoing pid -> first offset, aborted txns in marker order, LSO) from scratch."""
    ongoing: dict[int, int] = {}
    aborted: list[AbortedTxn] = []
    completed: list[tuple[int, int]] = []  # (first, marker)
    for b in batches:
        if b.kind == "txn":
            ongoing.setdefault(b.pid, b.base)
        elif b.kind in ("commit", "abort"):
            first = ongoing.pop(b.pid, b.base)
            if b.kind == "abort":
                others = sorted(f for p, f in ongoing.items() if p != b.pid)
                lso = others[0] if others else b.last + 1
                aborted.append(AbortedTxn(b.pid, first, b.last, lso))
            completed.append((first, b.last))
    unstable = list(ongoing.values()) + [f for f, m in completed if m >= hw]
    first_unstable = min(unstable, default=None)
    lso = hw if first_unstable is None or first_unstable >= hw else first_unstable
    return ongoing, aborted, lso


ops = st.lists(
    st.one_of(
        st.tuples(st.just("txn"), st.integers(1, 3), st.integers(1, 3)),
        st.tuples(st.just("plain"), st.integers(1, 3), st.just(0)),
        st.tuples(st.just("commit"), st.integers(1, 3), st.just(0)),
        st.tuples(st.just("abort"), st.integers(1, 3), st.just(0)),
        st.tuples(st.just("hw"), st.integers(0, 10), st.just(0)),
        st.tuples(st.just("truncate"), st.integers(0, 100), st.just(0)),
        st.tuples(st.just("restart"), st.booleans(), st.just(0)),
        st.tuples(st.just("crash"), st.integers(0, 3), st.just(0)),
        st.tuples(st.just("tear"), st.integers(0, 100), st.just(0)),
    ),
    max_size=40,
)


def check(log: UnifiedLog, batches: list[Batch]) -> None:
    ongoing, aborted, lso = model(batches, log.high_watermark)
    state = log.producer_state
    got = {
        pid: e.current_txn_first_offset
        for pid, e in state.producers.items()
        if e.current_txn_first_offset is not None
    }
    assert got == ongoing
    assert log.last_stable_offset == lso
    assert log.last_fetchable_offset(FetchIsolation.TXN_COMMITTED) == lso
    # Each entry sits in the segment holding its marker, in marker order.
    in_index = []
    segments = log.segments
    for i, segment in enumerate(segments):
        end = segments[i + 1].base_offset if i + 1 < len(segments) else log.log_end_offset
        entries = TransactionIndex(segment.txn_index.path, segment.base_offset).all_aborted_txns()
        assert all(segment.base_offset <= t.last_offset < end for t in entries)
        in_index += entries
    assert in_index == aborted
    leo = log.log_end_offset
    for start in {0, leo // 2, leo}:
        for upper in {start, (start + leo) // 2, leo}:
            want = [t for t in aborted if t.last_offset >= start and t.first_offset < upper]
            assert log.collect_aborted_transactions(start, upper) == want


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops)
def test_producer_state_lso_and_txnindex_match_the_model(tmp_path, steps):
    directory = tmp_path / "m-0"
    shutil.rmtree(directory, ignore_errors=True)
    config = LogConfig(segment_bytes=420)
    log = UnifiedLog(directory, config)
    batches: list[Batch] = []
    try:
        for op, a, b in steps:
            if op == "txn":
                info = log.append_as_leader(txn_batch(a, next_seq(log, a), b))
                batches.append(Batch(info.first_offset, info.last_offset, a, "txn"))
            elif op == "plain":
                info = log.append_as_leader(build_batch([b"p"] * a))
                batches.append(Batch(info.first_offset, info.last_offset, -1, "plain"))
            elif op in ("commit", "abort"):
                info = log.append_as_leader(marker(a, op == "commit"), origin=COORDINATOR)
                batches.append(Batch(info.first_offset, info.last_offset, a, op))
            elif op == "hw":
                hw = log.high_watermark
                log.update_high_watermark(hw + (log.log_end_offset - hw) * a // 10)
            elif op == "truncate" and batches:
                keep = batches[: len(batches) * a // 100]
                log.truncate_to(keep[-1].last + 1 if keep else 0)
                batches = keep
            elif op == "restart":
                hw = log.high_watermark
                log.close()
                log = UnifiedLog(directory, config, high_watermark=hw, clean_shutdown=a)
            elif op == "crash":
                # No close: no snapshot, no flush; everything after the recovery
                # point (0) is re-read. Damage the .txnindex files first: `a` picks
                # deleting them, a torn last entry, or garbage appended.
                hw = log.high_watermark
                for path in directory.glob("*.txnindex"):
                    if a == 1:
                        path.unlink()
                    elif a == 2 and path.stat().st_size:
                        os.truncate(path, path.stat().st_size - 5)
                    elif a == 3:
                        with open(path, "ab") as f:
                            f.write(b"\x00\x07garbage")
                for segment in log.segments:
                    segment.txn_index.close()
                for snapshot in directory.glob("*.snapshot"):
                    if a:
                        snapshot.unlink()  # a crash before the first snapshot
                log = UnifiedLog(directory, config, high_watermark=hw, recovery_point=0)
            elif op == "tear":
                # A crash in the middle of a write: the active segment's file ends at a
                # random byte. Recovery cuts the torn batch; producer state, LSO and
                # .txnindex must describe exactly the batches left.
                hw = log.high_watermark
                active = log.active_segment.log.path
                for segment in log.segments:
                    segment.txn_index.close()
                os.truncate(active, active.stat().st_size * a // 100)
                log = UnifiedLog(directory, config, high_watermark=hw, recovery_point=0)
                batches = [b for b in batches if b.last < log.log_end_offset]
                assert (batches[-1].last + 1 if batches else 0) == log.log_end_offset
            check(log, batches)
    finally:
        log.close()


def test_a_crash_at_any_step_of_cleaning_keeps_the_aborted_transactions(tmp_path):
    """The cleaner replaces segments holding an ABORT marker; a crash at any file
    operation of that pass, then recovery, leaves the same aborted transactions."""
    from test_log_cleaner_properties import CrashAt, SimulatedCrash, abandon

    from kafkalab.storage import clean

    config = LogConfig(cleanup_policy="compact", segment_bytes=400)
    source = tmp_path / "source"

    def keyed(pid: int, seq: int, key: bytes) -> bytes:
        return build_batch(
            [SimpleRecord(b"v", key=key)],
            producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True,
        )  # fmt: skip

    log = UnifiedLog(source / "t-0", config)
    for round_ in range(3):
        log.append_as_leader(keyed(1, round_, b"a"))
        log.append_as_leader(build_batch([SimpleRecord(b"p", key=b"a")]))
        log.append_as_leader(keyed(2, round_, b"b"))
        log.append_as_leader(marker(1, commit=False), origin=COORDINATOR)
        log.append_as_leader(marker(2, commit=round_ != 1), origin=COORDINATOR)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    want = log.collect_aborted_transactions(0, log.log_end_offset)
    hw = log.high_watermark
    assert len(want) == 4 and len(log.segments) > 2
    log.close()
    crashes = 0
    for at in range(400):
        work, snapshot = tmp_path / f"w{at}", tmp_path / f"s{at}"
        shutil.copytree(source, work)
        log = UnifiedLog(work / "t-0", config, high_watermark=hw, clean_shutdown=True)
        crash = CrashAt(at, work, snapshot)
        try:
            with crash:
                clean(log, 0)
        except SimulatedCrash:
            pass
        if not crash.crashed:
            assert log.collect_aborted_transactions(0, log.log_end_offset) == want
            log.close()
            break
        crashes += 1
        abandon(log)
        for segment in log.segments:
            segment.txn_index.close()
        recovered = UnifiedLog(snapshot / "t-0", config, high_watermark=hw)
        got = recovered.collect_aborted_transactions(0, recovered.log_end_offset)
        # The same aborts, each still covering every batch of its transaction the
        # log kept. (When the cleaned segment's index is rebuilt by the replay, a
        # transaction whose batches were all cleaned away starts at its marker, as
        # in Kafka's recovery; nothing of it is left to hide.)
        assert [(t.producer_id, t.last_offset) for t in got] == [
            (t.producer_id, t.last_offset) for t in want
        ], f"crash at file operation {at}"
        kept = [
            h
            for segment in recovered.segments
            for _, h in segment.log.batch_headers(0)
            if h.is_transactional and not h.is_control_batch
        ]
        for g, w in zip(got, want, strict=True):
            left = [
                h.base_offset
                for h in kept
                if h.producer_id == g.producer_id
                and w.first_offset <= h.base_offset < w.last_offset
            ]
            assert g.first_offset <= min(left, default=g.last_offset), f"crash at {at}: {g}"
        recovered.close()
        shutil.rmtree(work)
        shutil.rmtree(snapshot)
    assert crashes > 10  # the pass was interrupted at many points
