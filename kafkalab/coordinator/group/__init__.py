"""The group coordinator (classic protocol and KIP-848), sans-IO, in the shape of
Kafka's group-coordinator/.

group_coordinator        GroupCoordinator (Kafka: GroupCoordinatorShard; implements
                         runtime.CoordinatorShard): partitions of __consumer_offsets,
                         loading them by replaying each record, deadlines via
                         tick(), the request surface (it delegates)
classic_group_manager    JoinGroup, SyncGroup, Heartbeat, LeaveGroup
classic_group_requests   their request data (JoinGroupRequestData, ...), Kafka's field names
classic_group_rebalance  join and sync phases, session timeouts, parked requests,
                         the group record
consumer_group_manager   KIP-848 ConsumerGroupHeartbeat and Describe; handlers write
                         records and change a group only by replaying them
consumer_group_records   the KIP-848 records, byte-exact; records_between
offset_metadata_manager  OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete, expiry;
                         the replay of offset records, live and at load
group_metadata_manager   DescribeGroups, ListGroups, DeleteGroups
group_runtime            the kinds of the coordinator's appends and deadlines
classic_group            ClassicGroup and GroupState (Kafka: ClassicGroupState), the
                         transitions as data (VALID_PREVIOUS_STATES)
classic_group_member     ClassicGroupMember
consumer_group           ConsumerGroup (KIP-848) and its members, the heartbeat's
                         request data and result, TopicMetadata
group_config             GroupConfig: group.* and offsets.* settings, Kafka's defaults
coordinator_records      __consumer_offsets keys and values, byte-exact; partition_for
results                  the result types and the effects (Respond, AppendRecords)
"""

from kafkalab.coordinator.group.classic_group import (
    VALID_PREVIOUS_STATES,
    ClassicGroup,
    GroupState,
    IllegalGroupTransition,
)
from kafkalab.coordinator.group.classic_group_member import ClassicGroupMember
from kafkalab.coordinator.group.coordinator_records import (
    OFFSETS_TOPIC,
    GroupMetadataRecord,
    MemberRecord,
    OffsetAndMetadata,
    partition_for,
)
from kafkalab.coordinator.group.group_config import GroupConfig
from kafkalab.coordinator.group.group_coordinator import GroupCoordinator
from kafkalab.coordinator.group.results import (
    AppendRecords,
    CommitOffset,
    DeleteGroupsResult,
    DescribedGroup,
    Effects,
    HeartbeatResult,
    JoinGroupResult,
    LeaveGroupResult,
    ListGroupsResult,
    OffsetCommitResult,
    OffsetDeleteResult,
    OffsetFetchResult,
    Respond,
    SyncGroupResult,
)

__all__ = [
    "OFFSETS_TOPIC",
    "VALID_PREVIOUS_STATES",
    "AppendRecords",
    "CommitOffset",
    "DeleteGroupsResult",
    "DescribedGroup",
    "Effects",
    "GroupConfig",
    "GroupCoordinator",
    "ClassicGroup",
    "GroupMetadataRecord",
    "GroupState",
    "HeartbeatResult",
    "IllegalGroupTransition",
    "JoinGroupResult",
    "LeaveGroupResult",
    "ListGroupsResult",
    "ClassicGroupMember",
    "MemberRecord",
    "OffsetAndMetadata",
    "OffsetCommitResult",
    "OffsetDeleteResult",
    "OffsetFetchResult",
    "Respond",
    "SyncGroupResult",
    "partition_for",
]
