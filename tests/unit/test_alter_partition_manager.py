"""AlterPartitionManager batches as Kafka's does: one request in flight, and every
ISR change proposed meanwhile goes in the next one."""

from __future__ import annotations

import asyncio

from kafkalab.errors import Errors
from kafkalab.replication.partition import IsrChange
from kafkalab.server.alter_partition_manager import AlterPartitionManager


class Controller:
    """Answers AlterPartition: every change accepted, but t-3 (stale epoch)."""

    def __init__(self) -> None:
        self.requests: list[dict] = []

    async def request(self, api_key, version, body):
        self.requests.append(body)
        await asyncio.sleep(0.01)
        topics = []
        for t in body["topics"]:
            parts = []
            for p in t["partitions"]:
                stale = p["partition_index"] == 3
                parts.append(
                    {
                        "partition_index": p["partition_index"],
                        "error_code": int(Errors.INVALID_UPDATE_VERSION) if stale else 0,
                        "leader_id": 1,
                        "leader_epoch": p["leader_epoch"],
                        "isr": p["new_isr"],
                        "partition_epoch": p["partition_epoch"] + 1,
                    }
                )
            topics.append({"topic_name": t["topic_name"], "partitions": parts})
        return {"throttle_time_ms": 0, "error_code": 0, "topics": topics}


class Partition:
    def __init__(self) -> None:
        self.rejected = False

    def reject_isr_change(self) -> None:
        self.rejected = True


class ReplicaManager:
    def __init__(self, n: int) -> None:
        self.partitions = {("t", p): Partition() for p in range(n)}
        self.applied: dict[tuple[str, int], list[int]] = {}

    def partition(self, tp):
        return self.partitions.get(tp)

    def note_changed(self, tp) -> None:
        pass

    def apply_isr_change(self, tp, isr, partition_epoch) -> bool:
        self.applied[tp] = isr
        return True


def test_proposals_made_together_go_in_one_request():
    async def run():
        controller, rm = Controller(), ReplicaManager(200)
        manager = AlterPartitionManager(1, controller, lambda: 7, rm)
        for p in range(100):
            manager.submit(IsrChange("t", p, 0, 0, [1, 2, 3]))
        await asyncio.sleep(0)  # the first request is in flight now
        for p in range(100, 200):
            manager.submit(IsrChange("t", p, 0, 0, [1, 2, 3]))
        await manager._sender
        return controller, rm

    controller, rm = asyncio.run(run())
    assert [sum(len(t["partitions"]) for t in r["topics"]) for r in controller.requests] == [
        100,
        100,
    ]
    assert all(r["broker_epoch"] == 7 for r in controller.requests)
    assert len(rm.applied) == 199 and ("t", 3) not in rm.applied
    assert rm.partitions[("t", 3)].rejected
