"""The GroupCoordinatorService on a real ReplicaManager and log: built complete, it
takes over the __consumer_offsets partition this broker led before it existed, and
its typed methods answer as the coordinator does, through the log."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kafkalab.coordinator.group import GroupConfig
from kafkalab.coordinator.group.classic_group_requests import (
    HeartbeatRequestData,
    LeaveGroupRequestData,
)
from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC
from kafkalab.coordinator.group.results import (
    CommitOffset,
    DeleteGroupsResult,
    HeartbeatResult,
    LeaveGroupResult,
    LeaveMemberResult,
    OffsetCommitResult,
    OffsetDeleteResult,
)
from kafkalab.errors import Errors
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.group_coordinator_service import GroupCoordinatorService
from kafkalab.server.metadata_cache import StandaloneMetadataCache
from kafkalab.storage import LogConfig, LogManager

CONFIG = GroupConfig(offsets_topic_num_partitions=1)
T0 = ("t", 0)


def test_typed_group_requests_through_the_log(tmp_path):
    async def scenario():
        loop = asyncio.get_running_loop()
        logs = LogManager(tmp_path, LogConfig(min_insync_replicas=1))
        logs.get_or_create_log(OFFSETS_TOPIC, 0)
        logs.get_or_create_log(*T0)
        rm = ReplicaManager(logs, loop.call_later, broker_id=1)
        metadata = StandaloneMetadataCache(SimpleNamespace(node_id=1), rm, lambda: ("h", 1))
        service = GroupCoordinatorService(CONFIG, rm, metadata)
        for _ in range(5):
            await asyncio.sleep(0)  # the led partition is loaded
        assert service.partition_for("g") == 0 and service.leader_of(0) == 1
        beat = await service.heartbeat(HeartbeatRequestData("g", 1, "m"))
        assert beat == HeartbeatResult(Errors.UNKNOWN_MEMBER_ID)
        left = await service.leave_group(LeaveGroupRequestData("g", (("m", None),)))
        assert left == LeaveGroupResult(
            Errors.NONE, (LeaveMemberResult("m", None, Errors.UNKNOWN_MEMBER_ID),)
        )
        # a simple (member-less) group's commit, then its offsets deleted, then the group
        commit = await service.commit_offsets("g", {T0: CommitOffset(5)})
        assert commit == OffsetCommitResult({T0: Errors.NONE})
        assert service.fetch_offsets("g", [T0]).partitions[T0].offset == 5
        assert [g.group_id for g in service.list_groups().groups] == ["g"]
        assert service.describe_group("g").state == "Empty"
        deleted = await service.delete_offsets("g", [T0])
        assert deleted == OffsetDeleteResult(Errors.NONE, {T0: Errors.NONE})
        assert service.fetch_offsets("g", [T0]).partitions[T0].offset == -1
        await service.commit_offsets("g", {T0: CommitOffset(6)})
        assert await service.delete_groups(["g"]) == DeleteGroupsResult({"g": Errors.NONE})
        await service.complete_transaction(0, 5000, True)  # nothing pending: answered
        with pytest.raises(TypeError, match="expected a HeartbeatResult"):
            await service.run(
                lambda now, request: service.coordinator.delete_groups(
                    ["x"], now_ms=now, request=request
                ),
                HeartbeatResult,
            )
        service.shutdown()
        logs.close()

    asyncio.run(scenario())
