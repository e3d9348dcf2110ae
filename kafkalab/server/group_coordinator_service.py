"""GroupCoordinatorService: the group coordinator as the API modules see it.

Kafka's class: org.apache.kafka.coordinator.group.GroupCoordinatorService, which
KafkaApis calls for every group API and which runs each call on the
CoordinatorRuntime of __consumer_offsets. Here: the sans-IO GroupCoordinator,
its CoordinatorRuntime (offsets.topic.* settings; the cluster's topics handed to
it for KIP-848, `sync_topic_metadata`), built complete in one constructor, and
typed methods that each run one coordinator call as one request.

The group API modules (apis/group.py, apis/consumer_group.py) still reach the
coordinator through `call(fn, ...)` and `coordinator`; they move onto typed
methods like `complete_transaction`, `heartbeat` or `delete_groups` below (and
`run(operation, ResultType)` for any other call) as the group coordinator's
request shapes settle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC
from kafkalab.coordinator.group.group_config import GroupConfig
from kafkalab.coordinator.group.group_coordinator import GroupCoordinator
from kafkalab.coordinator.group.results import (
    DeleteGroupsResult,
    DescribedGroup,
    Effects,
    HeartbeatResult,
    LeaveGroupResult,
    ListGroupsResult,
    OffsetDeleteResult,
    OffsetFetchResult,
)
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.coordinator_runtime import (
    CoordinatorRuntime,
    Operation,
    ResultT,
    StateTopic,
)
from kafkalab.server.metadata_cache import MetadataCache

TopicPartition = tuple[str, int]


class GroupCoordinatorService:
    def __init__(
        self,
        config: GroupConfig,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        *,
        append_timeout_ms: int = 5000,
    ) -> None:
        self.coordinator = GroupCoordinator(config, partitions=())
        topic = StateTopic(
            OFFSETS_TOPIC,
            config.offsets_topic_num_partitions,
            config.offsets_topic_replication_factor,
            append_timeout_ms=append_timeout_ms,
        )
        self.runtime = CoordinatorRuntime(
            self.coordinator,
            topic,
            replica_manager,
            metadata_cache,
            topic_metadata=self.coordinator.update_topic_metadata,
        )

    def shutdown(self) -> None:
        self.runtime.shutdown()

    # -- FindCoordinator, KIP-848 metadata ------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return self.coordinator.partition_for(group_id)

    def leader_of(self, partition: int) -> int:
        """The broker leading __consumer_offsets-<partition> (-1: none yet; the topic
        is created on first use)."""
        return self.runtime.leader_of(partition)

    def sync_topic_metadata(self) -> None:
        self.runtime.sync_topic_metadata()

    # -- running calls --------------------------------------------------------------------------

    async def run(self, operation: Operation, result_type: type[ResultT]) -> ResultT:
        """One coordinator call as one request: `operation(now_ms, request)`."""
        return await self.runtime.run(operation, result_type)

    async def call(self, fn: Callable[..., Effects], *args: object, **kwargs: object) -> object:
        """`fn(*args, now_ms=..., request=..., **kwargs)` as one request: the untyped
        way the group API modules still use (see the module's doc); the typed
        methods below and `run` are the way on."""
        return await self.run(
            lambda now, request: fn(*args, now_ms=now, request=request, **kwargs), object
        )

    # -- typed requests -------------------------------------------------------------------------

    async def heartbeat(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None = None,
    ) -> HeartbeatResult:
        c = self.coordinator
        return await self.run(
            lambda now, request: c.heartbeat(
                group_id,
                generation_id,
                member_id,
                group_instance_id=group_instance_id,
                now_ms=now,
                request=request,
            ),
            HeartbeatResult,
        )

    async def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> LeaveGroupResult:
        c = self.coordinator
        return await self.run(
            lambda now, request: c.leave_group(group_id, members, now_ms=now, request=request),
            LeaveGroupResult,
        )

    async def delete_groups(self, group_ids: list[str]) -> DeleteGroupsResult:
        c = self.coordinator
        return await self.run(
            lambda now, request: c.delete_groups(group_ids, now_ms=now, request=request),
            DeleteGroupsResult,
        )

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> OffsetDeleteResult:
        c = self.coordinator
        return await self.run(
            lambda now, request: c.delete_offsets(
                group_id, partitions, now_ms=now, request=request
            ),
            OffsetDeleteResult,
        )

    async def complete_transaction(self, partition: int, producer_id: int, committed: bool) -> None:
        """WriteTxnMarkers wrote `producer_id`'s marker into __consumer_offsets-<partition>:
        its pending transactional offsets there count (committed) or are dropped."""
        c = self.coordinator
        await self.run(
            lambda now, request: c.complete_transaction(
                partition, producer_id, committed, now_ms=now, request=request
            ),
            object,  # answered with None once the offsets are written
        )

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition] | None,
        *,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> OffsetFetchResult:
        return self.coordinator.fetch_offsets(
            group_id,
            partitions,
            require_stable=require_stable,
            member_id=member_id,
            member_epoch=member_epoch,
        )

    def describe_group(self, group_id: str) -> DescribedGroup:
        return self.coordinator.describe_group(group_id)

    def list_groups(self, states: Iterable[str] | None = None) -> ListGroupsResult:
        return self.coordinator.list_groups(states)
