"""The group coordinator (classic protocol), sans-IO.

group_coordinator     GroupCoordinator: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
                      OffsetCommit/Fetch/Delete, Describe/List/DeleteGroups; loading
                      and unloading __consumer_offsets partitions; deadlines via tick()
group_metadata        GroupMetadata and GroupState (the state machine, as data)
member_metadata       MemberMetadata
group_config          GroupConfig: group.* and offsets.* settings, Kafka's defaults
coordinator_records   __consumer_offsets keys and values, byte-exact; partition_for
results               the result types and the effects (Respond, AppendRecords)
"""

from kafkalab.coordinator.group.coordinator_records import (
    OFFSETS_TOPIC,
    GroupMetadataRecord,
    MemberRecord,
    OffsetAndMetadata,
    partition_for,
)
from kafkalab.coordinator.group.group_config import GroupConfig
from kafkalab.coordinator.group.group_coordinator import GroupCoordinator
from kafkalab.coordinator.group.group_metadata import (
    VALID_PREVIOUS_STATES,
    GroupMetadata,
    GroupState,
    IllegalGroupTransition,
)
from kafkalab.coordinator.group.member_metadata import MemberMetadata
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
    "GroupMetadata",
    "GroupMetadataRecord",
    "GroupState",
    "HeartbeatResult",
    "IllegalGroupTransition",
    "JoinGroupResult",
    "LeaveGroupResult",
    "ListGroupsResult",
    "MemberMetadata",
    "MemberRecord",
    "OffsetAndMetadata",
    "OffsetCommitResult",
    "OffsetDeleteResult",
    "OffsetFetchResult",
    "Respond",
    "SyncGroupResult",
    "partition_for",
]
