"""What the protocol fuzzer (benchmarks/fuzz_protocol.py) found, one test a finding,
each reproducing the hostile input without a network: the handler, the socket
server's processor on an in-memory stream, the metadata caches and the controller.
And the fuzzer's own promises: valid samples of every API and version, mutations
that are the same bytes for the same seed."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import struct

import pytest

from kafkalab.controller.quorum_controller import MAX_PARTITIONS_PER_BATCH, QuorumController
from kafkalab.errors import Errors, KafkaError, UnknownKindError
from kafkalab.protocol import APIS, RequestHeader, encode_request
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.fuzz import (
    KINDS,
    HostileFrames,
    Mutation,
    sample_templates,
    template_for,
)
from kafkalab.protocol.schema import Versions
from kafkalab.protocol.types import ArrayOf
from kafkalab.records import build_batch
from kafkalab.records.record_batch import ATTRIBUTES_OFFSET, CRC_OFFSET, compute_crc
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.apis.fetch import handle_fetch
from kafkalab.server.config import KafkaConfig
from kafkalab.server.kafka_apis import KafkaApis
from kafkalab.server.metadata_cache import StandaloneMetadataCache
from kafkalab.server.socket_server import SocketServer
from kafkalab.storage import LogConfig, LogManager

TP = ("t", 0)


class Timers:
    class Handle:
        def cancel(self) -> None:
            pass

    def __call__(self, delay_s, fn):
        return self.Handle()


def broker_apis(tmp_path) -> KafkaApis:
    config = KafkaConfig(log_dirs=[str(tmp_path)])
    rm = ReplicaManager(LogManager(tmp_path, LogConfig()), Timers(), broker_id=1)
    cache = StandaloneMetadataCache(config, rm, lambda: ("127.0.0.1", 9092))
    return KafkaApis(config, rm, cache, producer_ids=None)


def fetch_body(partition_max_bytes: int, max_wait_ms: int = 100) -> dict:
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "topics": [
            {
                "topic": TP[0],
                "partitions": [
                    {
                        "partition": TP[1],
                        "fetch_offset": 0,
                        "partition_max_bytes": partition_max_bytes,
                    }
                ],
            }
        ],
    }


# -- Fetch --------------------------------------------------------------------------------


@pytest.mark.parametrize("max_bytes", [-1, -2, -(2**31)])
def test_a_negative_partition_max_bytes_reads_as_zero_and_still_makes_progress(tmp_path, max_bytes):
    # Found: Fetch v3 with partition_max_bytes -2**31 -> ValueError("max_size must be
    # >= 0") in the delayed fetch's first try, logged as a handler crash.
    apis = broker_apis(tmp_path)
    apis.replica_manager.make_leader(TP, 0, [1], [1], 0)
    batch = build_batch([b"one", b"two"])
    apis.replica_manager.append_records(*TP, batch)
    answer = handle_fetch(apis, RequestHeader(1, 11, 1, "t"), fetch_body(max_bytes))
    part = answer["responses"][0]["partitions"][0]
    assert part["error_code"] == Errors.NONE
    # max_bytes 0 with min_one_message: exactly the first whole batch.
    assert part["records"].read()[16:] == batch[16:]  # all but offset and epoch


def test_fetched_records_stay_readable_after_their_topic_is_deleted(tmp_path):
    # Found: a fetch answer held a slice sharing the segment's descriptor; a DeleteTopics
    # handled before the answer was sent closed it, and sendfile failed with EBADF, or
    # ("Illegal seek") sent from whatever the number had been given to since.
    apis = broker_apis(tmp_path)
    apis.replica_manager.make_leader(TP, 0, [1], [1], 0)
    batch = build_batch([b"kept"])
    apis.replica_manager.append_records(*TP, batch)
    answer = handle_fetch(apis, RequestHeader(1, 11, 1, "t"), fetch_body(1 << 20, 0))
    records = answer["responses"][0]["partitions"][0]["records"]
    apis.replica_manager.remove_partition(TP)  # the segment's files closed and deleted
    others = [os.open(tmp_path / f"other-{i}", os.O_RDWR | os.O_CREAT) for i in range(8)]
    try:
        for fd in others:
            os.write(fd, b"x" * 200)  # descriptor numbers reused, with other bytes
        assert records.read()[16:] == batch[16:]  # all but offset and epoch
    finally:
        for fd in others:
            os.close(fd)
    records.close()


# -- CreateTopics ---------------------------------------------------------------------------


def create_body(*topics: tuple[str, int], validate_only: bool = False) -> dict:
    return {
        "topics": [
            {
                "name": name,
                "num_partitions": n,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            for name, n in topics
        ],
        "timeout_ms": 1000,
        "validate_only": validate_only,
    }


@pytest.mark.parametrize("partitions", [2**31 - 1, 2**24, MAX_PARTITIONS_PER_BATCH + 1])
def test_a_standalone_broker_refuses_excessively_many_partitions(tmp_path, partitions):
    # Found: CreateTopics v0 with num_partitions 2**31-1 made the broker create
    # partitions one by one until memory ran out (RSS 1 GB in 2 minutes, no answer).
    apis = broker_apis(tmp_path)
    answer = asyncio.run(apis.metadata_cache.create_topics(create_body(("big", partitions))))
    assert answer["topics"][0]["error_code"] == Errors.POLICY_VIOLATION
    assert "Excessively large number of partitions" in answer["topics"][0]["error_message"]
    assert apis.replica_manager.log_manager.all_logs() == {}


def test_the_limit_is_per_request_as_in_kafka(tmp_path):
    apis = broker_apis(tmp_path)
    half = MAX_PARTITIONS_PER_BATCH // 2 + 1
    answer = asyncio.run(apis.metadata_cache.create_topics(create_body(("a", half), ("b", half))))
    assert [t["error_code"] for t in answer["topics"]] == [Errors.POLICY_VIOLATION] * 2
    answer = asyncio.run(apis.metadata_cache.create_topics(create_body(("a", 2), ("b", 3))))
    assert [t["error_code"] for t in answer["topics"]] == [Errors.NONE] * 2


def test_the_controller_refuses_excessively_many_partitions_and_invalid_names(tmp_path):
    c = QuorumController(tmp_path / "controller", session_timeout_ms=1000)
    epoch = c.register_broker(1, "127.0.0.1", 9091, "inc-1", now_ms=0)
    c.heartbeat(1, epoch, now_ms=0)
    with pytest.raises(KafkaError) as e:
        c.create_topic("big", 2**31 - 1, 1)
    assert e.value.code == Errors.POLICY_VIOLATION
    for name in ("../escape", "", "a" * 250, "spaces are not allowed"):
        with pytest.raises(KafkaError) as e:
            c.create_topic(name, 1, 1)
        assert e.value.code == Errors.INVALID_TOPIC_EXCEPTION
    c.create_topic("fine", 3, 1)
    assert "fine" in c.topics


# -- the socket server's processor --------------------------------------------------------


class Parked:
    """A handler whose every answer waits (a parked fetch with a huge max_wait_ms)."""

    def __init__(self) -> None:
        self.futures: list[asyncio.Future] = []

    def handle(self, header, body):
        future = asyncio.get_running_loop().create_future()
        self.futures.append(future)
        return future


class Answering:
    def handle(self, header, body):
        return {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "topics": []}


class GoneWriter:
    """The writing side of a connection whose client has hung up."""

    def __init__(self, fail_on_drain: bool) -> None:
        self.fail_on_drain = fail_on_drain
        self.closed = False

    def get_extra_info(self, name):
        return ("127.0.0.1", 1)

    def write(self, data) -> None:
        pass

    async def drain(self) -> None:
        if self.fail_on_drain:
            raise ConnectionResetError("Connection lost")

    def close(self) -> None:
        self.closed = True


async def run_processor(apis, frames: bytes, writer: GoneWriter) -> SocketServer:
    server = SocketServer(
        apis, "127.0.0.1", 0, max_request_bytes=1 << 20, queued_max_requests=10, num_handlers=1
    )
    server._handlers = [asyncio.create_task(server._handler())]
    reader = asyncio.StreamReader()
    reader.feed_data(frames)
    reader.feed_eof()  # the client sent its request and closed the connection
    await asyncio.wait_for(server._processor(reader, writer), 10)
    for task in server._handlers:
        task.cancel()
    return server


def test_a_client_that_leaves_a_parked_request_is_let_go_at_once(caplog):
    # Found: a Fetch with max_wait_ms 2**31-1 from a client that then closed kept the
    # connection (a descriptor, a task) until the wait ran out, in 24 days.
    apis = Parked()
    frame = encode_request(RequestHeader(3, 1, 1, "t"), {"topics": []})
    writer = GoneWriter(fail_on_drain=False)

    async def scenario():
        server = await run_processor(apis, frame, writer)
        assert writer.closed and not server._connections
        assert len(apis.futures) == 1 and not apis.futures[0].done()  # still parked
        apis.futures[0].set_result({"throttle_time_ms": 0, "topics": []})  # finishes unread

    with caplog.at_level(logging.DEBUG):
        asyncio.run(scenario())
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_client_hanging_up_before_its_answer_is_not_a_broker_error(caplog):
    # Found: "ERROR closing connection ... after an error: ConnectionResetError" for every
    # client that went away while its answer was being written.
    frame = encode_request(RequestHeader(3, 1, 1, "t"), {"topics": []})
    writer = GoneWriter(fail_on_drain=True)
    with caplog.at_level(logging.DEBUG):
        asyncio.run(run_processor(Answering(), frame, writer))
    assert writer.closed
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


# -- the fuzzer itself ------------------------------------------------------------------------


def test_samples_cover_every_api_and_version_and_are_valid_requests():
    templates = sample_templates()
    assert {(t.api_key, t.version) for t in templates} == {
        (api.key, v) for api in APIS.values() for v in range(api.min_version, api.max_version + 1)
    }
    for t in templates:
        (size,) = struct.unpack_from(">i", t.data)
        assert size == len(t.data) - 4
        assert template_for(t.data) == t  # walks completely, to the last byte
        kinds = {s.kind for s in t.slots}
        assert {"length", "int"} <= kinds  # the header's at least
        has_arrays = any(
            isinstance(f.type, (list, ArrayOf)) and t.version in Versions.parse(f.versions)
            for f in APIS[t.api_key].request.fields
        )
        assert ("count" in kinds) == has_arrays
        assert ("tagged" in kinds) == APIS[t.api_key].request.is_flexible(t.version)


def test_frames_are_the_same_bytes_for_the_same_seed_and_use_every_mutation():
    templates = sample_templates()
    a, b = HostileFrames(7, templates), HostileFrames(7, templates)
    frames = [a.frame(n) for n in range(3000)]
    assert frames == [b.frame(n) for n in range(3000)]
    assert frames != [HostileFrames(8, templates).frame(n) for n in range(3000)]
    assert {f.kind for f in frames} == set(KINDS)
    assert any(f.chunks > 1 for f in frames)
    valid = [f for f in frames if f.kind == "valid"]
    assert all(template_for(f.data) is not None for f in valid)
    assert all(template_for(f.data) is None for f in frames if f.kind == "garbage")


# -- Produce ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_a_batch_naming_an_undefined_compression_codec_is_refused_as_corrupt(tmp_path, codec):
    # Found: Produce accepted a batch (its CRC re-computed) with codec bits 5; the next
    # ListOffsets by timestamp decoded it and crashed: "5 is not a valid CompressionType".
    apis = broker_apis(tmp_path)
    apis.replica_manager.make_leader(TP, 0, [1], [1], 0)
    batch = bytearray(build_batch([b"x"]))
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, codec)
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch, 0, len(batch)))
    result = apis.replica_manager.append_records(*TP, bytes(batch))
    assert result.error == Errors.CORRUPT_MESSAGE
    assert "compression codec" in result.message
    assert apis.replica_manager.partition(TP).log.log_end_offset == 0


def test_a_client_that_pipelined_behind_a_parked_request_and_left_is_let_go(caplog):
    # Found by the million-frame run: 19 connections left in CLOSE_WAIT. The fuzzer sends
    # a probe behind each frame; behind a parked Fetch (max_wait_ms 2**31-1) the broker
    # read the probe's size prefix, took it for "the client is still there", and stopped
    # watching, so the client's leaving went unseen until the wait ran out.
    apis = Parked()
    fetch = encode_request(RequestHeader(3, 1, 1, "t"), {"topics": []})
    probe = encode_request(RequestHeader(18, 0, 2, "probe"), {})
    writer = GoneWriter(fail_on_drain=False)

    async def scenario():
        server = await run_processor(apis, fetch + probe, writer)
        assert writer.closed and not server._connections
        assert len(apis.futures) == 1 and not apis.futures[0].done()
        apis.futures[0].set_result({"throttle_time_ms": 0, "topics": []})

    with caplog.at_level(logging.DEBUG):
        asyncio.run(scenario())
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_requests_pipelined_behind_a_parked_one_are_answered_in_order():
    class Answers:
        def __init__(self) -> None:
            self.parked: asyncio.Future | None = None

        def handle(self, header, body):
            if header.correlation_id == 1:  # the first one waits, as a long poll does
                self.parked = asyncio.get_running_loop().create_future()
                asyncio.get_running_loop().call_later(0.05, self.parked.set_result, {})
                return self.parked
            return {}

    class Collecting(GoneWriter):
        def __init__(self) -> None:
            super().__init__(fail_on_drain=False)
            self.data = bytearray()

        def write(self, data) -> None:
            self.data += data

    frames = b"".join(encode_request(RequestHeader(18, 0, i, "t"), {}) for i in range(1, 6))
    writer = Collecting()
    server = SocketServer(
        Answers(), "127.0.0.1", 0, max_request_bytes=1 << 20, queued_max_requests=10, num_handlers=1
    )

    async def scenario():
        server._handlers = [asyncio.create_task(server._handler())]
        reader = asyncio.StreamReader()
        reader.feed_data(frames)
        task = asyncio.create_task(server._processor(reader, writer))
        await asyncio.sleep(0.3)
        # Answered while the client is still there and sends nothing more (a read-ahead
        # waiting for more bytes must not hold back what it already read).
        assert answered_ids() == [1, 2, 3, 4, 5]
        reader.feed_eof()
        await asyncio.wait_for(task, 10)
        for t in server._handlers:
            t.cancel()

    def answered_ids() -> list[int]:
        ids, at = [], 0
        while at < len(writer.data):
            (size,) = struct.unpack_from(">i", writer.data, at)
            ids.append(struct.unpack_from(">i", writer.data, at + 4)[0])
            at += 4 + size
        return ids

    asyncio.run(scenario())
    assert answered_ids() == [1, 2, 3, 4, 5]


def test_a_retention_past_the_end_of_time_is_stored_as_never():
    """Found by the protocol fuzzer: OffsetCommit v2-v4 with retention_time_ms near
    2^63 made now + retention overflow the record's int64 expire_timestamp, and
    the broker dropped the connection instead of answering."""
    from group_harness import Harness

    from kafkalab.coordinator.group.results import CommitOffset

    h = Harness()
    e = h.c.commit_offsets(
        "g", {("t", 0): CommitOffset(5)}, now_ms=1000, request="c",
        expire_timestamp_ms=1000 + 2**63 - 1,
    )  # fmt: skip
    (append,) = e.appends()
    out = h.c.append_completed(append.append_id, Errors.NONE, now_ms=1000)
    assert out.responses()[0].result.partitions == {("t", 0): Errors.NONE}
    assert h.c.groups["g"].offsets[("t", 0)].expire_timestamp == 2**63 - 1


def test_a_read_ahead_broken_by_the_peer_is_not_left_unretrieved():
    # Found (fuzz, seed 2026): "ERROR asyncio: Task exception was never retrieved ->
    # BrokenPipeError". A parked request was answered; writing the answer found the
    # client gone, the transport's connection_lost failed the pending read-ahead with
    # BrokenPipeError, and the processor closed without collecting it.
    import gc

    apis = Parked()
    frame = encode_request(RequestHeader(3, 1, 1, "t"), {"topics": []})
    unretrieved = []
    readers = []

    class BreakingWriter(GoneWriter):
        async def drain(self) -> None:
            readers[0].set_exception(BrokenPipeError(32, "Broken pipe"))  # connection_lost
            for _ in range(3):
                await asyncio.sleep(0)  # the read-ahead task finishes with it
            raise ConnectionResetError("Connection lost")

    writer = BreakingWriter(fail_on_drain=True)

    async def scenario():
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: unretrieved.append(context["message"]))
        server = SocketServer(
            apis, "127.0.0.1", 0, max_request_bytes=1 << 20, queued_max_requests=10, num_handlers=1
        )
        server._handlers = [asyncio.create_task(server._handler())]
        readers.append(asyncio.StreamReader())
        readers[0].feed_data(frame)  # no end of stream: the client is still there
        processor = asyncio.create_task(server._processor(readers[0], writer))
        while not apis.futures:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the processor reads ahead while the request is parked
        apis.futures[0].set_result({"throttle_time_ms": 0, "topics": []})
        await asyncio.wait_for(processor, 10)
        for task in server._handlers:
            task.cancel()
        gc.collect()
        await asyncio.sleep(0)

    # (no log capture here: a captured record would keep the failed read alive, and
    # asyncio reports an unretrieved exception only when the task is collected)
    asyncio.run(scenario())
    assert writer.closed
    assert unretrieved == []


def test_a_seeds_frames_are_pinned_bytes():
    """Frame n of a seed is part of what a fuzz finding names: the same templates and
    weights give the same bytes across refactors. The first digest was taken before the
    mutations became a table of Mutation members, with the kinds of that time; the
    second pins today's kinds (batch_records added: a new weight changes the draw).
    Produce is left out: its batches carry the clock."""
    pinned = {
        (ApiKeys.FETCH, 4),
        (ApiKeys.METADATA, 9),
        (ApiKeys.API_VERSIONS, 3),
        (ApiKeys.JOIN_GROUP, 5),
        (ApiKeys.CONSUMER_GROUP_HEARTBEAT, 1),
    }
    templates = [t for t in sample_templates() if (t.api_key, t.version) in pinned]
    assert len(templates) == len(pinned)

    def digest_of(kinds):
        fuzzer = HostileFrames(7, templates, kinds=kinds)
        digest = hashlib.sha256()
        for n in range(2000):
            f = fuzzer.frame(n)
            digest.update(f"{n} {f.kind} {f.chunks} {f.hang_up} ".encode() + f.data)
        return digest.hexdigest()

    before_batch_records = {k: w for k, w in KINDS.items() if k != Mutation.BATCH_RECORDS}
    assert digest_of(before_batch_records) == (
        "acb9e1aa4838642bf7917fc2509c5898542c7caffbd09401e74b2b7beff90c2f"
    )
    assert digest_of(KINDS) == "57b2673350bd1f18687c80cdf72e92cf52a09bc6f5a049f6538562b46185c791"


def test_every_mutation_has_a_weight_and_a_maker_and_unknown_names_are_refused():
    assert set(KINDS) == set(Mutation) == set(HostileFrames._MUTATIONS)
    fuzzer = HostileFrames(1, sample_templates()[:3], kinds={"valid": 1, "garbage": 1})
    assert {fuzzer.frame(n).kind for n in range(50)} == {Mutation.VALID, Mutation.GARBAGE}
    with pytest.raises(UnknownKindError, match="unknown mutation 'bit-flip'; choose from valid, "):
        HostileFrames(1, sample_templates()[:3], kinds={"bit-flip": 1})
