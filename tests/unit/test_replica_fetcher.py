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


class SlowLeader(Leader):
    """A leader whose OffsetForLeaderEpoch answer `(epoch, end offset)` comes only
    once `answer` is set; it records every request, and holds fetches."""

    def __init__(self, end: tuple[int, int]) -> None:
        super().__init__()
        self.end = end
        self.answer = asyncio.Event()
        self.asked = asyncio.Event()

    async def request(self, api_key, version, body):
        if api_key != ApiKeys.OFFSET_FOR_LEADER_EPOCH:
            return await super().request(api_key, version, body)
        self.requests.append((api_key, body))
        self.asked.set()
        await self.answer.wait()
        epoch, end = self.end
        t = body["topics"][0]
        p = t["partitions"][0]
        return {
            "throttle_time_ms": 0,
            "topics": [
                {
                    "topic": t["topic"],
                    "partitions": [
                        {
                            "error_code": 0,
                            "partition": p["partition"],
                            "leader_epoch": epoch,
                            "end_offset": end,
                        }
                    ],
                }
            ],
        }


def test_an_answer_from_the_old_leader_after_the_leader_moved_is_not_used(tmp_path):
    """Kafka's fetcher drops an OffsetForLeaderEpoch answer for a partition whose
    leader epoch changed while it was out (AbstractFetcherThread.maybeTruncate). We
    follow broker 2 in epoch 1 and ask it; before it answers, the metadata moves the
    partition to broker 3 in epoch 2. Broker 2's late answer (epoch 0 ended at 2)
    must neither cut our log nor count as our truncation against broker 3, which
    says epoch 0 ended at 1: we cut at 1 and fetch from there."""

    async def run():
        rm = ReplicaManager(
            LogManager(tmp_path / "logs", LogConfig()), asyncio.get_running_loop().call_later, 1
        )
        tp = ("t", 0)
        part = rm.make_leader(tp, 0, [1, 2, 3], [1, 2, 3], 0)
        for _ in range(3):
            part.append_records_to_leader(
                build_batch([SimpleRecord(b"x")]), required_acks=1, min_insync_replicas=1
            )
        fetchers = ReplicaFetcherManager(
            1, rm, LinkFaults(tmp_path), lambda b: ("127.0.0.1", 1), EventLog(tmp_path, "b1")
        )
        old, new = SlowLeader((0, 2)), SlowLeader((0, 1))
        new.answer.set()
        fetchers._leader = {2: old, 3: new}.get
        fetchers.add(2, rm.make_follower(tp, 2, 1, [1, 2, 3], [1, 2, 3], 1))
        await asyncio.wait_for(old.asked.wait(), 30)
        # the metadata: broker 3 leads in epoch 2 (the listener's remove, make_follower, add)
        fetchers.remove(tp)
        follower = rm.make_follower(tp, 3, 2, [1, 2, 3], [1, 2, 3], 2)
        old.answer.set()  # broker 2's answer arrives in the same turn
        fetchers.add(3, follower)
        await asyncio.wait_for(new.fetched.wait(), 30)
        await fetchers.stop()
        rm.shutdown()
        return new, follower

    new, follower = asyncio.run(run())
    assert [k for k, _ in new.requests] == [ApiKeys.OFFSET_FOR_LEADER_EPOCH, ApiKeys.FETCH]
    assert follower.log.log_end_offset == 1
    fetch = new.requests[1][1]["topics"][0]["partitions"]
    assert [p["fetch_offset"] for p in fetch] == [1]
