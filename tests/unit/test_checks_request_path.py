"""Lab 08's checks (kafkalab.labs.checks.request_path): a right answer passes, wrong
answers say "not yet:" and why, the placeholder ... is not an answer. The live
objects are built as the notebooks build them, small."""

from __future__ import annotations

import selectors
import socket
import struct
import time
from dataclasses import dataclass

import pytest

from kafkalab.errors import Errors
from kafkalab.labs.checks import request_path as checks
from kafkalab.protocol import RequestHeader, encode_request
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.replication.delayed_fetch import DelayedFetch, FetchPartition
from kafkalab.replication.delayed_produce import DelayedProduce
from kafkalab.replication.partition import Partition
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.broker import BrokerThread
from kafkalab.server.socket_server import SocketServer
from kafkalab.storage import LogConfig, LogManager, UnifiedLog
from kafkalab.storage.unified_log import FetchIsolation


def not_yet(v, *words):
    assert not v and str(v).startswith("not yet:"), str(v)
    for word in words:
        assert word in str(v), str(v)


def unanswered(v):
    not_yet(v, "replace the ...")


# -- part 1: answers in order on one connection ----------------------------------------------


def read_frame(sock):
    def exactly(n):
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            assert chunk, "closed"
            out += chunk
        return out

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def fetch(correlation_id, topic, max_wait_ms):
    body = {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return encode_request(RequestHeader(1, 11, correlation_id, "t"), body)


def api_versions(correlation_id):
    return encode_request(RequestHeader(18, 1, correlation_id, "t"), {})


def metadata(correlation_id, topic):
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": True}
    return encode_request(RequestHeader(3, 4, correlation_id, "t"), body)


def test_answer_order_on_a_live_broker(tmp_path):
    with BrokerThread({"log.dirs": str(tmp_path)}) as broker:
        address = broker.bootstrap_servers.split(":")
        with socket.create_connection(address) as s:
            s.sendall(metadata(0, "quiet"))
            read_frame(s)

        def send_plan():
            a, b = socket.create_connection(address), socket.create_connection(address)
            a.sendall(fetch(1, "quiet", 300) + api_versions(2))
            time.sleep(0.05)
            b.sendall(api_versions(3) + metadata(4, "quiet"))
            selector = selectors.DefaultSelector()
            selector.register(a, selectors.EVENT_READ)
            selector.register(b, selectors.EVENT_READ)
            order = []
            while len(order) < 4:
                for key, _ in selector.select(timeout=10):
                    order.append(struct.unpack(">i", read_frame(key.fileobj)[:4])[0])
            selector.close()
            a.close()
            b.close()
            return order

        assert checks.answer_order([3, 4, 1, 2], send_plan)
        not_yet(checks.answer_order([3, 1, 4, 2], send_plan), "in the order it sent")
        not_yet(checks.answer_order([1, 2, 3, 4], send_plan), "max_wait_ms")
        not_yet(checks.answer_order([3, 4, 1], send_plan), "exactly once")
        unanswered(checks.answer_order(..., send_plan))


# -- part 1: what queued.max.requests bounds ------------------------------------------------


def server(queued_max_requests, peak):
    s = SocketServer(
        None,
        "127.0.0.1",
        0,
        max_request_bytes=1,
        queued_max_requests=queued_max_requests,
        num_handlers=1,
    )
    s.channel_peak = peak  # as a burst leaves it
    return s


RUNS = [
    {"connections": 32, "server": server(500, 27)},
    {"connections": 32, "server": server(4, 4)},
]


def test_channel_bound_right():
    assert checks.channel_bound(lambda c, q: min(c, q), RUNS)


def test_channel_bound_wrong():
    not_yet(checks.channel_bound(lambda c, q: q, RUNS), "at most one request")
    not_yet(checks.channel_bound(lambda c, q: c, RUNS), "bounded")
    not_yet(checks.channel_bound(lambda c, q: min(c, q) - 1, RUNS), "too low")
    not_yet(checks.channel_bound(lambda c, q: 1 / 0, RUNS), "ZeroDivisionError")


def test_channel_bound_placeholder():
    def channel_bound(connections, queued_max_requests): ...

    unanswered(checks.channel_bound(channel_bound, RUNS))


def test_channel_bound_says_when_a_peak_breaks_the_rule():
    broken = [{"connections": 2, "server": server(500, 3)}]
    not_yet(checks.channel_bound(lambda c, q: min(c, q), broken), "bug")


# -- part 2: DelayedProduce and DelayedFetch stepped by hand ---------------------------------

TP = ("orders", 0)


@dataclass
class Timer:
    due_ms: int
    fn: object
    cancelled: bool = False

    def cancel(self):
        self.cancelled = True


class Clock:
    def __init__(self):
        self.now_ms, self.timers = 0, []

    def schedule(self, delay_s, fn):
        timer = Timer(self.now_ms + round(delay_s * 1000), fn)
        self.timers.append(timer)
        return timer

    def advance(self, ms):
        self.now_ms += ms
        for timer in sorted(self.timers, key=lambda t: t.due_ms):
            if not timer.cancelled and timer.due_ms <= self.now_ms:
                timer.cancelled = True
                timer.fn()


@pytest.fixture
def world(tmp_path):
    made = []

    def setup():
        root = tmp_path / str(len(made))
        clock = Clock()
        leader = ReplicaManager(
            LogManager(root / "broker-1", LogConfig(min_insync_replicas=2)),
            clock.schedule,
            broker_id=1,
            clock=lambda: clock.now_ms,
        )
        leader.make_leader(TP, leader_epoch=1, isr=[1, 2], replicas=[1, 2, 3], partition_epoch=0)
        followers = {}
        for b in (2, 3):
            followers[b] = Partition(*TP, b, UnifiedLog(root / f"broker-{b}" / "orders-0"))
            followers[b].make_follower(1, 1, isr=[1, 2], replicas=[1, 2, 3], partition_epoch=0)
        made.append((leader, followers))
        return clock, leader, followers

    yield setup
    for leader, followers in made:
        leader.shutdown()
        for f in followers.values():
            f.log.close()


def fetch_from_leader(leader, follower):
    offset = follower.log.log_end_offset
    leader.update_follower_fetch_state(TP, follower.local_broker_id, offset)
    leader_log = leader.partition(TP).log
    data = leader_log.read(offset, 1 << 20).read_bytes()
    if data:
        follower.append_records_to_follower(data, leader_log.high_watermark)


def produce(leader, values, acks=-1, timeout_ms=30_000, answers=None):
    batch = build_batch([SimpleRecord(v.encode()) for v in values])
    result = leader.append_records(*TP, batch, required_acks=acks)
    if acks != -1:
        return
    op = DelayedProduce(
        timeout_ms,
        leader.partition,
        {TP: result},
        on_done=lambda results: answers.append(Errors(results[TP].error).name),
    )
    leader.delayed_produce.try_complete_else_watch(op, [TP])


def test_delayed_produce_completion(world):
    def replay(steps=(2, 3, 2, 3)):
        _, leader, followers = world()
        produce(leader, ["old"], acks=1)
        fetch_from_leader(leader, followers[2])
        fetch_from_leader(leader, followers[2])
        answers = []
        produce(leader, ["a", "b", "c"], answers=answers)
        for step, broker in enumerate(steps, 1):
            fetch_from_leader(leader, followers[broker])
            if answers:
                return {"completed_by": step, "hw": leader.partition(TP).log.high_watermark}
        return {"completed_by": None, "hw": None}

    assert checks.delayed_produce_completion(3, 4, replay)
    not_yet(checks.delayed_produce_completion(1, 4, replay), "next fetch offset")
    not_yet(checks.delayed_produce_completion(4, 4, replay), "ISR")
    not_yet(checks.delayed_produce_completion(3, 3, replay), "smallest LEO")
    unanswered(checks.delayed_produce_completion(..., 4, replay))
    unanswered(checks.delayed_produce_completion(3, ..., replay))
    # Worked out from the objects, not remembered: broker 3 alone never completes it.
    assert checks.delayed_produce_completion(None, None, lambda: replay(steps=(3, 3)))


EVENTS = ["append", "follower fetch 1", "follower fetch 2"]


def test_delayed_fetch_outcomes(world):
    def play(min_bytes):
        clock, leader, followers = world()
        produce(leader, ["first"], acks=1)
        fetch_from_leader(leader, followers[2])
        fetch_from_leader(leader, followers[2])
        offset = leader.partition(TP).log.high_watermark
        answered = []
        op = DelayedFetch(
            500,
            min_bytes,
            FetchIsolation.HIGH_WATERMARK,
            [FetchPartition(*TP, offset, 1 << 20)],
            leader,
            on_done=lambda: answered.append(True),
        )
        if leader.delayed_fetch.try_complete_else_watch(op, [TP]):
            return "at once"
        for event in EVENTS:
            if event == "append":
                produce(leader, [f"record {i:02d}" for i in range(20)], acks=1)
            else:
                fetch_from_leader(leader, followers[2])
            if answered:
                return event
        clock.advance(500)
        return "timeout" if answered else "never"

    right = {1: "follower fetch 2", 4096: "timeout"}
    assert checks.delayed_fetch_outcomes(right, play, EVENTS)
    not_yet(
        checks.delayed_fetch_outcomes({1: "append", 4096: "timeout"}, play, EVENTS),
        "fetch.min.bytes=1",
        "high watermark",
    )
    not_yet(
        checks.delayed_fetch_outcomes(
            {1: "follower fetch 2", 4096: "follower fetch 2"}, play, EVENTS
        ),
        "4096",
    )
    not_yet(
        checks.delayed_fetch_outcomes({1: "follower fetch 1", 4096: "timeout"}, play, EVENTS),
        "next fetch",
    )
    not_yet(checks.delayed_fetch_outcomes({1: "soon", 4096: "timeout"}, play, EVENTS), "not one of")
    not_yet(checks.delayed_fetch_outcomes("timeout", play, EVENTS), "dict")
    unanswered(checks.delayed_fetch_outcomes(..., play, EVENTS))
    unanswered(checks.delayed_fetch_outcomes({1: ..., 4096: ...}, play, EVENTS))


# -- part 2: the byte range sendfile sends ---------------------------------------------------


@pytest.fixture
def log(tmp_path):
    log = UnifiedLog(tmp_path / "orders-0")
    for n, size in enumerate([5, 3, 8, 4, 6, 9]):
        batch = build_batch([SimpleRecord(b"v" * (20 + 10 * n)) for _ in range(size)])
        log.append_as_leader(batch, leader_epoch=0)
    log.update_high_watermark(26)
    yield log
    log.close()


def positions(log):
    return {h.base_offset: (p, h.size_in_bytes) for p, h in log.active_segment.log.batch_headers()}


def test_sendfile_range(log):
    at = positions(log)
    start, first_size = at[8]  # offset 10 is in the batch 8-15
    hw_position = at[26][0]
    # cut at the HW's batch
    assert checks.sendfile_range((start, hw_position - start), log, 10, 1500)
    # max_bytes inside a batch: the range ends there
    assert checks.sendfile_range((start, 600), log, 10, 600)
    # max_bytes smaller than the first batch: that whole batch
    assert checks.sendfile_range((start, first_size), log, 10, 100)
    not_yet(checks.sendfile_range((start, 1500), log, 10, 1500), "high watermark")
    not_yet(checks.sendfile_range((start, 100), log, 10, 100), "whole first batch")
    not_yet(checks.sendfile_range((at[8][0] + 50, 100), log, 10, 100), "starts where the batch")
    not_yet(checks.sendfile_range(start, log, 10, 100), "tuple")
    unanswered(checks.sendfile_range(..., log, 10, 100))
