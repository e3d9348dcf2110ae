"""Three controller processes' servers on a KRaft quorum (controller.quorum.voters):
the active controller is the Raft leader and answers brokers, standbys answer
NOT_CONTROLLER and replay what commits; when the active controller goes, another
voter activates in a higher epoch with every committed record, does not fence the
brokers it never heard from (activate() restarts their session timers), and the old
one comes back as a standby."""

from __future__ import annotations

import socket
import struct
import time
import uuid

from kafkalab.controller.metadata_record_serde import deserialize
from kafkalab.controller.quorum_controller import METADATA_TOPIC
from kafkalab.errors import Errors
from kafkalab.protocol import RequestHeader, decode_response, encode_request
from kafkalab.protocol.messages import CONTROLLER_APIS
from kafkalab.records import iter_batches
from kafkalab.server.controller_server import ControllerThread


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            assert chunk, "connection closed"
            out += chunk
        return out

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def call(port: int, api_key: int, version: int, body: dict) -> dict:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(encode_request(RequestHeader(api_key, version, 7, "t"), body, CONTROLLER_APIS))
        cid, response = decode_response(CONTROLLER_APIS[api_key], version, _read_frame(sock))
    assert cid == 7
    return response


def register(port: int, broker_id: int) -> dict:
    listener = {"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9000, "security_protocol": 0}
    body = {
        "broker_id": broker_id,
        "cluster_id": "c",
        "incarnation_id": uuid.uuid4(),
        "listeners": [listener],
        "features": [],
        "rack": None,
    }
    return call(port, 62, 0, body)


def heartbeat(port: int, broker_id: int, epoch: int) -> dict:
    body = {
        "broker_id": broker_id,
        "broker_epoch": epoch,
        "current_metadata_offset": 0,
        "want_fence": False,
        "want_shut_down": False,
    }
    return call(port, 63, 0, body)


def create_topic(port: int, name: str) -> dict:
    topic = {
        "name": name,
        "num_partitions": 1,
        "replication_factor": 1,
        "assignments": [],
        "configs": [],
    }
    body = {"topics": [topic], "timeout_ms": 5000, "validate_only": False}
    return call(port, 19, 4, body)["topics"][0]


def metadata_fetch(port: int, offset: int = 0) -> dict:
    """A broker's Fetch of the metadata log from `offset` (v11)."""
    body = {
        "replica_id": 1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 10**7,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": METADATA_TOPIC,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": 10**7,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return call(port, 1, 11, body)["responses"][0]["partitions"][0]


def voter_configs(tmp_path, extra: dict[str, str] | None = None):
    """Three voters 1, 2, 3 on free ports with fast quorum timeouts: (ports, log
    dirs, configs), each {node id: ...}; `extra` goes into every config."""
    ports = {i: _free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    dirs = {i: tmp_path / f"controller-{i}" for i in ports}
    configs = {
        i: {
            "node.id": str(i),
            "log.dirs": str(dirs[i]),
            "listeners": f"CONTROLLER://127.0.0.1:{ports[i]}",
            "controller.quorum.voters": voters,
            "controller.quorum.election.timeout.ms": "300",
            "controller.quorum.fetch.timeout.ms": "600",
            "controller.quorum.request.timeout.ms": "400",
            **(extra or {}),
        }
        for i in ports
    }
    return ports, dirs, configs


def until(predicate, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.05)


def test_a_controller_quorum_fails_over_with_every_committed_record(tmp_path):
    ports, _, configs = voter_configs(tmp_path, {"broker.session.timeout.ms": "3000"})
    controllers = {i: ControllerThread(configs[i]).__enter__() for i in ports}
    try:

        def active() -> int | None:
            found = [i for i, c in controllers.items() if c.server.quorum.active]
            return found[0] if len(found) == 1 else None

        first = until(active)
        epoch = controllers[first].server.quorum.manager.epoch
        standby = next(i for i in ports if i != first)

        # a standby sends brokers and clients to the active controller
        assert register(ports[standby], 1)["error_code"] == Errors.NOT_CONTROLLER
        assert metadata_fetch(ports[standby])["error_code"] == Errors.NOT_LEADER_OR_FOLLOWER
        assert create_topic(ports[standby], "x")["error_code"] == Errors.NOT_CONTROLLER

        # the active one answers once the quorum committed what it wrote
        reg = register(ports[first], 1)
        assert reg["error_code"] == 0
        assert heartbeat(ports[first], 1, reg["broker_epoch"])["error_code"] == 0
        assert create_topic(ports[first], "t")["error_code"] == 0
        part = metadata_fetch(ports[first])
        records = [
            deserialize(r.value) for b in iter_batches(bytes(part["records"])) for r in b.records
        ]
        assert {"RegisterBrokerRecord", "TopicRecord"} <= {r["type"] for r in records}
        # every standby replayed the committed records
        until(lambda: all("t" in c.server.controller.topics for c in controllers.values()))

        # the active controller goes; another activates in a higher epoch
        controllers.pop(first).__exit__(None, None, None)
        second = until(active)
        assert second != first
        assert controllers[second].server.quorum.manager.epoch > epoch
        c2 = controllers[second].server.controller
        assert "t" in c2.topics and 1 in c2.brokers
        assert not c2.brokers[1].fenced  # its session timer restarted, not expired
        assert heartbeat(ports[second], 1, reg["broker_epoch"])["error_code"] == 0
        assert create_topic(ports[second], "u")["error_code"] == 0

        # the old active controller restarts and follows as a standby
        controllers[first] = ControllerThread(configs[first]).__enter__()
        until(lambda: "u" in controllers[first].server.controller.topics)
        assert active() == second
        assert register(ports[first], 2)["error_code"] == Errors.NOT_CONTROLLER
    finally:
        for c in controllers.values():
            c.__exit__(None, None, None)


def test_a_cut_off_active_controller_resigns_and_the_others_elect_one(tmp_path):
    """Cut the active controller from both other voters (kafkalab's link faults): it
    hears no Fetch from a majority, resigns by check-quorum (KAFKA-15489) and stops
    acting; the two others elect one of themselves in a higher epoch. Healed, the old
    one follows. A controller cut from a broker drops that broker's requests."""
    from kafkalab.server.link_faults import write_deaf_to

    ports, dirs, configs = voter_configs(tmp_path)
    controllers = {i: ControllerThread(configs[i]).__enter__() for i in ports}
    try:

        def actives() -> list[int]:
            return [i for i, c in controllers.items() if c.server.quorum.active]

        [first] = until(lambda: actives() if len(actives()) == 1 else None)
        epoch = controllers[first].server.quorum.manager.epoch
        others = [i for i in ports if i != first]
        write_deaf_to(dirs[first], set(others))
        for i in others:
            write_deaf_to(dirs[i], {first})
        [second] = until(lambda: [i for i in actives() if i != first] or None)
        until(lambda: first not in actives())  # resigned: no majority fetched from it
        assert controllers[second].server.quorum.manager.epoch > epoch
        assert register(ports[first], 7)["error_code"] == Errors.NOT_CONTROLLER
        reg = register(ports[second], 7)
        assert reg["error_code"] == 0

        for i in ports:
            write_deaf_to(dirs[i], set())
        new = controllers[second].server.quorum.manager
        until(
            lambda: (
                controllers[first].server.quorum.manager.leader_id == second
                and controllers[first].server.quorum.manager.epoch == new.epoch
            )
        )
        assert actives() == [second]

        # a controller deaf to broker 7 drops its requests (ids: one space for all nodes)
        write_deaf_to(dirs[second], {7})
        try:
            heartbeat(ports[second], 7, reg["broker_epoch"])
        except (AssertionError, OSError):
            pass
        else:
            raise AssertionError("a heartbeat through a cut link was answered")
        write_deaf_to(dirs[second], set())
        assert heartbeat(ports[second], 7, reg["broker_epoch"])["error_code"] == 0
    finally:
        for c in controllers.values():
            c.__exit__(None, None, None)
