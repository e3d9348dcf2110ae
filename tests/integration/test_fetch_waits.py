"""When a consumer's Fetch is answered, on real sockets: Kafka's rules
(ReplicaManager.fetchMessages, DelayedFetch.tryComplete), raw Fetch v11 requests.

- a fetch with fewer than `min_bytes` readable waits, and the append that brings
  the bytes to `min_bytes` answers it (not an earlier one, not max_wait_ms);
- a fetch whose offset is on an older segment than the high watermark is answered
  at once with what that segment holds, whatever min_bytes asks: a read stops at
  its segment's end, so waiting for more there would only wait out max_wait_ms
  (kafkalab did, before; a consumer catching up with fetch.min.bytes > 1 lost
  max_wait_ms at every segment boundary, and a waiting one at every roll).

max_wait_ms is two minutes and every read of an answer gives up after 30 s, so a
fetch that waited out max_wait_ms fails the test instead of passing slowly.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest

from kafkalab.client.network_client import BrokerConnection
from kafkalab.errors import Errors
from kafkalab.protocol import APIS, RequestHeader, decode_response, encode_request
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.records import SimpleRecord, build_batch, iter_batches
from kafkalab.server.broker import BrokerThread

MAX_WAIT_MS = 120_000
ANSWER_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread({"log.dirs": str(tmp_path_factory.mktemp("fetch-waits"))}) as b:
        yield b


def address(broker) -> tuple[str, int]:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    return host, int(port)


def create_topic(broker, name: str, configs: dict[str, str]) -> None:
    conn = BrokerConnection(*address(broker))
    try:
        topic = {
            "name": name,
            "num_partitions": 1,
            "replication_factor": 1,
            "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in configs.items()],
        }
        body = {"topics": [topic], "timeout_ms": 10_000, "validate_only": False}
        answer = conn.request(ApiKeys.CREATE_TOPICS, body)
    finally:
        conn.close()
    assert answer["topics"][0]["error_code"] == Errors.NONE


def produce(broker, topic: str, value: bytes) -> int:
    """Append one batch of one record; its offset."""
    conn = BrokerConnection(*address(broker))
    try:
        batch = build_batch([SimpleRecord(value)])
        body = {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 10_000,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "records": batch}]}],
        }
        answer = conn.request(ApiKeys.PRODUCE, body)
    finally:
        conn.close()
    part = answer["responses"][0]["partitions"][0]
    assert part["error_code"] == Errors.NONE
    return part["base_offset"]


def send_fetch(broker, topic: str, offset: int, min_bytes: int) -> socket.socket:
    """A consumer's Fetch v11, sent and not yet read."""
    sock = socket.create_connection(address(broker), timeout=ANSWER_TIMEOUT_S)
    partition = {
        "partition": 0,
        "current_leader_epoch": -1,
        "fetch_offset": offset,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }
    body = {
        "replica_id": -1,
        "max_wait_ms": MAX_WAIT_MS,
        "min_bytes": min_bytes,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [partition]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    sock.sendall(encode_request(RequestHeader(ApiKeys.FETCH, 11, 1, "test"), body))
    return sock


def read_answer(sock: socket.socket) -> list[int]:
    """The offsets of the batches a Fetch answered with (raises socket.timeout after
    ANSWER_TIMEOUT_S: the broker is still holding it)."""

    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            out += chunk
        return out

    (size,) = struct.unpack(">i", exactly(4))
    _, body = decode_response(APIS[ApiKeys.FETCH], 11, exactly(size))
    part = body["responses"][0]["partitions"][0]
    assert part["error_code"] == Errors.NONE
    return [batch.base_offset for batch in iter_batches(bytes(part["records"]))]


def parked(broker) -> int:
    """How many fetches wait in the broker's delayed-fetch purgatory (asked on its loop)."""

    async def count() -> int:
        return broker.broker.replica_manager.delayed_fetch.watched()

    return asyncio.run_coroutine_threadsafe(count(), broker._loop).result(timeout=10)


def wait_until_parked(broker, n: int) -> None:
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while parked(broker) != n:
        assert time.monotonic() < deadline, f"no {n} fetch(es) parked in the purgatory"
        time.sleep(0.02)


def batch_size(value: bytes) -> int:
    return len(build_batch([SimpleRecord(value)]))


def test_a_fetch_is_answered_by_the_append_that_brings_min_bytes(broker):
    create_topic(broker, "waits", {})
    value = b"v" * 100
    one = batch_size(value)
    sock = send_fetch(broker, "waits", 0, min_bytes=one + 1)  # more than one batch
    try:
        wait_until_parked(broker, 1)
        assert produce(broker, "waits", value) == 0
        # one batch is below min_bytes: still waiting (and nothing sent back)
        assert parked(broker) == 1
        sock.setblocking(False)
        with pytest.raises(BlockingIOError):
            sock.recv(1)
        sock.settimeout(ANSWER_TIMEOUT_S)
        assert produce(broker, "waits", value) == 1
        assert read_answer(sock) == [0, 1]  # the second append answered it
    finally:
        sock.close()
    assert parked(broker) == 0


def test_a_fetch_on_an_older_segment_is_answered_at_once(broker):
    value = b"s" * 200
    one = batch_size(value)
    # room for two batches a segment: offsets 0-1, 2-3, 4-5 in three segments
    create_topic(broker, "rolls", {"segment.bytes": str(2 * one + 10)})
    assert [produce(broker, "rolls", value) for _ in range(6)] == list(range(6))
    # Offset 1 is the last batch of the first segment: one batch readable there,
    # five below the HW. min_bytes asks for three: Kafka answers at once (the
    # fetch is on an older segment than the HW), with what the first segment holds.
    sock = send_fetch(broker, "rolls", 1, min_bytes=3 * one)
    try:
        assert read_answer(sock) == [1]
    finally:
        sock.close()
    assert parked(broker) == 0
    # On the segment the HW is on, the same fetch waits: two batches, 4 and 5, are
    # readable, not three. The next append rolls a new segment: the fetch is now on
    # an older one, and is answered with what that segment holds.
    sock = send_fetch(broker, "rolls", 4, min_bytes=3 * one)
    try:
        wait_until_parked(broker, 1)
        assert produce(broker, "rolls", value) == 6
        assert read_answer(sock) == [4, 5]
    finally:
        sock.close()
