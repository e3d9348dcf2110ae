"""kafkalab's link faults in their two kinds of failure (kafkalab.server.link_faults)
on one broker, over real sockets: a refused cut closes the connection at once, a
dropped one reads the request and never answers, the connection left open until
the sender gives up; a broker deaf to clients (all, or by client.id prefix) in
both modes, while brokers still hear it; and a sender with a request timeout
(InterBrokerConnection) gives up on a dropped request with REQUEST_TIMED_OUT."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from pathlib import Path

import pytest

from kafkalab.errors import Errors, KafkaError, UnknownKindError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import RequestHeader, encode_request
from kafkalab.protocol.messages import APIS, CONTROLLER_APIS
from kafkalab.server.broker import BrokerThread
from kafkalab.server.inter_broker_connection import InterBrokerConnection, replica_fetch_request
from kafkalab.server.link_faults import (
    CutMode,
    cut,
    heal,
    isolate_clients,
    read_clients_cut,
    read_cuts,
)

pytestmark = pytest.mark.timeout(120)
METADATA = {"topics": [], "allow_auto_topic_creation": False}
ANSWERED, CLOSED, SILENT = "answered", "closed", "silent"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerThread(
        {
            "log.dirs": str(tmp_path_factory.mktemp("modes")),
            "listeners": "PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:0",
            "inter.broker.listener.name": "BROKER",
        }
    ).start()
    yield b
    heal(Path(b.config.log_dirs[0]))
    b.stop()


def port(broker: BrokerThread, listener: str) -> int:
    return broker.broker.advertised_endpoints[listener][1]


def seen(broker: BrokerThread, predicate, timeout_s: float = 30) -> None:
    """Wait until the broker's own view of its link faults satisfies `predicate`."""
    deadline = time.monotonic() + timeout_s
    while not predicate(broker.broker.link_faults):
        assert time.monotonic() < deadline, "the broker did not re-read link-faults.json"
        time.sleep(0.05)


class Peer:
    """A raw socket to the broker: what became of each request it sends."""

    def __init__(self, port: int, client_id: str, schemas=APIS) -> None:
        self.schemas = schemas
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.client_id = client_id
        self.cid = 0

    def ask(self, api_key: ApiKeys, version: int, body: dict, wait_s: float = 1.0) -> str:
        self.cid += 1
        header = RequestHeader(api_key, version, self.cid, self.client_id)
        self.sock.sendall(encode_request(header, body, self.schemas))
        self.sock.settimeout(wait_s)
        try:
            prefix = self.sock.recv(4)
        except TimeoutError:
            return SILENT
        except ConnectionError:
            return CLOSED
        if not prefix:
            return CLOSED
        (size,) = struct.unpack(">i", prefix)
        self.sock.settimeout(10)
        while size:
            size -= len(self.sock.recv(size))
        return ANSWERED

    def close(self) -> None:
        self.sock.close()


def test_a_cut_remembers_its_mode_and_heal_forgets_every_cut(tmp_path):
    cut(tmp_path, {2, 3}, CutMode.DROP)
    cut(tmp_path, {3}, "refuse")  # a cut again takes the new mode
    cut(tmp_path, {4}, "drop")
    assert read_cuts(tmp_path) == {2: CutMode.DROP, 3: CutMode.REFUSE, 4: CutMode.DROP}
    isolate_clients(tmp_path, "drop", "p1-")
    assert read_clients_cut(tmp_path) == {"mode": "drop", "client_id_prefix": "p1-"}
    heal(tmp_path)
    assert read_cuts(tmp_path) == {} and read_clients_cut(tmp_path) is None
    with pytest.raises(UnknownKindError, match="cut mode"):
        cut(tmp_path, {2}, "lose")


@pytest.mark.parametrize("mode", [CutMode.REFUSE, CutMode.DROP])
def test_a_broker_deaf_to_clients_refuses_or_drops_them_and_still_hears_brokers(broker, mode):
    log_dir = Path(broker.config.log_dirs[0])
    client, other, follower = (
        Peer(port(broker, "PLAINTEXT"), "p1-producer"),
        Peer(port(broker, "PLAINTEXT"), "p2-producer"),
        Peer(port(broker, "BROKER"), "broker-7-epoch-1"),
    )
    try:
        assert client.ask(ApiKeys.METADATA, 9, METADATA) == ANSWERED
        isolate_clients(log_dir, mode, client_id_prefix="p1-")
        expected = CLOSED if mode == CutMode.REFUSE else SILENT
        assert client.ask(ApiKeys.METADATA, 9, METADATA) == expected
        assert other.ask(ApiKeys.METADATA, 9, METADATA) == ANSWERED  # another prefix
        assert follower.ask(ApiKeys.METADATA, 9, METADATA) == ANSWERED  # a broker
        heal(log_dir)
        if mode == CutMode.DROP:
            # a dropped request is lost, not delayed: its connection stays silent
            assert client.ask(ApiKeys.METADATA, 9, METADATA, wait_s=0.5) == SILENT
        again = Peer(port(broker, "PLAINTEXT"), "p1-producer")
        try:
            assert again.ask(ApiKeys.METADATA, 9, METADATA) == ANSWERED
        finally:
            again.close()
    finally:
        heal(log_dir)
        for p in (client, other, follower):
            p.close()


