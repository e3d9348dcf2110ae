"""KIP-630 on real sockets: three KRaft voters (KafkaRaftManager behind kafkalab's
listener, logs on disk); one is stopped, the leader snapshots and drops the segments
below the snapshot, and the stopped voter, restarted from its directory, is answered
a SnapshotId and catches up by FetchSnapshot (in chunks, Kafka's request bodies),
then fetches on."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from test_raft_quorum_network import CONFIG, Voter, _leader, _listener, _stable, _until

from kafkalab.raft.kafka_metadata_log import METADATA_LOG_DIR
from kafkalab.raft.snapshot import decode_snapshot, snapshot_filename
from kafkalab.server.kafka_raft_manager import KafkaRaftManager, RaftApis

#: Three voters share this test's one event loop, which the leader's small segments
#: (a roll and an fsync every few records) can hold past CONFIG's 600 ms fetch
#: timeout on a loaded machine: the leader then resigns by check-quorum, as Raft
#: should, and the test would wait for a commit that cannot come. No voter dies
#: here but the stopped one, so a longer fetch timeout changes nothing else.
SNAPSHOT_CONFIG = replace(CONFIG, fetch_snapshot_max_bytes=256, fetch_timeout_ms=5000)
SEGMENT_BYTES = 1024


class SnapshotVoter(Voter):
    async def start(self, voters: dict[int, tuple[str, int]]) -> None:
        self.manager = KafkaRaftManager(
            self.node_id, voters, self.directory, SNAPSHOT_CONFIG, segment_bytes=SEGMENT_BYTES
        )
        self.server.apis = RaftApis(self.manager)
        await self.manager.start()


async def _scenario(root: Path) -> None:
    servers = [await _listener() for _ in range(3)]
    voters = [SnapshotVoter(i + 1, root / f"controller-{i + 1}", s) for i, s in enumerate(servers)]
    addresses = {v.node_id: ("127.0.0.1", v.server.bound_port) for v in voters}
    try:
        for v in voters:
            await v.start(addresses)
        await _until(lambda: _stable(voters))
        leader = _leader(voters)
        assert leader is not None
        offset = leader.append([{"n": i} for i in range(5)])
        await leader.wait_for_commit(offset)
        gone = next(v for v in voters if v.node_id != leader.node_id)
        await _until(lambda: gone.manager.high_watermark > offset)
        stale_end = gone.manager.log.end_offset
        await gone.stop()

        for i in range(40):  # one batch a record: many segments
            offset = leader.append([{"topic": f"t{i}", "pad": "x" * 40}])
        await leader.wait_for_commit(offset)
        state = [{"topics": [f"t{i}" for i in range(40)], "pad": "y" * 2000}]
        sid = leader.create_snapshot(leader.high_watermark, state)
        assert leader.log.log_start_offset == sid.offset > stale_end
        leader_dir = root / f"controller-{leader.node_id}" / METADATA_LOG_DIR
        assert min(int(p.stem) for p in leader_dir.glob("*.log")) > 0  # segments went
        size = len(leader.log.read_snapshot(sid))
        assert size > 4 * SNAPSHOT_CONFIG.fetch_snapshot_max_bytes
        served: list[int] = []
        handler = leader.client.handle_fetch_snapshot_request

        def counting(req, now_ms):
            served.append(req.position)
            return handler(req, now_ms)

        leader.client.handle_fetch_snapshot_request = counting  # type: ignore[method-assign]
        offset = leader.append([{"after": "snapshot"}])
        await leader.wait_for_commit(offset)

        gone.server = await _listener(addresses[gone.node_id][1])
        await gone.start(addresses)
        back = gone.manager
        await _until(lambda: back.log.end_offset == leader.log.end_offset and _stable(voters))
        assert back.client.snapshots_installed == 1
        assert len(served) >= 5 and served == sorted(served)  # chunk after chunk, in order
        path = root / f"controller-{gone.node_id}" / METADATA_LOG_DIR / snapshot_filename(sid)
        assert path.read_bytes() == leader.log.read_snapshot(sid)
        assert decode_snapshot(path.read_bytes()).records == tuple(state)
        assert back.log.log_start_offset == sid.offset
        assert back.log.entries == leader.log.entries
        await _until(lambda: back.high_watermark == leader.high_watermark)
    finally:
        for v in voters:
            if v.manager is not None and not v.manager._closed:
                await v.stop()


def test_a_stopped_voter_catches_up_by_fetch_snapshot_on_sockets(tmp_path):
    asyncio.run(_scenario(tmp_path))
