"""The broker's network layer on real sockets: negotiation, ordering, long polling,
and hostile input that must close one connection and disturb nothing else."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from kafkalab.errors import Errors
from kafkalab.protocol import APIS, RequestHeader, decode_response, encode_request
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.server.broker import BrokerThread


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(
        {"log.dirs": str(tmp_path_factory.mktemp("net")), "socket.request.max.bytes": "1000000"}
    ) as b:
        yield b


def connect(broker) -> socket.socket:
    host, port = broker.bootstrap_servers.split(":")
    return socket.create_connection((host, int(port)), timeout=30)


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n):
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def call(sock, api_key, version, body, correlation_id=1):
    sock.sendall(encode_request(RequestHeader(api_key, version, correlation_id, "test"), body))
    return decode_response(APIS[api_key], version, read_frame(sock))


def is_closed(sock) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionError:
        return True


def produce_body(topic, records, acks=1):
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 1000,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "records": records}]}],
    }


def test_api_versions_too_new_gets_a_v0_body_with_unsupported_version(broker):
    with connect(broker) as sock:
        # ApiVersions v99: the header is v2 for flexible versions, but Kafka reads
        # only the header start and answers at v0.
        frame = struct.pack(">hhih", 18, 99, 5, 1) + b"x" + b"\x00" + b"\x00garbage"
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        correlation_id, body = decode_response(APIS[18], 0, read_frame(sock))
        assert correlation_id == 5
        assert body["error_code"] == Errors.UNSUPPORTED_VERSION
        keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
        assert keys[18] == (0, 4) and keys[0] == (3, 12) and keys[1] == (0, 11)
        # The connection stays usable: now at v3.
        _, body = call(sock, 18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert body["error_code"] == 0


def test_requests_on_one_connection_are_answered_in_order(broker):
    with connect(broker) as sock:
        frames = b"".join(
            encode_request(
                RequestHeader(3 if i % 2 else 18, 1, 100 + i, "t"), {"topics": []} if i % 2 else {}
            )
            for i in range(20)
        )
        sock.sendall(frames)  # pipelined
        ids = [struct.unpack(">i", read_frame(sock)[:4])[0] for _ in range(20)]
        assert ids == list(range(100, 120))


def test_acks_zero_gets_no_response_but_is_written(broker):
    with connect(broker) as sock:
        call(sock, 3, 4, {"topics": [{"name": "acks0"}], "allow_auto_topic_creation": True})
        sock.sendall(
            encode_request(
                RequestHeader(0, 7, 1, "t"), produce_body("acks0", build_batch([b"quiet"]), acks=0)
            )
        )
        _, meta = call(sock, 18, 2, {}, correlation_id=2)  # the next answer is this one
        assert meta["error_code"] == 0
        _, offsets = call(
            sock,
            2,
            1,
            {
                "replica_id": -1,
                "topics": [
                    {"name": "acks0", "partitions": [{"partition_index": 0, "timestamp": -1}]}
                ],
            },
            correlation_id=3,
        )
        assert offsets["topics"][0]["partitions"][0]["offset"] == 1


def test_long_poll_fetch_is_completed_by_an_append(broker):
    with connect(broker) as producer_sock, connect(broker) as fetch_sock:
        call(producer_sock, 3, 4, {"topics": [{"name": "poll"}], "allow_auto_topic_creation": True})
        fetch = {
            "replica_id": -1,
            "max_wait_ms": 60_000,
            "min_bytes": 1,
            "max_bytes": 10**6,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": "poll",
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": 0,
                            "log_start_offset": -1,
                            "partition_max_bytes": 10**6,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        fetch_sock.sendall(encode_request(RequestHeader(1, 11, 9, "t"), fetch))
        time.sleep(0.3)  # the fetch is now parked in the purgatory
        call(producer_sock, 0, 7, produce_body("poll", build_batch([SimpleRecord(b"wake")])))
        started = time.monotonic()
        _, body = decode_response(APIS[1], 11, read_frame(fetch_sock))
        part = body["responses"][0]["partitions"][0]
        assert part["error_code"] == 0 and part["high_watermark"] == 1
        assert b"wake" in bytes(part["records"])
        # Answered by the append, long before max_wait_ms (a sanity bound, not a benchmark).
        assert time.monotonic() - started < 30


def test_hostile_frames_close_only_their_connection(broker):
    with connect(broker) as good:
        call(good, 18, 0, {})
        hostile = [
            struct.pack(">i", 2_000_000),  # over socket.request.max.bytes
            struct.pack(">i", -5),
            struct.pack(">i", 8) + struct.pack(">hhi", 999, 0, 1),  # unknown API key
            struct.pack(">i", 8) + struct.pack(">hhi", 0, 42, 1),  # unsupported Produce version
            struct.pack(">i", 12) + struct.pack(">hhih", 3, 1, 1, 50) + b"xx",  # bad client id
            struct.pack(">i", 20) + struct.pack(">hhih", 0, 7, 1, -1) + b"\xff" * 10,
        ]
        for frame in hostile:
            with connect(broker) as bad:
                bad.sendall(frame)
                assert is_closed(bad), frame
        # A connection that sends half a frame and goes away.
        with connect(broker) as bad:
            bad.sendall(struct.pack(">i", 100) + b"abc")
        _, body = call(good, 18, 0, {}, correlation_id=77)
        assert body["error_code"] == 0


def test_many_connections_at_once(broker):
    errors = []

    def client(i):
        try:
            with connect(broker) as sock:
                for n in range(20):
                    cid, body = call(sock, 18, 1, {}, correlation_id=n)
                    assert cid == n and body["error_code"] == 0
        except Exception as e:  # collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []


def test_sigterm_answers_parked_fetches_then_exits_cleanly(tmp_path):
    from kafkalab.server.broker import BrokerProcess

    broker = BrokerProcess({"log.dirs": str(tmp_path)}).start()
    try:
        host, port = broker.bootstrap_servers.split(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            call(sock, 3, 4, {"topics": [{"name": "quiet"}], "allow_auto_topic_creation": True})
            fetch = {
                "replica_id": -1,
                "max_wait_ms": 120_000,
                "min_bytes": 1,
                "max_bytes": 1000,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": "quiet",
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": -1,
                                "fetch_offset": 0,
                                "log_start_offset": -1,
                                "partition_max_bytes": 1000,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            }
            sock.sendall(encode_request(RequestHeader(1, 11, 4, "t"), fetch))
            time.sleep(0.3)  # parked in the purgatory
            broker.process.terminate()  # SIGTERM
            correlation_id, body = decode_response(APIS[1], 11, read_frame(sock))
            assert correlation_id == 4 and body["responses"][0]["partitions"][0]["error_code"] == 0
        assert broker.process.wait(30) == 0
        assert (tmp_path / ".kafka_cleanshutdown").exists()
    finally:
        broker.kill()


def test_offset_for_leader_epoch(broker):
    with connect(broker) as sock:
        call(sock, 3, 4, {"topics": [{"name": "epochs"}], "allow_auto_topic_creation": True})
        call(sock, 0, 7, produce_body("epochs", build_batch([b"a", b"b", b"c"])))

        def ask(topic, epoch, current):
            _, body = call(
                sock,
                23,
                3,
                {
                    "replica_id": -1,
                    "topics": [
                        {
                            "topic": topic,
                            "partitions": [
                                {
                                    "partition": 0,
                                    "current_leader_epoch": current,
                                    "leader_epoch": epoch,
                                }
                            ],
                        }
                    ],
                },
            )
            return body["topics"][0]["partitions"][0]

        answer = ask("epochs", 0, 0)
        assert (answer["error_code"], answer["leader_epoch"], answer["end_offset"]) == (0, 0, 3)
        assert ask("epochs", 0, 1)["error_code"] == Errors.UNKNOWN_LEADER_EPOCH
        assert ask("nope", 0, -1)["error_code"] == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert ask("epochs", 7, -1)["end_offset"] == -1  # an epoch newer than any known


def test_min_insync_replicas_refuses_acks_all_when_the_isr_is_too_small(broker):
    with connect(broker) as sock:
        _, created = call(
            sock,
            19,
            4,
            {
                "topics": [
                    {
                        "name": "strict",
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": "min.insync.replicas", "value": "2"}],
                    }
                ],
                "timeout_ms": 1000,
                "validate_only": False,
            },
        )
        assert created["topics"][0]["error_code"] == 0
        _, refused = call(sock, 0, 7, produce_body("strict", build_batch([b"x"]), acks=-1))
        part = refused["responses"][0]["partitions"][0]
        assert part["error_code"] == Errors.NOT_ENOUGH_REPLICAS
        _, accepted = call(sock, 0, 7, produce_body("strict", build_batch([b"x"]), acks=1))
        assert accepted["responses"][0]["partitions"][0]["error_code"] == 0
