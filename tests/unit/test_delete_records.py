"""DeleteRecords on the leader and its followers (sans-IO): the leader moves its log
start offset (to the HW with -1; never past it), followers learn it from the
leader's fetch answers and report theirs in their next fetch, and a
DelayedDeleteRecords is answered once every live replica has moved (the low
watermark), or expires with REQUEST_TIMED_OUT."""

from __future__ import annotations

import pytest

from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.header import RequestHeader
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.replication.delayed_delete_records import DelayedDeleteRecords
from kafkalab.replication.partition import Partition
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.apis.fetch import handle_fetch
from kafkalab.server.config import KafkaConfig
from kafkalab.server.inter_broker_connection import replica_fetch_request
from kafkalab.server.kafka_apis import KafkaApis
from kafkalab.storage import LogConfig, LogManager, UnifiedLog


def new_partition(tmp_path, broker_id, **config) -> Partition:
    log = UnifiedLog(tmp_path / f"broker{broker_id}" / "t-0", LogConfig(**config))
    return Partition("t", 0, broker_id, log)


def replicate(leader: Partition, follower: Partition, now_ms: int) -> None:
    """One fetch round trip, as the broker's fetcher and Fetch handler carry it: the
    follower's fetch says its LEO and log start offset; the answer its records, the
    leader's HW and log start offset."""
    leader.update_follower_fetch_state(
        follower.local_broker_id,
        follower.log.log_end_offset,
        now_ms,
        follower.log.log_start_offset,
    )
    data = leader.log.read(follower.log.log_end_offset, 1 << 20).read_bytes()
    follower.append_records_to_follower(
        data, leader.log.high_watermark, leader.log.log_start_offset
    )


def leader_and_follower(tmp_path, n: int = 10) -> tuple[Partition, Partition]:
    a, b = new_partition(tmp_path, 1), new_partition(tmp_path, 2)
    a.make_leader(1, [1, 2], [1, 2], 0, now_ms=0)
    b.make_follower(1, 1, [1, 2], [1, 2], 0)
    for i in range(n):
        a.append_records_to_leader(build_batch([SimpleRecord(b"v%d" % i)]), -1, 1)
    for t in range(3):
        replicate(a, b, t)
    assert a.log.high_watermark == n and b.log.high_watermark == n
    return a, b


def test_the_follower_learns_the_new_log_start_and_the_low_watermark_follows(tmp_path):
    a, b = leader_and_follower(tmp_path)
    assert a.delete_records_on_leader(6) == 6
    assert a.log.log_start_offset == 6
    assert a.low_watermark(lambda broker: True) == 0  # the follower still starts at 0
    assert a.low_watermark(lambda broker: broker != 2) == 6  # a dead follower does not count
    replicate(a, b, 10)  # the answer carries the leader's log start offset
    assert b.log.log_start_offset == 6
    replicate(a, b, 11)  # the next fetch reports it
    assert a.low_watermark(lambda broker: True) == 6


def test_minus_one_means_the_high_watermark_and_past_it_is_out_of_range(tmp_path):
    a, b = leader_and_follower(tmp_path)
    a.append_records_to_leader(build_batch([SimpleRecord(b"unreplicated")]), -1, 1)
    assert a.log.high_watermark == 10 and a.log.log_end_offset == 11
    with pytest.raises(KafkaError) as info:
        a.delete_records_on_leader(11)
    assert info.value.code == Errors.OFFSET_OUT_OF_RANGE
    assert a.delete_records_on_leader(-1) == 10
    with pytest.raises(KafkaError) as info:
        b.delete_records_on_leader(3)
    assert info.value.code == Errors.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(KafkaError) as info:
        a.delete_records_on_leader(-5)
    assert info.value.code == Errors.OFFSET_OUT_OF_RANGE


def test_a_compacted_topics_records_are_not_deleted(tmp_path):
    a = new_partition(tmp_path, 1, cleanup_policy="compact")
    a.make_leader(1, [1], [1], 0, now_ms=0)
    a.append_records_to_leader(build_batch([SimpleRecord(b"v", key=b"k")]), -1, 1)
    with pytest.raises(KafkaError) as info:
        a.delete_records_on_leader(1)
    assert info.value.code == Errors.POLICY_VIOLATION


