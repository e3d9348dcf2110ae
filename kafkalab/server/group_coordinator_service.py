"""GroupCoordinatorService: the group coordinator as the API modules see it.

Kafka's class: org.apache.kafka.coordinator.group.GroupCoordinatorService, which
KafkaApis calls for every group API and which runs each call on the
CoordinatorRuntime of __consumer_offsets. Here: the sans-IO GroupCoordinator,
its CoordinatorRuntime (offsets.topic.* settings; the cluster's topics handed to
it for KIP-848, `sync_topic_metadata`), built complete in one constructor, and
typed methods that each run one coordinator call as one request.

The group API modules (apis/group.py, apis/consumer_group.py) call only these
methods: one per request, with the request's data as one frozen dataclass the API
module builds once and passes through as it is (the classic protocol's
JoinGroup/SyncGroup/Heartbeat/LeaveGroup, KIP-848's ConsumerGroupHeartbeat), or
the request's fields as typed parameters for the others, and the coordinator's
typed result back (`run(operation, ResultType)` underneath).
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkalab.coordinator.group.classic_group_requests import (
    HeartbeatRequestData,
    JoinGroupRequestData,
    LeaveGroupRequestData,
    SyncGroupRequestData,
)
from kafkalab.coordinator.group.consumer_group import (
    ConsumerGroupHeartbeatRequestData,
    ConsumerGroupHeartbeatResult,
    DescribedConsumerGroup,
)
from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC
from kafkalab.coordinator.group.group_config import GroupConfig
from kafkalab.coordinator.group.group_coordinator import GroupCoordinator
from kafkalab.coordinator.group.group_runtime import UNKNOWN_MEMBER_ID
from kafkalab.coordinator.group.offset_metadata_manager import OFFSET_COMMIT_LATEST_VERSION
from kafkalab.coordinator.group.results import (
    CommitOffset,
    DeleteGroupsResult,
    DescribedGroup,
    HeartbeatResult,
    JoinGroupResult,
    LeaveGroupResult,
    ListGroupsResult,
    OffsetCommitResult,
    OffsetDeleteResult,
    OffsetFetchResult,
    SyncGroupResult,
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

    # -- typed requests -------------------------------------------------------------------------

    async def join_group(self, data: JoinGroupRequestData) -> JoinGroupResult:
        c = self.coordinator
        return await self.run(
            lambda now, request: c.classic_group_join(data, now_ms=now, request=request),
            JoinGroupResult,
        )

    async def sync_group(self, data: SyncGroupRequestData) -> SyncGroupResult:
        c = self.coordinator
        return await self.run(
            lambda now, request: c.classic_group_sync(data, now_ms=now, request=request),
            SyncGroupResult,
        )

    async def commit_offsets(
        self,
        group_id: str,
        offsets: dict[TopicPartition, CommitOffset],
        *,
        generation_id: int = -1,
        member_id: str = UNKNOWN_MEMBER_ID,
        group_instance_id: str | None = None,
        expire_timestamp_ms: int | None = None,
        api_version: int = OFFSET_COMMIT_LATEST_VERSION,
    ) -> OffsetCommitResult:
        c = self.coordinator
        return await self.run(
            lambda now, request: c.commit_offsets(
                group_id,
                offsets,
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=group_instance_id,
                expire_timestamp_ms=expire_timestamp_ms,
                api_version=api_version,
                now_ms=now,
                request=request,
            ),
            OffsetCommitResult,
        )

    async def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[TopicPartition, CommitOffset],
        *,
        transactional_id: str,
        generation_id: int = -1,
        member_id: str = UNKNOWN_MEMBER_ID,
        group_instance_id: str | None = None,
    ) -> OffsetCommitResult:
        c = self.coordinator
        return await self.run(
            lambda now, request: c.commit_transactional_offsets(
                group_id,
                producer_id,
                producer_epoch,
                offsets,
                transactional_id=transactional_id,
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=group_instance_id,
                now_ms=now,
                request=request,
            ),
            OffsetCommitResult,
        )

    async def consumer_group_heartbeat(
        self, data: ConsumerGroupHeartbeatRequestData
    ) -> ConsumerGroupHeartbeatResult:
        """KIP-848's one request (call `sync_topic_metadata` first: the coordinator
        assigns partitions of the topics it knows)."""
        c = self.coordinator
        return await self.run(
            lambda now, request: c.handle_consumer_group_heartbeat(
                data, now_ms=now, request=request
            ),
            ConsumerGroupHeartbeatResult,
        )

    def consumer_group_describe(self, group_id: str) -> DescribedConsumerGroup:
        return self.coordinator.consumer_group_describe(group_id)

    def is_consumer_group(self, group_id: str) -> bool:
        """A KIP-848 group (ListGroups v5 names its type `consumer`, the others `classic`)."""
        return group_id in self.coordinator.consumer_groups

    async def heartbeat(self, data: HeartbeatRequestData) -> HeartbeatResult:
        c = self.coordinator
        return await self.run(
            lambda now, request: c.classic_group_heartbeat(data, now_ms=now, request=request),
            HeartbeatResult,
        )

    async def leave_group(self, data: LeaveGroupRequestData) -> LeaveGroupResult:
        c = self.coordinator
        return await self.run(
            lambda now, request: c.classic_group_leave(data, now_ms=now, request=request),
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
