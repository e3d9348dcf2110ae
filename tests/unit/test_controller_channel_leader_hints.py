"""A broker's channels to a controller quorum follow the leader the controllers name
(controller_channel.py: KnownLeader, ControllerChannel), against fake controllers on
real sockets that count the requests they get: a hint moves every channel of the
broker straight to the leader it names, round-robin happens only while no leader is
known, an older epoch's hint is ignored, a dead leader is forgotten and not asked
again once a hint named the next one, and a broker deaf to a controller throws its
answers away."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import CONTROLLER_APIS
from kafkalab.server.controller_channel import (
    QUORUM_METADATA_FETCH_VERSION,
    UNKNOWN_ID,
    ControllerChannel,
    ControllerEndpoint,
    KnownLeader,
    controller_endpoints,
    leader_hint,
    read_controller_state,
    write_controller_state,
)
from kafkalab.server.events import read_events
from kafkalab.server.inter_broker_connection import replica_fetch_request
from kafkalab.server.kafka_raft_manager import RAFT_CHANNEL_APIS
from kafkalab.server.socket_server import SocketServer

SCHEMAS = {**CONTROLLER_APIS, **RAFT_CHANNEL_APIS}
IDS = (3001, 3002, 3003)


class FakeQuorum:
    """Who leads, in which epoch, and what each controller believes (a standby may
    still name an old leader)."""

    def __init__(self) -> None:
        self.leader, self.epoch = -1, 0
        self.activated = True  # the leader has replayed its epoch's log: it serves
        self.views: dict[int, tuple[int, int]] = {}  # controller -> (leader, epoch) it names

    def elect(self, leader: int, epoch: int) -> None:
        self.leader, self.epoch = leader, epoch
        self.views = {c: (leader, epoch) for c in IDS}


class FakeController:
    """Answers a heartbeat and a metadata Fetch as an active controller or a standby
    of `quorum`; counts every request it got."""

    def __init__(self, node_id: int, quorum: FakeQuorum) -> None:
        self.node_id, self.quorum = node_id, quorum
        self.got: Counter[ApiKeys] = Counter()

    def handle(self, header, body):
        key = ApiKeys(header.api_key)
        self.got[key] += 1
        active = self.quorum.leader == self.node_id and self.quorum.activated
        leader, epoch = self.quorum.views.get(self.node_id, (-1, 0))
        if key == ApiKeys.BROKER_HEARTBEAT:
            code = 0 if active else int(Errors.NOT_CONTROLLER)
            return {
                "throttle_time_ms": 0,
                "error_code": code,
                "is_caught_up": active,
                "is_fenced": not active,
                "should_shut_down": False,
            }
        assert key == ApiKeys.FETCH
        code = 0 if active else int(Errors.NOT_LEADER_OR_FOLLOWER)
        part = {
            "partition_index": 0,
            "error_code": code,
            "high_watermark": 0,
            "last_stable_offset": -1,
            "log_start_offset": 0,
            "current_leader": {"leader_id": leader, "leader_epoch": epoch},
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            "records": b"",
        }
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "session_id": 0,
            "responses": [{"topic": "__cluster_metadata", "partitions": [part]}],
        }


async def _start(quorum: FakeQuorum) -> tuple[dict[int, FakeController], dict[int, SocketServer]]:
    fakes, servers = {}, {}
    for c in IDS:
        fakes[c] = FakeController(c, quorum)
        servers[c] = SocketServer(
            fakes[c],
            "127.0.0.1",
            0,
            max_request_bytes=1 << 20,
            queued_max_requests=10,
            num_handlers=1,
            schemas=SCHEMAS,
        )
        await servers[c].start()
    return fakes, servers


def _endpoints(servers, with_ids: bool = True) -> list[ControllerEndpoint]:
    return [
        ControllerEndpoint(c if with_ids else UNKNOWN_ID, "127.0.0.1", servers[c].bound_port)
        for c in IDS
    ]


async def _heartbeat(channel: ControllerChannel) -> dict:
    body = {
        "broker_id": 1,
        "broker_epoch": 5,
        "current_metadata_offset": 0,
        "want_fence": False,
        "want_shut_down": False,
    }
    return await channel.request(ApiKeys.BROKER_HEARTBEAT, 0, body)


async def _fetch(channel: ControllerChannel) -> dict:
    body = replica_fetch_request(1, [("__cluster_metadata", 0, 0, -1)], 0, 1)
    return await channel.request(ApiKeys.FETCH, QUORUM_METADATA_FETCH_VERSION, body)


async def _stop(servers) -> None:
    for s in servers.values():
        await s.stop(grace_s=0.2)


def _run(coro):
    return asyncio.run(coro)


def test_a_hint_moves_every_channel_of_the_broker_to_the_leader(tmp_path):
    async def go():
        quorum = FakeQuorum()
        quorum.elect(3003, 4)
        fakes, servers = await _start(quorum)
        try:
            from kafkalab.server.events import EventLog

            leader = KnownLeader(_endpoints(servers), EventLog(tmp_path, "broker-1"))
            fetches = ControllerChannel(_endpoints(servers), SCHEMAS, leader=leader)
            heartbeats = ControllerChannel(_endpoints(servers), SCHEMAS, leader=leader)
            # no leader known: the fetch goes to the first controller, a standby, which
            # names 3003; the channel goes straight there (not to 3002)
            response = await _fetch(fetches)
            assert response["responses"][0]["partitions"][0]["error_code"] == 0
            assert leader.node_id == 3003 and leader.epoch == 4
            assert fakes[3001].got[ApiKeys.FETCH] == 1
            assert fakes[3002].got == Counter()
            # the heartbeat channel never asked anyone: it goes to 3003 at once
            for _ in range(5):
                assert (await _heartbeat(heartbeats))["error_code"] == 0
            assert fakes[3003].got[ApiKeys.BROKER_HEARTBEAT] == 5
            assert fakes[3001].got[ApiKeys.BROKER_HEARTBEAT] == 0
            assert fakes[3002].got == Counter()
            assert leader.state()["sent"] == {"3001": 1, "3002": 0, "3003": 6}
            leader.events.close()
            events = [e for e in read_events(tmp_path) if e["event"] == "controller_leader"]
            assert [(e["controller"], e["how"], e["named_by"]) for e in events] == [
                ("3003", "hint", "3001")
            ]
        finally:
            await _stop(servers)

    _run(go())


def test_round_robin_only_while_no_leader_is_known():
    async def go():
        quorum = FakeQuorum()
        quorum.elect(3002, 1)
        fakes, servers = await _start(quorum)
        try:
            channel = ControllerChannel(_endpoints(servers), SCHEMAS)
            # a heartbeat's NOT_CONTROLLER names nobody: the next controller in turn
            assert (await _heartbeat(channel))["error_code"] == 0
            assert channel.leader.node_id == 3002
            assert [fakes[c].got[ApiKeys.BROKER_HEARTBEAT] for c in IDS] == [1, 1, 0]
            for _ in range(10):
                await _heartbeat(channel)
            assert [fakes[c].got[ApiKeys.BROKER_HEARTBEAT] for c in IDS] == [1, 11, 0]
            # the leader moves; 3002 says NOT_CONTROLLER without a name: forgotten,
            # the others are tried in turn from the one after it
            quorum.elect(3001, 2)
            quorum.views[3002] = (-1, 2)
            assert (await _heartbeat(channel))["error_code"] == 0
            assert channel.leader.node_id == 3001
            assert [fakes[c].got[ApiKeys.BROKER_HEARTBEAT] for c in IDS] == [2, 12, 1]
        finally:
            await _stop(servers)

    _run(go())


def test_an_elected_leader_not_active_yet_is_asked_again_not_left():
    async def go():
        quorum = FakeQuorum()
        quorum.elect(3002, 5)
        quorum.activated = False  # Raft's leader, replaying its epoch's log
        fakes, servers = await _start(quorum)
        try:
            channel = ControllerChannel(_endpoints(servers), SCHEMAS)
            # 3001 names 3002, which names itself but refuses: no controller serves
            part = (await _fetch(channel))["responses"][0]["partitions"][0]
            assert part["error_code"] == Errors.NOT_LEADER_OR_FOLLOWER
            assert (channel.leader.node_id, channel.leader.epoch) == (3002, 5)
            for _ in range(3):
                response = await _heartbeat(channel)
                assert response["error_code"] == Errors.NOT_CONTROLLER
                assert channel.leader.node_id == 3002  # not forgotten: asked again
            quorum.activated = True
            assert (await _heartbeat(channel))["error_code"] == 0
            assert [fakes[c].got[ApiKeys.BROKER_HEARTBEAT] for c in IDS] == [0, 4, 0]
            assert fakes[3003].got == Counter()  # never tried in turn
        finally:
            await _stop(servers)

    _run(go())


def test_a_hint_of_an_older_epoch_is_ignored():
    async def go():
        quorum = FakeQuorum()
        quorum.elect(3003, 7)
        fakes, servers = await _start(quorum)
        try:
            channel = ControllerChannel(_endpoints(servers), SCHEMAS)
            await _fetch(channel)
            assert (channel.leader.node_id, channel.leader.epoch) == (3003, 7)
            # a standby that has not heard of the election names the old leader
            channel.leader.hint(3001, 6, source=1)
            assert (channel.leader.node_id, channel.leader.epoch) == (3003, 7)
            # a newer epoch's hint moves it, and one with no leader forgets it
            channel.leader.hint(3002, 8, source=0)
            assert (channel.leader.node_id, channel.leader.epoch) == (3002, 8)
            channel.leader.hint(-1, 9, source=0)
            assert channel.leader.node_id is None and channel.leader.epoch == 9
        finally:
            await _stop(servers)

    _run(go())


def test_a_dead_leader_is_not_asked_again_once_a_hint_named_the_next():
    async def go():
        quorum = FakeQuorum()
        quorum.elect(3001, 3)
        fakes, servers = await _start(quorum)
        try:
            leader = KnownLeader(_endpoints(servers))
            fetches = ControllerChannel(_endpoints(servers), SCHEMAS, leader=leader)
            heartbeats = ControllerChannel(_endpoints(servers), SCHEMAS, leader=leader)
            await _fetch(fetches)
            await _heartbeat(heartbeats)
            assert leader.node_id == 3001
            await servers[3001].stop(grace_s=0.1)  # the leader dies
            # the standbys still believe it leads, in epoch 3: nothing answers as
            # the active controller until the election
            assert (await _heartbeat(heartbeats))["error_code"] == Errors.NOT_CONTROLLER
            quorum.elect(3003, 4)
            await _fetch(fetches)  # 3002 or 3003 names 3003 in epoch 4
            assert (leader.node_id, leader.epoch) == (3003, 4)
            dead = leader.sent[0]
            for _ in range(5):
                assert (await _heartbeat(heartbeats))["error_code"] == 0
                assert (await _fetch(fetches))["responses"][0]["partitions"][0]["error_code"] == 0
            assert leader.sent[0] == dead  # 3001 never asked again
            assert fakes[3003].got[ApiKeys.BROKER_HEARTBEAT] >= 5
        finally:
            await _stop({c: s for c, s in servers.items() if c != 3001})

    _run(go())


def test_bootstrap_servers_only_find_the_active_controller_by_asking():
    async def go():
        quorum = FakeQuorum()
        quorum.elect(3003, 2)
        fakes, servers = await _start(quorum)
        try:
            channel = ControllerChannel(_endpoints(servers, with_ids=False), SCHEMAS)
            assert (await _fetch(channel))["responses"][0]["partitions"][0]["error_code"] == 0
            assert channel.leader.index == 2  # the hint's id was not placeable; the answer was
            for _ in range(4):
                await _heartbeat(channel)
            assert fakes[3003].got[ApiKeys.BROKER_HEARTBEAT] == 4
            assert fakes[3001].got[ApiKeys.BROKER_HEARTBEAT] == 0
        finally:
            await _stop(servers)

    _run(go())


def test_a_broker_deaf_to_a_controller_throws_its_answers_away():
    async def go():
        quorum = FakeQuorum()
        quorum.elect(3001, 1)
        fakes, servers = await _start(quorum)
        try:
            deaf_to = {3001}
            channel = ControllerChannel(
                _endpoints(servers), SCHEMAS, hears=lambda node: node not in deaf_to
            )
            # the heartbeat reaches 3001 (it counts it) but its answer is thrown
            # away; the standbys say NOT_CONTROLLER: no answer as the active one
            response = await _heartbeat(channel)
            assert response["error_code"] == Errors.NOT_CONTROLLER
            assert fakes[3001].got[ApiKeys.BROKER_HEARTBEAT] == 1
            assert channel.leader.node_id is None
            deaf_to.clear()  # healed
            assert (await _heartbeat(channel))["error_code"] == 0
            assert channel.leader.node_id == 3001
        finally:
            await _stop(servers)

    _run(go())


def test_where_a_broker_finds_its_controllers(tmp_path):
    voters = controller_endpoints(
        {
            "controller.quorum.voters": "3001@127.0.0.1:9001,3002@127.0.0.1:9002",
            "controller.quorum.bootstrap.servers": "127.0.0.1:9001,127.0.0.1:9002",
        }
    )
    assert voters == [
        ControllerEndpoint(3001, "127.0.0.1", 9001),
        ControllerEndpoint(3002, "127.0.0.1", 9002),
    ]
    servers = controller_endpoints({"controller.quorum.bootstrap.servers": "h:1,h:2"})
    assert servers == [
        ControllerEndpoint(UNKNOWN_ID, "h", 1),
        ControllerEndpoint(UNKNOWN_ID, "h", 2),
    ]
    with pytest.raises(ValueError):
        controller_endpoints({"controller.quorum.voters": "h:1"})
    assert read_controller_state(tmp_path) is None
    write_controller_state(tmp_path, {"leader": "3002", "epoch": 3})
    assert read_controller_state(tmp_path) == {"leader": "3002", "epoch": 3}


def test_current_leader_travels_in_fetch_v12_and_not_v11():
    api = RAFT_CHANNEL_APIS[ApiKeys.FETCH]
    part = {
        "partition_index": 0,
        "error_code": int(Errors.NOT_LEADER_OR_FOLLOWER),
        "high_watermark": -1,
        "current_leader": {"leader_id": 3002, "leader_epoch": 5},
        "records": b"",
    }
    body = {"responses": [{"topic": "__cluster_metadata", "partitions": [part]}]}
    for version, hint in ((12, (3002, 5)), (11, None)):
        decoded = api.response.decode(bytes(api.response.encode(body, version).buf), version)
        assert leader_hint(ApiKeys.FETCH, decoded) == hint
