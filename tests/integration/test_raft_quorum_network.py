"""Three KRaft voters on real sockets (KafkaRaftManager over kafkalab's listener and
inter-broker connections, logs on disk): they elect a leader, replicate and commit,
answer DescribeQuorum as Kafka does, elect a new leader in a higher epoch when the
leader is gone, and the old leader, restarted from its directory, rejoins as a
follower with the same log."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.raft.kafka_metadata_log import METADATA_LOG_DIR
from kafkalab.raft.kafka_raft_client import LeaderChangeMessage
from kafkalab.raft.quorum_config import QuorumConfig
from kafkalab.raft.quorum_state_store import QUORUM_STATE_FILE
from kafkalab.raft.raft_wire import METADATA_TOPIC, describe_quorum_from_body
from kafkalab.server.inter_broker_connection import InterBrokerConnection
from kafkalab.server.kafka_raft_manager import (
    RAFT_CHANNEL_APIS,
    KafkaRaftManager,
    RaftApis,
    format_quorum_voters,
    parse_quorum_voters,
)
from kafkalab.server.socket_server import SocketServer

CONFIG = QuorumConfig(election_timeout_ms=300, fetch_timeout_ms=600, request_timeout_ms=400)


def test_controller_quorum_voters_parse_and_format():
    voters = parse_quorum_voters("1@localhost:9093, 2@127.0.0.1:9094,3@[::1]:9095")
    assert voters == {1: ("localhost", 9093), 2: ("127.0.0.1", 9094), 3: ("::1", 9095)}
    assert parse_quorum_voters(format_quorum_voters(voters)) == voters


class Voter:
    def __init__(self, node_id: int, directory: Path, server: SocketServer) -> None:
        self.node_id, self.directory, self.server = node_id, directory, server
        self.manager: KafkaRaftManager | None = None

    async def start(self, voters: dict[int, tuple[str, int]]) -> None:
        self.manager = KafkaRaftManager(self.node_id, voters, self.directory, CONFIG)
        self.server.apis = RaftApis(self.manager)
        await self.manager.start()

    async def stop(self) -> None:
        assert self.manager is not None
        await self.server.stop(grace_s=0.5)
        await self.manager.stop()


async def _listener(port: int = 0) -> SocketServer:
    server = SocketServer(
        None,
        "127.0.0.1",
        port,
        max_request_bytes=1 << 24,
        queued_max_requests=100,
        num_handlers=1,
        schemas=RAFT_CHANNEL_APIS,
    )
    await server.start()
    return server


async def _until(predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout_s} s")
        await asyncio.sleep(0.02)


def _leader(voters: list[Voter]) -> KafkaRaftManager | None:
    managers = [v.manager for v in voters if v.manager is not None and v.manager.is_leader()]
    return max(managers, key=lambda m: m.epoch) if managers else None


def _stable(voters: list[Voter]) -> bool:
    leader = _leader(voters)
    return leader is not None and all(
        v.manager.leader_id == leader.node_id and v.manager.epoch == leader.epoch
        for v in voters
        if v.manager is not None
    )


async def _describe(port: int) -> dict:
    conn = InterBrokerConnection("127.0.0.1", port, RAFT_CHANNEL_APIS)
    try:
        body = {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]}
        return await conn.request(ApiKeys.DESCRIBE_QUORUM, 2, body)
    finally:
        conn.close()


#: A metadata record (Kafka's binary format on the wire and on disk) and a plain value.
A_ID, B_ID = "8a1f7a3e-5d0c-4c52-9b1e-2f9c1d6e7a01", "8a1f7a3e-5d0c-4c52-9b1e-2f9c1d6e7a02"


async def _scenario(root: Path) -> None:
    servers = [await _listener() for _ in range(3)]
    voters = [Voter(i + 1, root / f"controller-{i + 1}", s) for i, s in enumerate(servers)]
    addresses = {v.node_id: ("127.0.0.1", v.server.bound_port) for v in voters}
    try:
        for v in voters:
            await v.start(addresses)
        await _until(lambda: _stable(voters))
        leader = _leader(voters)
        assert leader is not None
        first_epoch = leader.epoch
        offset = leader.append([{"type": "TopicRecord", "name": "a", "topic_id": A_ID}, {"n": 2}])
        await leader.wait_for_commit(offset)
        await _until(lambda: all(v.manager.high_watermark > offset for v in voters))
        logs = {v.node_id: v.manager.log.entries for v in voters}
        assert logs[1] == logs[2] == logs[3], logs
        assert isinstance(logs[1][0].record, LeaderChangeMessage)

        # DescribeQuorum on the wire: the leader answers with every voter's offsets
        answer = describe_quorum_from_body(await _describe(addresses[leader.node_id][1]))
        assert (answer.error_code, answer.leader_id, answer.leader_epoch) == (
            Errors.NONE,
            leader.node_id,
            first_epoch,
        )
        assert answer.high_watermark == offset + 1
        assert sorted(r.replica_id for r in answer.current_voters) == [1, 2, 3]
        assert all(r.log_end_offset == offset + 1 for r in answer.current_voters)
        follower = next(v for v in voters if v.node_id != leader.node_id)
        other = describe_quorum_from_body(await _describe(follower.server.bound_port))
        assert other.error_code == Errors.NOT_LEADER_OR_FOLLOWER
        assert other.leader_id == leader.node_id

        # the leader is gone: the others elect one of themselves in a higher epoch
        gone = next(v for v in voters if v.node_id == leader.node_id)
        await gone.stop()
        rest = [v for v in voters if v is not gone]
        await _until(lambda: _stable(rest))
        new = _leader(rest)
        assert new is not None and new.node_id != gone.node_id and new.epoch > first_epoch
        offset = new.append([{"type": "TopicRecord", "name": "b", "topic_id": B_ID}])
        await new.wait_for_commit(offset)

        # the old leader restarts from its directory and follows, with the same log
        assert (root / f"controller-{gone.node_id}" / METADATA_LOG_DIR / QUORUM_STATE_FILE).exists()
        gone.server = await _listener(addresses[gone.node_id][1])
        await gone.start(addresses)
        assert gone.manager.epoch >= first_epoch  # quorum-state read back
        await _until(lambda: _stable(voters) and gone.manager.high_watermark > offset)
        assert gone.manager.log.entries == new.log.entries
        assert gone.manager.leader_id == new.node_id
    finally:
        for v in voters:
            if v.manager is not None and not v.manager._closed:
                await v.stop()


def test_three_voters_elect_replicate_fail_over_and_rejoin_on_sockets(tmp_path):
    asyncio.run(_scenario(tmp_path))
