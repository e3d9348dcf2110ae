"""ReplicaManager without a broker: leadership listeners (where the coordinators will
load and unload their state topics), the error for a partition not hosted here,
and reads bounded by the asker's isolation."""

from __future__ import annotations

from kafkalab.errors import Errors
from kafkalab.records import build_batch
from kafkalab.replication.partition import Role
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.storage import LogConfig, LogManager
from kafkalab.storage.unified_log import FetchIsolation


class Timers:
    """A schedule() that never fires: these tests step everything by hand."""

    class Handle:
        def cancel(self) -> None:
            pass

    def __call__(self, delay_s, fn):
        return self.Handle()


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def on_election(self, tp, leader_epoch):
        self.events.append(("elected", tp, leader_epoch))

    def on_resignation(self, tp, leader_epoch):
        self.events.append(("resigned", tp, leader_epoch))


def manager(tmp_path, known=()):
    return ReplicaManager(
        LogManager(tmp_path, LogConfig()),
        Timers(),
        broker_id=1,
        partition_exists=lambda tp: tp in known,
    )


def test_leadership_listeners_hear_elections_and_resignations(tmp_path):
    rm = manager(tmp_path)
    heard = Recorder()
    rm.add_leadership_listener(heard)
    tp = ("__consumer_offsets", 7)
    rm.make_leader(tp, 0, [1, 2], [1, 2], 0)
    rm.make_follower(tp, 2, 1, [1, 2], [1, 2], 1)  # another broker leads now
    rm.make_follower(tp, 2, 2, [1, 2], [1, 2], 2)  # a follower stays one: nothing to say
    rm.make_leader(tp, 3, [1, 2], [1, 2], 3)
    rm.remove_partition(tp)  # the topic was deleted
    assert heard.events == [
        ("elected", tp, 0),
        ("resigned", tp, 1),
        ("elected", tp, 3),
        ("resigned", tp, 3),
    ]
    rm.shutdown()


def test_a_partition_not_hosted_here_is_unknown_or_elsewhere(tmp_path):
    rm = manager(tmp_path, known={("t", 1)})
    records = build_batch([b"x"])
    assert rm.append_records("t", 1, records).error == Errors.NOT_LEADER_OR_FOLLOWER
    assert rm.append_records("t", 2, records).error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    rm.make_follower(("t", 0), 2, 0, [1, 2], [1, 2], 0)
    assert rm.partition(("t", 0)).role == Role.FOLLOWER
    assert rm.append_records("t", 0, records).error == Errors.NOT_LEADER_OR_FOLLOWER
    assert rm.read("t", 0, 0, 1024, True).error == Errors.NOT_LEADER_OR_FOLLOWER
    rm.shutdown()


def test_reads_stop_where_the_isolation_says(tmp_path):
    rm = manager(tmp_path)
    rm.make_leader(("t", 0), 0, [1, 2], [1, 2], 0)
    assert rm.append_records("t", 0, build_batch([b"a", b"b"])).error == Errors.NONE
    # The follower has not fetched: HW 0, LEO 2.
    consumer = rm.read("t", 0, 0, 1 << 20, True, FetchIsolation.HIGH_WATERMARK)
    follower = rm.read("t", 0, 0, 1 << 20, True, FetchIsolation.LOG_END)
    assert (consumer.error, consumer.size, consumer.high_watermark) == (Errors.NONE, 0, 0)
    assert follower.error == Errors.NONE and follower.size > 0
    rm.update_follower_fetch_state(("t", 0), 2, 2)
    assert rm.read("t", 0, 0, 1 << 20, True).size == follower.size
    rm.shutdown()