class Timers:
    """schedule(): remembers the callbacks; `fire()` runs them (time has run out)."""

    def __init__(self) -> None:
        self.pending: list = []

    class Handle:
        def cancel(self) -> None:
            pass

    def __call__(self, delay_s, fn):
        self.pending.append(fn)
        return self.Handle()

    def fire(self) -> None:
        fns, self.pending = self.pending, []
        for fn in fns:
            fn()


def test_the_delayed_delete_records_waits_for_the_followers_log_start(tmp_path):
    timers = Timers()
    rm = ReplicaManager(LogManager(tmp_path / "leader", LogConfig()), timers, broker_id=1)
    part = rm.make_leader(("t", 0), 1, [1, 2], [1, 2], 0)
    for i in range(5):
        rm.append_records("t", 0, build_batch([SimpleRecord(b"v%d" % i)]), 1)
    rm.update_follower_fetch_state(("t", 0), 2, 5, 0)  # the follower has it all
    assert part.log.high_watermark == 5
    result = rm.delete_records_on_leader(("t", 0), 3)
    assert (result.error, result.required_offset) == (Errors.NONE, 3)
    answers = []
    op = DelayedDeleteRecords(
        30_000, rm.partition, rm.broker_alive, {("t", 0): result}, answers.append
    )
    assert not rm.delayed_delete_records.try_complete_else_watch(op, [("t", 0)])
    rm.update_follower_fetch_state(("t", 0), 2, 5, 0)  # not moved yet
    assert answers == []
    rm.update_follower_fetch_state(("t", 0), 2, 5, 3)  # the follower starts at 3 now
    assert len(answers) == 1
    assert (answers[0][("t", 0)].error, answers[0][("t", 0)].low_watermark) == (Errors.NONE, 3)

    again = rm.delete_records_on_leader(("t", 0), 4)
    expired = []
    late = DelayedDeleteRecords(
        10, rm.partition, rm.broker_alive, {("t", 0): again}, expired.append
    )
    assert not rm.delayed_delete_records.try_complete_else_watch(late, [("t", 0)])
    timers.fire()  # the follower never reported: timeout_ms ran out
    assert expired[0][("t", 0)].error == Errors.REQUEST_TIMED_OUT

    resigned = rm.delete_records_on_leader(("t", 0), 5)
    lost = []
    op = DelayedDeleteRecords(10, rm.partition, rm.broker_alive, {("t", 0): resigned}, lost.append)
    assert not rm.delayed_delete_records.try_complete_else_watch(op, [("t", 0)])
    rm.make_follower(("t", 0), 2, 2, [1, 2], [1, 2], 1)  # leadership moved meanwhile
    assert lost[0][("t", 0)].error == Errors.NOT_LEADER_OR_FOLLOWER


def test_a_followers_fetch_request_tells_the_leader_its_log_start_offset(tmp_path):
    """The Fetch handler passes the follower's log_start_offset (Fetch v5+) on to the
    leader's Partition, which is what the low watermark is made of."""
    rm = ReplicaManager(LogManager(tmp_path / "leader", LogConfig()), Timers(), broker_id=1)
    part = rm.make_leader(("t", 0), 1, [1, 2], [1, 2], 0)
    for i in range(4):
        rm.append_records("t", 0, build_batch([SimpleRecord(b"v%d" % i)]), 1)
    apis = KafkaApis(KafkaConfig(), rm, None, None)  # type: ignore[arg-type]
    body = replica_fetch_request(2, [("t", 0, 4, 1, 2)], max_wait_ms=0, min_bytes=0)
    response = handle_fetch(apis, RequestHeader(1, 11, 1, "broker-2"), body)
    assert response["responses"][0]["partitions"][0]["error_code"] == 0
    assert part.remote[2].log_start_offset == 2 and part.remote[2].log_end_offset == 4
    older = replica_fetch_request(2, [("t", 0, 4, 1)], max_wait_ms=0, min_bytes=0)  # says none
    handle_fetch(apis, RequestHeader(1, 11, 2, "broker-2"), older)
    assert part.remote[2].log_start_offset == 2