def test_every_client_is_cut_without_a_prefix(broker):
    log_dir = Path(broker.config.log_dirs[0])
    isolate_clients(log_dir, CutMode.REFUSE)
    peer = Peer(port(broker, "PLAINTEXT"), "anyone")
    try:
        assert peer.ask(ApiKeys.METADATA, 9, METADATA) == CLOSED
    finally:
        heal(log_dir)
        peer.close()


@pytest.mark.parametrize("mode", [CutMode.REFUSE, CutMode.DROP])
def test_a_follower_fetch_over_a_cut_link_is_refused_or_dropped(broker, mode):
    log_dir = Path(broker.config.log_dirs[0])
    cut(log_dir, {7}, mode)
    seen(broker, lambda f: f.mode(7) == mode)  # the broker re-reads the file every so often
    follower = Peer(port(broker, "BROKER"), "broker-7-epoch-1")
    body = replica_fetch_request(7, [], max_wait_ms=0, min_bytes=0)
    try:
        expected = CLOSED if mode == CutMode.REFUSE else SILENT
        assert follower.ask(ApiKeys.FETCH, 11, body) == expected
    finally:
        heal(log_dir)
        follower.close()


def test_a_sender_gives_up_on_a_dropped_request_after_its_request_timeout(broker):
    """InterBrokerConnection (a follower's, a voter's) with a request timeout: a
    dropped request raises REQUEST_TIMED_OUT and closes the connection; the next
    request opens a new one, answered once the link heals."""
    log_dir = Path(broker.config.log_dirs[0])
    body = replica_fetch_request(7, [], max_wait_ms=0, min_bytes=0)

    async def run() -> tuple[KafkaError, dict]:
        conn = InterBrokerConnection(
            "127.0.0.1", port(broker, "BROKER"), APIS, lambda: "broker-7-epoch-1", 500
        )
        try:
            with pytest.raises(KafkaError) as timed_out:
                await conn.request(ApiKeys.FETCH, 11, body)
            heal(log_dir)
            while not broker.broker.link_faults.hears(7):
                await asyncio.sleep(0.05)
            return timed_out.value, await conn.request(ApiKeys.FETCH, 11, body)
        finally:
            conn.close()

    cut(log_dir, {7}, CutMode.DROP)
    seen(broker, lambda f: f.mode(7) == CutMode.DROP)
    try:
        error, answer = asyncio.run(run())
    finally:
        heal(log_dir)
    assert error.code == Errors.REQUEST_TIMED_OUT
    assert "responses" in answer  # answered, on a new connection


def test_voters_cut_by_dropped_links_elect_another_leader_and_reunite_after_the_heal(tmp_path):
    """Raft traffic over dropped links: the active controller, deaf (drop) to both
    other voters and they to it, resigns; the two elect one of themselves. Their
    requests to it are never answered, so each is given up on at the quorum's
    request timeout (a connection held by a dropped request would keep the voters
    apart after the heal). Healed, all three follow one leader in one epoch. A
    broker's request to a controller deaf to it is refused, in drop mode too."""
    from test_controller_quorum import register, until, voter_configs

    from kafkalab.server.controller_server import ControllerThread

    ports, dirs, configs = voter_configs(tmp_path)
    controllers = {i: ControllerThread(configs[i]).__enter__() for i in ports}
    try:

        def actives() -> list[int]:
            return [i for i, c in controllers.items() if c.server.quorum.active]

        def manager(i: int):
            return controllers[i].server.quorum.manager

        [first] = until(lambda: actives() if len(actives()) == 1 else None)
        epoch = manager(first).epoch
        others = [i for i in ports if i != first]
        cut(dirs[first], set(others), CutMode.DROP)
        for i in others:
            cut(dirs[i], {first}, CutMode.DROP)
        [second] = until(lambda: [i for i in actives() if i != first] or None)
        until(lambda: first not in actives())
        assert manager(second).epoch > epoch

        reg = register(ports[second], 7)
        assert reg["error_code"] == 0
        cut(dirs[second], {7}, CutMode.DROP)
        until(lambda: manager(second).link_faults.mode(7) == CutMode.DROP)
        body = {
            "broker_id": 7,
            "broker_epoch": reg["broker_epoch"],
            "current_metadata_offset": 0,
            "want_fence": False,
            "want_shut_down": False,
        }
        broker = Peer(ports[second], "broker-7", CONTROLLER_APIS)
        try:
            # refused even in drop mode: a broker's controller channel has no
            # request timeout yet (link_faults.py)
            assert broker.ask(ApiKeys.BROKER_HEARTBEAT, 0, body) == CLOSED
        finally:
            broker.close()

        for i in ports:
            heal(dirs[i])
        until(
            lambda: (
                all(
                    manager(i).leader_id == manager(second).leader_id
                    and manager(i).epoch == manager(second).epoch
                    for i in ports
                )
                and len(actives()) == 1
            )
        )
        leader = manager(second).leader_id
        # every voter's log caught up with the leader's after the heal
        until(lambda: len({manager(i).log.end_offset for i in ports}) == 1)
        assert leader in ports
    finally:
        for c in controllers.values():
            c.__exit__(None, None, None)