def test_read_committed_waits_on_the_lso_and_names_aborted_transactions(tmp_path):
    from kafkalab.records.control_record import ControlRecordType, build_end_txn_marker_batch
    from kafkalab.replication.delayed_fetch import DelayedFetch, FetchPartition
    from kafkalab.storage.transaction_index import AbortedTxn
    from kafkalab.storage.unified_log import AppendOrigin

    rm = manager(tmp_path)
    tp = ("t", 0)
    rm.make_leader(tp, 0, [1, 2], [1, 2], 0)
    txn = build_batch([b"a", b"b"], producer_id=5, producer_epoch=0, base_sequence=0,
                      is_transactional=True)  # fmt: skip
    assert rm.append_records("t", 0, txn, required_acks=-1).error == Errors.NONE
    rm.update_follower_fetch_state(tp, 2, 2)  # HW 2, but the transaction is open
    committed = rm.read("t", 0, 0, 1 << 20, True, FetchIsolation.TXN_COMMITTED)
    assert (committed.size, committed.last_stable_offset, committed.high_watermark) == (0, 0, 2)
    assert committed.aborted_transactions == []
    done = []
    op = DelayedFetch(
        500, 1, FetchIsolation.TXN_COMMITTED, [FetchPartition("t", 0, 0, 1 << 20)], rm,
        lambda: done.append(True),
    )  # fmt: skip
    assert not rm.delayed_fetch.try_complete_else_watch(op, [tp])
    abort = build_end_txn_marker_batch(5, 0, ControlRecordType.ABORT, 0)
    result = rm.append_records("t", 0, abort, required_acks=-1, origin=AppendOrigin.COORDINATOR)
    assert (result.error, result.base_offset, result.required_offset) == (Errors.NONE, 2, 3)
    assert not done  # the marker is not below the HW yet: the LSO is still 0
    assert rm.read("t", 0, 0, 1 << 20, True, FetchIsolation.TXN_COMMITTED).size == 0
    rm.update_follower_fetch_state(tp, 2, 3)  # the follower has the marker: HW 3
    assert done == [True]  # the HW move answered the parked read_committed fetch
    after = rm.read("t", 0, 0, 1 << 20, True, FetchIsolation.TXN_COMMITTED)
    assert after.last_stable_offset == 3 and after.size > 0
    assert after.aborted_transactions == [AbortedTxn(5, 0, 2, 3)]
    uncommitted = rm.read("t", 0, 0, 1 << 20, True, FetchIsolation.HIGH_WATERMARK)
    assert uncommitted.aborted_transactions is None
    # A follower replicates the marker and keeps the same .txnindex.
    follower = ReplicaManager(LogManager(tmp_path / "f", LogConfig()), Timers(), broker_id=2)
    part = follower.make_follower(tp, 1, 0, [1, 2], [1, 2], 0)
    part.append_records_to_follower(
        rm.read("t", 0, 0, 1 << 20, True, FetchIsolation.LOG_END).info.read_bytes(), 3
    )
    assert part.log.collect_aborted_transactions(0, 3) == [AbortedTxn(5, 0, 2, 3)]
    assert part.log.last_stable_offset == 3
    follower.shutdown()
    rm.shutdown()


def test_a_read_committed_fetch_names_only_the_aborted_transactions_its_bytes_reach(tmp_path):
    """Kafka bounds the aborted-transaction list by the bytes returned (the first
    offset-index entry past them), not by the LSO: a small fetch of a log with
    many aborted transactions does not carry all of them."""
    from kafkalab.records.control_record import ControlRecordType, build_end_txn_marker_batch
    from kafkalab.storage.transaction_index import AbortedTxn
    from kafkalab.storage.unified_log import AppendOrigin

    rm = ReplicaManager(
        LogManager(tmp_path, LogConfig(index_interval_bytes=1)), Timers(), broker_id=1
    )
    tp = ("t", 0)
    rm.make_leader(tp, 0, [1], [1], 0)
    for pid in (5, 6, 7):  # three transactions, each aborted: offsets 0-2, 3-5, 6-8
        txn = build_batch([b"a", b"b"], producer_id=pid, producer_epoch=0, base_sequence=0,
                          is_transactional=True)  # fmt: skip
        assert rm.append_records("t", 0, txn).error == Errors.NONE
        abort = build_end_txn_marker_batch(pid, 0, ControlRecordType.ABORT, 0)
        rm.append_records("t", 0, abort, origin=AppendOrigin.COORDINATOR)
    assert rm.partition(tp).log.last_stable_offset == 9
    first_batch = rm.read("t", 0, 0, 1, True, FetchIsolation.TXN_COMMITTED)  # one batch
    assert first_batch.aborted_transactions == [AbortedTxn(5, 0, 2, 3)]
    everything = rm.read("t", 0, 0, 1 << 20, True, FetchIsolation.TXN_COMMITTED)
    assert [t.producer_id for t in everything.aborted_transactions] == [5, 6, 7]
    rm.shutdown()


