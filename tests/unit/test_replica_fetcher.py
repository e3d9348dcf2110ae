"""ReplicaFetcherManager after a leadership change of many partitions: each fetcher
restarts once, and the partitions' truncation asks the leader in one
OffsetForLeaderEpoch request a round, not one request a partition."""

from __future__ import annotations

import asyncio

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.events import EventLog
from kafkalab.server.link_faults import LinkFaults
from kafkalab.server.replica_fetcher import ReplicaFetcherManager
from kafkalab.storage import LogConfig, LogManager

N = 30


class Leader:
    """Broker 2, leading every partition: epoch 0 ended at offset 2 (we have 3)."""

    def __init__(self) -> None:
        self.requests: list[tuple[ApiKeys, dict]] = []
        self.fetched = asyncio.Event()

    async def request(self, api_key, version, body):
        self.requests.append((api_key, body))
        if api_key == ApiKeys.OFFSET_FOR_LEADER_EPOCH:
            return {
                "throttle_time_ms": 0,
                "topics": [
                    {
                        "topic": t["topic"],
                        "partitions": [
                            {
                                "error_code": 0,
                                "partition": p["partition"],
                                "leader_epoch": 0,
                                "end_offset": 2,
                            }
                            for p in t["partitions"]
                        ],
                    }
                    for t in body["topics"]
                ],
            }
        self.fetched.set()
        await asyncio.sleep(3600)  # a long poll that never answers

    def close(self) -> None:
        pass


def test_many_new_followers_truncate_in_one_request_and_fetch_together(tmp_path):
    async def run():
        rm = ReplicaManager(
            LogManager(tmp_path / "logs", LogConfig()), asyncio.get_running_loop().call_later, 1
        )
        followers = []
        for p in range(N):
            tp = ("t", p)
            part = rm.make_leader(tp, 0, [1, 2], [1, 2], 0)
            for _ in range(3):
                part.append_records_to_leader(
                    build_batch([SimpleRecord(b"x")]), required_acks=1, min_insync_replicas=1
                )
            followers.append(rm.make_follower(tp, 2, 1, [1, 2], [1, 2], 1))
        fetchers = ReplicaFetcherManager(
            1, rm, LinkFaults(tmp_path), lambda b: ("127.0.0.1", 1), EventLog(tmp_path, "b1")
        )
        leader = Leader()
        fetchers._leader = lambda broker_id: leader
        for f in followers:
            fetchers.add(2, f)
        await asyncio.wait_for(leader.fetched.wait(), 30)
        await fetchers.stop()
        rm.shutdown()
        return leader, followers

    leader, followers = asyncio.run(run())
    kinds = [k for k, _ in leader.requests]
    assert kinds == [ApiKeys.OFFSET_FOR_LEADER_EPOCH, ApiKeys.FETCH]
    asked = leader.requests[0][1]["topics"][0]["partitions"]
    assert sorted(p["partition"] for p in asked) == list(range(N))
    assert [f.log.log_end_offset for f in followers] == [2] * N  # cut where epoch 0 ended
    fetch = leader.requests[1][1]["topics"][0]["partitions"]
    assert [p["fetch_offset"] for p in fetch] == [2] * N
