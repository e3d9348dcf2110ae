"""Fetch sessions (KIP-227), sans-IO: the broker's session cache and fetch contexts
(kafkalab/server/fetch_session.py), the fetcher's FetchSessionHandler, and the Fetch
handler answering full and incremental fetches on a real ReplicaManager and logs.

The property: whatever sequence of full and incremental fetches a fetcher makes
(partitions added, forgotten, fetch offsets moved, answers lost), what it learns
is what sessionless fetches of the same partitions at the same moments would
have told it: a partition an incremental answer leaves out has, sessionless, no
records, no error, and the high watermark and log start offset the fetcher
already knows."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalab.errors import Errors
from kafkalab.protocol.header import RequestHeader
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.apis.fetch import handle_fetch
from kafkalab.server.config import KafkaConfig
from kafkalab.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchManager,
    FetchSessionCache,
    FullFetchContext,
    IncrementalFetchContext,
    PartitionData,
    PartitionResult,
    SessionErrorContext,
    SessionlessFetchContext,
    next_epoch,
)
from kafkalab.server.fetch_session_handler import FetchSessionHandler
from kafkalab.server.inter_broker_connection import replica_fetch_request
from kafkalab.server.kafka_apis import KafkaApis
from kafkalab.storage import LogConfig, LogManager


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def data(offset: int = 0) -> PartitionData:
    return PartitionData(offset, -1, 1 << 20)


def ok(hw: int = 0, size: int = 0) -> PartitionResult:
    return PartitionResult(Errors.NONE, hw, 0, size)


def full_session(manager: FetchManager, tps, follower: bool = False) -> int:
    context = manager.new_context(0, INITIAL_EPOCH, {tp: data() for tp in tps}, [], follower)
    assert isinstance(context, FullFetchContext)
    error, session_id, carried = context.respond([(tp, ok()) for tp in tps])
    assert error == Errors.NONE and carried == set(tps)
    return session_id


# -- the session cache and the contexts -----------------------------------------------------


def test_epoch_minus_one_is_sessionless_and_epoch_zero_opens_a_session():
    manager = FetchManager(FetchSessionCache(), Clock())
    context = manager.new_context(0, FINAL_EPOCH, {("t", 0): data()}, [], False)
    assert isinstance(context, SessionlessFetchContext)
    assert context.respond([(("t", 0), ok())]) == (Errors.NONE, INVALID_SESSION_ID, {("t", 0)})
    assert len(manager.cache) == 0
    session_id = full_session(manager, [("t", 0)])
    assert session_id != INVALID_SESSION_ID and manager.cache.get(session_id).epoch == 1


def test_incremental_fetches_check_the_session_id_and_epoch():
    manager = FetchManager(FetchSessionCache(), Clock())
    session_id = full_session(manager, [("t", 0)])
    unknown = manager.new_context(session_id + 1, 1, {}, [], False)
    assert isinstance(unknown, SessionErrorContext)
    assert unknown.error == Errors.FETCH_SESSION_ID_NOT_FOUND
    assert unknown.respond([]) == (Errors.FETCH_SESSION_ID_NOT_FOUND, INVALID_SESSION_ID, set())
    wrong = manager.new_context(session_id, 2, {}, [], False)
    assert wrong.error == Errors.INVALID_FETCH_SESSION_EPOCH
    context = manager.new_context(session_id, 1, {}, [], False)
    assert isinstance(context, IncrementalFetchContext)
    assert manager.cache.get(session_id).epoch == 2
    # the same epoch again (a retried request) is refused
    assert manager.new_context(session_id, 1, {}, [], False).error == (
        Errors.INVALID_FETCH_SESSION_EPOCH
    )


def test_a_duplicate_in_flight_gets_invalid_epoch_in_its_answer():
    """Two incremental requests of one session in flight: the first one's answer is
    made after the second moved the epoch on (Kafka: 'Possible duplicate request')."""
    manager = FetchManager(FetchSessionCache(), Clock())
    session_id = full_session(manager, [("t", 0)])
    first = manager.new_context(session_id, 1, {}, [], False)
    second = manager.new_context(session_id, 2, {}, [], False)
    assert first.respond([(("t", 0), ok())]) == (
        Errors.INVALID_FETCH_SESSION_EPOCH,
        session_id,
        set(),
    )
    assert second.respond([(("t", 0), ok())])[0] == Errors.NONE


def test_an_incremental_answer_carries_only_what_changed():
    manager = FetchManager(FetchSessionCache(), Clock())
    tps = [("t", p) for p in range(4)]
    session_id = full_session(manager, tps)
    context = manager.new_context(session_id, 1, {}, [], False)
    results = [
        (("t", 0), ok()),  # nothing new
        (("t", 1), ok(size=10)),  # records
        (("t", 2), ok(hw=5)),  # a new high watermark
        (("t", 3), PartitionResult(Errors.NOT_LEADER_OR_FOLLOWER, -1, -1, 0)),
    ]
    assert context.respond(results) == (Errors.NONE, session_id, {("t", 1), ("t", 2), ("t", 3)})
    # answered partitions go to the end of the session, in the order answered
    assert list(manager.cache.get(session_id).partitions) == [
        ("t", 0),
        ("t", 1),
        ("t", 2),
        ("t", 3),
    ]
    again = manager.new_context(session_id, 2, {}, [], False)
    _, _, carried = again.respond(
        [(("t", 0), ok()), (("t", 1), ok()), (("t", 2), ok(hw=5)), (("t", 3), ok())]
    )
    # t-3's error is gone: answered again (its cached HW was set to -1 by the error)
    assert carried == {("t", 3)}


def test_forgetting_every_partition_ends_the_session_and_a_full_fetch_closes_it():
    manager = FetchManager(FetchSessionCache(), Clock())
    session_id = full_session(manager, [("t", 0), ("t", 1)])
    context = manager.new_context(session_id, 1, {("t", 2): data()}, [("t", 0)], False)
    assert list(context.partitions()) == [(("t", 1), data()), (("t", 2), data())]
    context.respond([])
    emptied = manager.new_context(session_id, 2, {}, [("t", 1), ("t", 2)], False)
    assert isinstance(emptied, SessionlessFetchContext)
    assert manager.cache.get(session_id) is None
    other = full_session(manager, [("t", 0)])
    reopened = manager.new_context(other, INITIAL_EPOCH, {("t", 0): data()}, [], False)
    assert manager.cache.get(other) is None  # the full request closed the session it named
    assert reopened.respond([(("t", 0), ok())])[1] not in (INVALID_SESSION_ID, other)


def test_eviction_follows_privilege_size_and_age():
    clock = Clock()
    manager = FetchManager(FetchSessionCache(max_entries=2, eviction_ms=1000), clock)
    consumer = full_session(manager, [("t", 0)])
    follower = full_session(manager, [("t", 0), ("t", 1)], follower=True)
    # full, and both new: a consumer cannot evict anyone; answered with no session
    context = manager.new_context(0, INITIAL_EPOCH, {("t", 5): data()}, [], False)
    assert context.respond([(("t", 5), ok())])[1] == INVALID_SESSION_ID
    # a follower may evict a consumer's session at once
    assert full_session(manager, [("t", 9)], follower=True) not in (consumer, follower)
    assert manager.cache.get(consumer) is None and manager.cache.evictions == 1
    # sessions unused for the eviction time are stale: anyone evicts them
    clock.now += 1001
    assert full_session(manager, [("t", 3)]) != INVALID_SESSION_ID
    assert manager.cache.evictions == 2 and len(manager.cache) == 2


def test_bigger_sessions_evict_older_smaller_ones():
    clock = Clock()
    manager = FetchManager(FetchSessionCache(max_entries=1, eviction_ms=1000), clock)
    small = full_session(manager, [("t", 0)])
    clock.now += 500
    # touched now, older than the eviction time since creation: evictable by all
    manager.cache.touch(manager.cache.get(small), clock.now + 600)
    context = manager.new_context(0, INITIAL_EPOCH, {("t", 0): data(), ("t", 1): data()}, [], False)
    assert context.respond([(("t", 0), ok()), (("t", 1), ok())])[1] != INVALID_SESSION_ID
    assert manager.cache.get(small) is None


def test_the_epoch_wraps_to_one():
    assert next_epoch(0) == 1 and next_epoch((1 << 31) - 1) == 1 and next_epoch(-1) == -1


# -- the fetcher's side -----------------------------------------------------------------------


def test_the_handler_sends_everything_first_then_only_changes():
    handler = FetchSessionHandler(1)
    first = handler.build({("t", 0): data(0), ("t", 1): data(0)})
    assert first.full and first.session_id == 0 and len(first.to_send) == 2
    assert handler.handle_response(first, {"error_code": 0, "session_id": 42, "responses": []})
    second = handler.build({("t", 0): data(3), ("t", 1): data(0), ("t", 2): data(0)})
    assert (second.session_id, second.epoch) == (42, 1)
    assert second.to_send == {("t", 0): data(3), ("t", 2): data(0)} and second.to_forget == []
    assert handler.handle_response(second, {"error_code": 0, "session_id": 42, "responses": []})
    third = handler.build({("t", 0): data(3), ("t", 2): data(0)})
    assert third.epoch == 2 and third.to_send == {} and third.to_forget == [("t", 1)]
    # a partition the session does not hold in an incremental answer: start again
    stray = {"error_code": 0, "session_id": 42, "responses": [
        {"topic": "t", "partitions": [{"partition_index": 1}]}
    ]}  # fmt: skip
    assert not handler.handle_response(third, stray)
    fourth = handler.build({("t", 0): data(3)})
    assert fourth.full and fourth.session_id == 42 and fourth.epoch == INITIAL_EPOCH


def test_the_handler_starts_over_after_a_session_error_or_a_lost_answer():
    handler = FetchSessionHandler(1)
    request = handler.build({("t", 0): data()})
    handler.handle_response(request, {"error_code": 0, "session_id": 7, "responses": []})
    request = handler.build({("t", 0): data()})
    assert not handler.handle_response(
        request, {"error_code": int(Errors.FETCH_SESSION_ID_NOT_FOUND), "session_id": 0}
    )
    request = handler.build({("t", 0): data()})
    assert request.full and request.session_id == 0
    handler.handle_response(request, {"error_code": 0, "session_id": 8, "responses": []})
    handler.handle_error()
    request = handler.build({("t", 0): data()})
    assert request.full and request.session_id == 8  # closes session 8, opens another


# -- the Fetch handler on a real ReplicaManager ---------------------------------------------


class Timers:
    def __init__(self) -> None:
        self.pending: list = []

    class Handle:
        def cancel(self) -> None:
            pass

    def __call__(self, delay_s, fn):
        self.pending.append(fn)
        return self.Handle()


PARTITIONS = 5


def leader(path: Path, replicas=(1,)) -> tuple[ReplicaManager, KafkaApis]:
    rm = ReplicaManager(LogManager(path, LogConfig()), Timers(), broker_id=1)
    for p in range(PARTITIONS):
        rm.make_leader(("t", p), 3, list(replicas), list(replicas), 0)
    return rm, KafkaApis(KafkaConfig(), rm, None, None)  # type: ignore[arg-type]


def consumer_fetch(
    to_send: dict, to_forget=(), session_id=0, epoch=FINAL_EPOCH, epochs=None, replica_id=-1
) -> dict:
    topics: dict[str, list] = {}
    for (topic, p), d in to_send.items():
        topics.setdefault(topic, []).append(
            {
                "partition": p,
                "current_leader_epoch": (epochs or {}).get((topic, p), -1),
                "fetch_offset": d.fetch_offset,
                "log_start_offset": -1,
                "partition_max_bytes": d.max_bytes,
            }
        )
    forgotten: dict[str, list] = {}
    for topic, p in to_forget:
        forgotten.setdefault(topic, []).append(p)
    return {
        "replica_id": replica_id,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 30,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in forgotten.items()],
        "rack_id": "",
    }


def _bytes(records) -> bytes:
    if records is None:
        return b""
    return records.read() if hasattr(records, "read") else bytes(records)


def by_partition(response: dict) -> dict:
    return {
        (t["topic"], p["partition_index"]): (
            p["error_code"],
            p["high_watermark"],
            p["log_start_offset"],
            _bytes(p["records"]),
        )
        for t in response["responses"]
        for p in t["partitions"]
    }


step = st.one_of(
    st.tuples(st.just("append"), st.integers(0, PARTITIONS - 1), st.integers(1, 3)),
    st.tuples(st.just("delete"), st.integers(0, PARTITIONS - 1), st.integers(0, 100)),
    st.tuples(st.just("seek"), st.integers(0, PARTITIONS - 1), st.integers(0, 100)),
    st.tuples(st.just("want"), st.frozensets(st.integers(0, PARTITIONS - 1), min_size=1)),
    st.tuples(st.just("fetch")),
    st.tuples(st.just("lose")),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=40), st.booleans())
def test_sessions_tell_a_fetcher_what_sessionless_fetches_would(steps, follower):
    """As a consumer (reads to the HW) or as follower 2 (reads to the LEO, and each
    fetch moves its replica state and so the HW)."""
    with tempfile.TemporaryDirectory() as tmp:
        rm, apis = leader(Path(tmp), replicas=(1, 2) if follower else (1,))
        handler = FetchSessionHandler(1)
        wanted = {0, 1}
        positions = dict.fromkeys(range(PARTITIONS), 0)
        known: dict[tuple[str, int], tuple[int, int]] = {}  # hw, log start
        correlation = 0
        for s in [*steps, ("fetch",)]:
            if s[0] == "append":
                batch = build_batch([SimpleRecord(b"v%d" % i) for i in range(s[2])])
                assert rm.append_records("t", s[1], batch, 1).error == Errors.NONE
            elif s[0] == "delete":
                log = rm.partitions[("t", s[1])].log
                rm.delete_records_on_leader(("t", s[1]), min(s[2], log.high_watermark))
            elif s[0] == "seek":
                log = rm.partitions[("t", s[1])].log
                positions[s[1]] = max(log.log_start_offset, min(s[2], log.high_watermark))
            elif s[0] == "want":
                wanted = set(s[1])
            elif s[0] == "lose":
                handler.handle_error()
            else:
                want = {("t", p): data(positions[p]) for p in sorted(wanted)}
                correlation += 1
                header = RequestHeader(1, 11, correlation, "broker-2-epoch-1")
                replica = 2 if follower else -1
                sessionless = by_partition(
                    handle_fetch(apis, header, consumer_fetch(want, replica_id=replica))
                )
                request = handler.build(want)
                response = handle_fetch(
                    apis,
                    header,
                    consumer_fetch(
                        request.to_send,
                        request.to_forget,
                        request.session_id,
                        request.epoch,
                        replica_id=replica,
                    ),
                )
                assert handler.handle_response(request, response), response
                answered = by_partition(response)
                assert set(answered) <= set(want)
                for tp in want:
                    if tp in answered:
                        assert answered[tp] == sessionless[tp]
                        known[tp] = (answered[tp][1], answered[tp][2])
                    else:
                        error, hw, start, records = sessionless[tp]
                        assert (error, records) == (Errors.NONE, b"")
                        assert known[tp] == (hw, start)
                for tp, (error, hw, _, _) in answered.items():
                    if error == Errors.NONE:  # it read everything it may: to the LEO or HW
                        end = rm.partitions[tp].log.log_end_offset if follower else hw
                        positions[tp[1]] = max(positions[tp[1]], end)


def test_an_incremental_fetch_reads_only_the_partitions_that_can_have_something(tmp_path):
    """A follower's session of five partitions: after the full fetch, an incremental
    fetch with nothing new waits, parked without looking at any partition again; the
    append to one partition answers it with that partition alone, and only that one
    was looked at and read (Kafka reads them all)."""
    rm, apis = leader(tmp_path, replicas=(1, 2))
    for p in range(PARTITIONS):
        rm.append_records("t", p, build_batch([SimpleRecord(b"x")]), 1)
    reads = []
    read = rm.read

    def counting_read(topic, partition, *args, **kwargs):
        reads.append((topic, partition))
        return read(topic, partition, *args, **kwargs)

    rm.read = counting_read  # type: ignore[method-assign]
    looks = []
    snapshot = rm.fetch_offset_snapshot

    def counting_snapshot(tp, isolation):
        looks.append(tp)
        return snapshot(tp, isolation)

    rm.fetch_offset_snapshot = counting_snapshot  # type: ignore[method-assign]
    handler = FetchSessionHandler(1)

    def fetch(max_wait_ms: int):
        # the follower has the first record of each
        want = {("t", p): PartitionData(1, 0, 1 << 20, 3) for p in range(PARTITIONS)}
        request = handler.build(want)
        body = replica_fetch_request(
            2,
            [(t, n, d.fetch_offset, 3, 0) for (t, n), d in request.to_send.items()],
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            session_id=request.session_id,
            session_epoch=request.epoch,
            forgotten=request.to_forget,
        )
        return request, handle_fetch(apis, RequestHeader(1, 11, 1, "broker-2-epoch-1"), body)

    async def run():
        request, first = fetch(0)
        assert handler.handle_response(request, first) and len(by_partition(first)) == PARTITIONS
        assert reads == [("t", p) for p in range(PARTITIONS)]
        # the fetch moved the HW to 1 before the read: the first answer said it
        assert {hw for _, hw, _, _ in by_partition(first).values()} == {1}
        reads.clear()
        request, second = fetch(0)  # nothing new: an empty answer, nothing read
        assert handler.handle_response(request, second) and by_partition(second) == {}
        assert reads == []
        looks.clear()
        request, waiting = fetch(500)
        assert reads == [] and asyncio.isfuture(waiting) and not waiting.done()
        assert looks == []  # parked without asking the log of any partition again
        rm.append_records("t", 3, build_batch([SimpleRecord(b"y")]), 1)
        answer = await waiting
        assert handler.handle_response(request, answer)
        assert list(by_partition(answer)) == [("t", 3)] and reads == [("t", 3)]
        assert looks == [("t", 3)]  # the append woke it for t-3: only that one looked at

    asyncio.run(run())


def test_a_consumer_with_another_leader_epoch_is_fenced_or_told_it_is_unknown(tmp_path):
    """Fetch v9+ carries the consumer's current_leader_epoch; the leader (epoch 3)
    answers FENCED_LEADER_EPOCH for an older one, UNKNOWN_LEADER_EPOCH for a newer
    one (Kafka: Partition.localLogWithEpochOrThrow), and reads for its own or -1."""
    rm, apis = leader(tmp_path)
    rm.append_records("t", 0, build_batch([SimpleRecord(b"x")]), 1)
    header = RequestHeader(1, 11, 1, "consumer")
    for epoch, error in [
        (2, Errors.FENCED_LEADER_EPOCH),
        (4, Errors.UNKNOWN_LEADER_EPOCH),
        (3, Errors.NONE),
        (-1, Errors.NONE),
    ]:
        body = consumer_fetch({("t", 0): data()}, epochs={("t", 0): epoch})
        answer = by_partition(handle_fetch(apis, header, body))[("t", 0)]
        assert answer[0] == error, (epoch, answer)
        assert (answer[3] != b"") == (error == Errors.NONE)


def test_a_session_error_is_answered_on_the_wire_with_no_partitions(tmp_path):
    rm, apis = leader(tmp_path)
    header = RequestHeader(1, 11, 1, "consumer")
    unknown = handle_fetch(apis, header, consumer_fetch({("t", 0): data()}, (), 12345, 1))
    assert unknown["error_code"] == Errors.FETCH_SESSION_ID_NOT_FOUND
    assert (unknown["session_id"], unknown["responses"]) == (INVALID_SESSION_ID, [])
    full = handle_fetch(apis, header, consumer_fetch({("t", 0): data()}, (), 0, INITIAL_EPOCH))
    assert full["error_code"] == 0 and full["session_id"] != INVALID_SESSION_ID
    stale = handle_fetch(apis, header, consumer_fetch({}, (), full["session_id"], 2))
    assert stale["error_code"] == Errors.INVALID_FETCH_SESSION_EPOCH and stale["responses"] == []