def test_a_fetch_asking_for_min_bytes_0_is_answered_at_once_even_when_empty(tmp_path):
    from kafkalab.replication.delayed_fetch import DelayedFetch, FetchPartition
    from kafkalab.storage.unified_log import FetchIsolation

    rm = manager(tmp_path)
    rm.make_leader(("t", 0), 0, [1], [1], 0)
    answered = []

    def fetch(min_bytes):
        return DelayedFetch(
            500, min_bytes, FetchIsolation.HIGH_WATERMARK, [FetchPartition("t", 0, 0, 1 << 20)],
            rm, lambda: answered.append(min_bytes),
        )  # fmt: skip

    # Kafka's DelayedFetch: complete once the bytes readable reach min_bytes; 0 >= 0.
    assert rm.delayed_fetch.try_complete_else_watch(fetch(0), [("t", 0)])
    assert not rm.delayed_fetch.try_complete_else_watch(fetch(1), [("t", 0)])
    assert answered == [0]  # the min_bytes=1 fetch waits for data (or its max_wait_ms)
    rm.shutdown()


def test_a_consumer_fetching_past_the_high_watermark_is_answered_at_once(tmp_path):
    """Kafka's DelayedFetch, case F: a fetch offset past what the asker may read (a
    consumer ahead of a new leader's HW) answers at once, with nothing, rather than
    waiting out max_wait_ms; at the HW itself it waits for bytes."""
    from kafkalab.replication.delayed_fetch import DelayedFetch, FetchPartition

    rm = manager(tmp_path)
    tp = ("t", 0)
    rm.make_leader(tp, 0, [1, 2], [1, 2], 0)
    assert rm.append_records("t", 0, build_batch([b"a"]), required_acks=-1).error == Errors.NONE
    assert (rm.partition(tp).log.high_watermark, rm.partition(tp).log.log_end_offset) == (0, 1)
    answered = []

    def fetch(offset, isolation=FetchIsolation.HIGH_WATERMARK):
        return DelayedFetch(
            500, 1, isolation, [FetchPartition("t", 0, offset, 1 << 20)], rm,
            lambda: answered.append((offset, isolation)),
        )  # fmt: skip

    assert rm.delayed_fetch.try_complete_else_watch(fetch(1), [tp])  # past the HW
    assert not rm.delayed_fetch.try_complete_else_watch(fetch(0), [tp])  # at the HW
    # a follower reads to the LEO: offset 1 is its end, so it waits too
    assert not rm.delayed_fetch.try_complete_else_watch(fetch(1, FetchIsolation.LOG_END), [tp])
    assert answered == [(1, FetchIsolation.HIGH_WATERMARK)]
    rm.update_follower_fetch_state(tp, 2, 1)  # HW 1: the consumer's bytes are readable
    assert answered[1:] == [(0, FetchIsolation.HIGH_WATERMARK)]
    rm.shutdown()


def test_a_followers_fetch_woken_by_an_append_stops_looking_once_it_has_enough(tmp_path):
    """A follower's fetch watches every partition it follows from this leader (a
    thousand at 3,000 partitions of RF=3 on three brokers) and an append to any one of
    them retries it. The append wakes it for that partition only: it looks at that
    one again (each look costs a segment lookup), counts the others as its last full
    look found them, and is answered once the bytes reach min_bytes."""
    from kafkalab.replication.delayed_fetch import DelayedFetch, FetchPartition

    rm = manager(tmp_path)
    tps = [("t", p) for p in range(50)]
    for tp in tps:
        rm.make_leader(tp, 0, [1, 2], [1, 2], 0)
    looked_at = []

    class CountingLeader:
        def offset_metadata(self, tp, offset):
            return rm.offset_metadata(tp, offset)

        def fetch_offset_snapshot(self, tp, isolation):
            looked_at.append(tp)
            return rm.fetch_offset_snapshot(tp, isolation)

    answered = []
    op = DelayedFetch(
        500, 1, FetchIsolation.LOG_END, [FetchPartition(*tp, 0, 1 << 20) for tp in tps],
        CountingLeader(), lambda: answered.append(True),
    )  # fmt: skip
    assert not rm.delayed_fetch.try_complete_else_watch(op, tps)  # nothing to send yet
    looked_at.clear()
    assert rm.append_records("t", 3, build_batch([b"a"]), required_acks=-1).error == Errors.NONE
    assert answered == [True]
    assert looked_at == [("t", 3)]  # only partition 3, which has the byte it waits for
    rm.shutdown()
