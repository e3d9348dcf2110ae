"""The requests and responses kafkalab speaks, declared once, as data, one module per API
family (as Kafka keeps one JSON definition per message):

api             Api: an API's key, name, supported versions and both schemas
api_versions    ApiVersions (18), api_versions_body
metadata        Metadata (3)
produce         Produce (0)
fetch           Fetch (1), OffsetForLeaderEpoch (23)
list_offsets    ListOffsets (2)
topics          CreateTopics (19), DeleteTopics (20), CreatePartitions (37)
delete_records  DeleteRecords (21)
configs         DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44)
cluster         DescribeCluster (60)
reassignment    ElectLeaders (43), AlterPartitionReassignments (45),
                ListPartitionReassignments (46); REASSIGNMENT_APIS
controller      BrokerRegistration (62), BrokerHeartbeat (63), AlterPartition (56),
                AllocateProducerIds (67);
                CONTROLLER_APIS, what the controller's listener serves
raft            KRaft: Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch (54),
                DescribeQuorum (55), FetchSnapshot (59); RAFT_APIS
group           the classic group protocol: FindCoordinator (10), JoinGroup (11),
                Heartbeat (12), LeaveGroup (13), SyncGroup (14), DescribeGroups (15),
                ListGroups (16), DeleteGroups (42); GROUP_APIS
offsets         OffsetCommit (8), OffsetFetch (9), OffsetDelete (47), TxnOffsetCommit (28);
                TXN_GROUP_APIS
consumer_group  KIP-848: ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69);
                CONSUMER_GROUP_APIS
txn             transactions: InitProducerId (22), AddPartitionsToTxn (24),
                AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27),
                DescribeTransactions (65), ListTransactions (66), DescribeProducers (61);
                TXN_COORDINATOR_APIS

Each declaration follows Kafka's JSON schema of the same name
(`clients/src/main/resources/common/message/<Name>Request.json`), field for
field, in order, with the versions each field exists in. `APIS` holds
the version range the broker advertises for each API: the non-flexible ranges
that every client can use (ApiVersions also at v3, the first flexible one, which
librdkafka and kafka-python send); docs/protocol-versions.md says why.

Field order matters: fields are encoded in declaration order, which is why
`throttle_time_ms` comes last in Produce and ApiVersions responses.

This package is the public face: import from `kafkalab.protocol.messages`, not from its
modules.
"""

from __future__ import annotations

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import (
    Api,
)
from kafkalab.protocol.messages.api_versions import (
    API_VERSIONS_API,
    API_VERSIONS_REQUEST,
    API_VERSIONS_RESPONSE,
    api_versions_body,
)
from kafkalab.protocol.messages.cluster import (
    DESCRIBE_CLUSTER_API,
    DESCRIBE_CLUSTER_REQUEST,
    DESCRIBE_CLUSTER_RESPONSE,
)
from kafkalab.protocol.messages.configs import (
    ALTER_CONFIGS_API,
    DESCRIBE_CONFIGS_API,
    DESCRIBE_CONFIGS_REQUEST,
    DESCRIBE_CONFIGS_RESPONSE,
    INCREMENTAL_ALTER_CONFIGS_API,
)
from kafkalab.protocol.messages.consumer_group import (
    CONSUMER_GROUP_APIS,
    CONSUMER_GROUP_DESCRIBE_REQUEST,
    CONSUMER_GROUP_DESCRIBE_RESPONSE,
    CONSUMER_GROUP_HEARTBEAT_REQUEST,
    CONSUMER_GROUP_HEARTBEAT_RESPONSE,
)
from kafkalab.protocol.messages.controller import (
    ALLOCATE_PRODUCER_IDS_REQUEST,
    ALLOCATE_PRODUCER_IDS_RESPONSE,
    ALTER_PARTITION_REQUEST,
    ALTER_PARTITION_RESPONSE,
    BROKER_HEARTBEAT_REQUEST,
    BROKER_HEARTBEAT_RESPONSE,
    BROKER_REGISTRATION_REQUEST,
    BROKER_REGISTRATION_RESPONSE,
    CONTROLLER_APIS,
)
from kafkalab.protocol.messages.delete_records import (
    DELETE_RECORDS_API,
    DELETE_RECORDS_REQUEST,
    DELETE_RECORDS_RESPONSE,
)
from kafkalab.protocol.messages.fetch import (
    FETCH_API,
    FETCH_REQUEST,
    FETCH_RESPONSE,
    OFFSET_FOR_LEADER_EPOCH_API,
    OFFSET_FOR_LEADER_EPOCH_REQUEST,
    OFFSET_FOR_LEADER_EPOCH_RESPONSE,
)
from kafkalab.protocol.messages.group import (
    DELETE_GROUPS_REQUEST,
    DELETE_GROUPS_RESPONSE,
    DESCRIBE_GROUPS_REQUEST,
    DESCRIBE_GROUPS_RESPONSE,
    FIND_COORDINATOR_REQUEST,
    FIND_COORDINATOR_RESPONSE,
    GROUP_APIS,
    HEARTBEAT_REQUEST,
    HEARTBEAT_RESPONSE,
    JOIN_GROUP_REQUEST,
    JOIN_GROUP_RESPONSE,
    LEAVE_GROUP_REQUEST,
    LEAVE_GROUP_RESPONSE,
    LIST_GROUPS_REQUEST,
    LIST_GROUPS_RESPONSE,
    SYNC_GROUP_REQUEST,
    SYNC_GROUP_RESPONSE,
)
from kafkalab.protocol.messages.list_offsets import (
    LIST_OFFSETS_API,
    LIST_OFFSETS_REQUEST,
    LIST_OFFSETS_RESPONSE,
)
from kafkalab.protocol.messages.metadata import (
    METADATA_API,
    METADATA_REQUEST,
    METADATA_RESPONSE,
)
from kafkalab.protocol.messages.offsets import (
    OFFSET_COMMIT_REQUEST,
    OFFSET_COMMIT_RESPONSE,
    OFFSET_DELETE_REQUEST,
    OFFSET_DELETE_RESPONSE,
    OFFSET_FETCH_REQUEST,
    OFFSET_FETCH_RESPONSE,
    TXN_GROUP_APIS,
    TXN_OFFSET_COMMIT_REQUEST,
    TXN_OFFSET_COMMIT_RESPONSE,
)
from kafkalab.protocol.messages.produce import (
    PRODUCE_API,
    PRODUCE_REQUEST,
    PRODUCE_RESPONSE,
)
from kafkalab.protocol.messages.raft import (
    BEGIN_QUORUM_EPOCH_API,
    BEGIN_QUORUM_EPOCH_REQUEST,
    BEGIN_QUORUM_EPOCH_RESPONSE,
    DESCRIBE_QUORUM_API,
    DESCRIBE_QUORUM_REQUEST,
    DESCRIBE_QUORUM_RESPONSE,
    END_QUORUM_EPOCH_API,
    END_QUORUM_EPOCH_REQUEST,
    END_QUORUM_EPOCH_RESPONSE,
    FETCH_SNAPSHOT_API,
    FETCH_SNAPSHOT_REQUEST,
    FETCH_SNAPSHOT_RESPONSE,
    RAFT_APIS,
    VOTE_API,
    VOTE_REQUEST,
    VOTE_RESPONSE,
)
from kafkalab.protocol.messages.reassignment import (
    ALTER_PARTITION_REASSIGNMENTS_API,
    ALTER_PARTITION_REASSIGNMENTS_REQUEST,
    ALTER_PARTITION_REASSIGNMENTS_RESPONSE,
    ELECT_LEADERS_API,
    ELECT_LEADERS_REQUEST,
    ELECT_LEADERS_RESPONSE,
    LIST_PARTITION_REASSIGNMENTS_API,
    LIST_PARTITION_REASSIGNMENTS_REQUEST,
    LIST_PARTITION_REASSIGNMENTS_RESPONSE,
    REASSIGNMENT_APIS,
)
from kafkalab.protocol.messages.topics import (
    CREATE_PARTITIONS_API,
    CREATE_PARTITIONS_REQUEST,
    CREATE_PARTITIONS_RESPONSE,
    CREATE_TOPICS_API,
    CREATE_TOPICS_REQUEST,
    CREATE_TOPICS_RESPONSE,
    DELETE_TOPICS_API,
    DELETE_TOPICS_REQUEST,
    DELETE_TOPICS_RESPONSE,
)
from kafkalab.protocol.messages.txn import (
    ADD_OFFSETS_TO_TXN_REQUEST,
    ADD_OFFSETS_TO_TXN_RESPONSE,
    ADD_PARTITIONS_TO_TXN_REQUEST,
    ADD_PARTITIONS_TO_TXN_RESPONSE,
    DESCRIBE_PRODUCERS_API,
    DESCRIBE_PRODUCERS_REQUEST,
    DESCRIBE_PRODUCERS_RESPONSE,
    DESCRIBE_TRANSACTIONS_REQUEST,
    DESCRIBE_TRANSACTIONS_RESPONSE,
    END_TXN_REQUEST,
    END_TXN_RESPONSE,
    INIT_PRODUCER_ID_API,
    INIT_PRODUCER_ID_REQUEST,
    INIT_PRODUCER_ID_RESPONSE,
    LIST_TRANSACTIONS_REQUEST,
    LIST_TRANSACTIONS_RESPONSE,
    TXN_COORDINATOR_APIS,
    WRITE_TXN_MARKERS_REQUEST,
    WRITE_TXN_MARKERS_RESPONSE,
)

# What a broker serves and advertises to clients, in the order the families were added.
APIS: dict[ApiKeys, Api] = {
    api.key: api
    for api in (
        PRODUCE_API,
        FETCH_API,
        LIST_OFFSETS_API,
        METADATA_API,
        API_VERSIONS_API,
        CREATE_TOPICS_API,
        DELETE_TOPICS_API,
        INIT_PRODUCER_ID_API,
        OFFSET_FOR_LEADER_EPOCH_API,
    )
}
# The broker serves them (kafkalab.server.apis.group), so it advertises them too.
APIS.update(GROUP_APIS)
APIS.update(TXN_GROUP_APIS)
# The broker serves them (kafkalab.server.apis.consumer_group).
APIS.update(CONSUMER_GROUP_APIS)
APIS[ApiKeys.DESCRIBE_PRODUCERS] = DESCRIBE_PRODUCERS_API
APIS.update(TXN_COORDINATOR_APIS)
APIS[ApiKeys.DESCRIBE_CONFIGS] = DESCRIBE_CONFIGS_API
APIS[ApiKeys.DESCRIBE_CLUSTER] = DESCRIBE_CLUSTER_API
APIS[ApiKeys.CREATE_PARTITIONS] = CREATE_PARTITIONS_API
APIS[ApiKeys.DELETE_RECORDS] = DELETE_RECORDS_API
# Forwarded to the controller (kafkalab.server.apis.reassignment).
APIS.update(REASSIGNMENT_APIS)
APIS[ApiKeys.ALTER_CONFIGS] = ALTER_CONFIGS_API
APIS[ApiKeys.INCREMENTAL_ALTER_CONFIGS] = INCREMENTAL_ALTER_CONFIGS_API
APIS[ApiKeys.DESCRIBE_QUORUM] = DESCRIBE_QUORUM_API  # forwarded to the controllers


__all__ = [
    "ALTER_PARTITION_REASSIGNMENTS_API",
    "ALTER_PARTITION_REASSIGNMENTS_REQUEST",
    "ALTER_PARTITION_REASSIGNMENTS_RESPONSE",
    "ELECT_LEADERS_API",
    "ELECT_LEADERS_REQUEST",
    "ELECT_LEADERS_RESPONSE",
    "LIST_PARTITION_REASSIGNMENTS_API",
    "LIST_PARTITION_REASSIGNMENTS_REQUEST",
    "LIST_PARTITION_REASSIGNMENTS_RESPONSE",
    "REASSIGNMENT_APIS",
    "BEGIN_QUORUM_EPOCH_API",
    "BEGIN_QUORUM_EPOCH_REQUEST",
    "BEGIN_QUORUM_EPOCH_RESPONSE",
    "DESCRIBE_QUORUM_API",
    "DESCRIBE_QUORUM_REQUEST",
    "DESCRIBE_QUORUM_RESPONSE",
    "END_QUORUM_EPOCH_API",
    "END_QUORUM_EPOCH_REQUEST",
    "END_QUORUM_EPOCH_RESPONSE",
    "FETCH_SNAPSHOT_API",
    "FETCH_SNAPSHOT_REQUEST",
    "FETCH_SNAPSHOT_RESPONSE",
    "RAFT_APIS",
    "VOTE_API",
    "VOTE_REQUEST",
    "VOTE_RESPONSE",
    "DESCRIBE_CLUSTER_API",
    "DESCRIBE_CLUSTER_REQUEST",
    "DESCRIBE_CLUSTER_RESPONSE",
    "DESCRIBE_CONFIGS_API",
    "DESCRIBE_CONFIGS_REQUEST",
    "DESCRIBE_CONFIGS_RESPONSE",
    "ADD_OFFSETS_TO_TXN_REQUEST",
    "ADD_OFFSETS_TO_TXN_RESPONSE",
    "ADD_PARTITIONS_TO_TXN_REQUEST",
    "ADD_PARTITIONS_TO_TXN_RESPONSE",
    "ALLOCATE_PRODUCER_IDS_REQUEST",
    "ALLOCATE_PRODUCER_IDS_RESPONSE",
    "ALTER_PARTITION_REQUEST",
    "ALTER_PARTITION_RESPONSE",
    "APIS",
    "API_VERSIONS_API",
    "API_VERSIONS_REQUEST",
    "API_VERSIONS_RESPONSE",
    "Api",
    "BROKER_HEARTBEAT_REQUEST",
    "BROKER_HEARTBEAT_RESPONSE",
    "BROKER_REGISTRATION_REQUEST",
    "BROKER_REGISTRATION_RESPONSE",
    "CONSUMER_GROUP_APIS",
    "CONSUMER_GROUP_DESCRIBE_REQUEST",
    "CONSUMER_GROUP_DESCRIBE_RESPONSE",
    "CONSUMER_GROUP_HEARTBEAT_REQUEST",
    "CONSUMER_GROUP_HEARTBEAT_RESPONSE",
    "CONTROLLER_APIS",
    "CREATE_PARTITIONS_API",
    "CREATE_PARTITIONS_REQUEST",
    "CREATE_PARTITIONS_RESPONSE",
    "CREATE_TOPICS_API",
    "CREATE_TOPICS_REQUEST",
    "CREATE_TOPICS_RESPONSE",
    "DELETE_GROUPS_REQUEST",
    "DELETE_RECORDS_API",
    "DELETE_RECORDS_REQUEST",
    "DELETE_RECORDS_RESPONSE",
    "DELETE_GROUPS_RESPONSE",
    "DELETE_TOPICS_API",
    "DELETE_TOPICS_REQUEST",
    "DELETE_TOPICS_RESPONSE",
    "DESCRIBE_GROUPS_REQUEST",
    "DESCRIBE_GROUPS_RESPONSE",
    "DESCRIBE_PRODUCERS_API",
    "DESCRIBE_PRODUCERS_REQUEST",
    "DESCRIBE_PRODUCERS_RESPONSE",
    "DESCRIBE_TRANSACTIONS_REQUEST",
    "DESCRIBE_TRANSACTIONS_RESPONSE",
    "END_TXN_REQUEST",
    "END_TXN_RESPONSE",
    "FETCH_API",
    "FETCH_REQUEST",
    "FETCH_RESPONSE",
    "FIND_COORDINATOR_REQUEST",
    "FIND_COORDINATOR_RESPONSE",
    "GROUP_APIS",
    "HEARTBEAT_REQUEST",
    "HEARTBEAT_RESPONSE",
    "INIT_PRODUCER_ID_API",
    "INIT_PRODUCER_ID_REQUEST",
    "INIT_PRODUCER_ID_RESPONSE",
    "JOIN_GROUP_REQUEST",
    "JOIN_GROUP_RESPONSE",
    "LEAVE_GROUP_REQUEST",
    "LEAVE_GROUP_RESPONSE",
    "LIST_GROUPS_REQUEST",
    "LIST_GROUPS_RESPONSE",
    "LIST_OFFSETS_API",
    "LIST_OFFSETS_REQUEST",
    "LIST_OFFSETS_RESPONSE",
    "LIST_TRANSACTIONS_REQUEST",
    "LIST_TRANSACTIONS_RESPONSE",
    "METADATA_API",
    "METADATA_REQUEST",
    "METADATA_RESPONSE",
    "OFFSET_COMMIT_REQUEST",
    "OFFSET_COMMIT_RESPONSE",
    "OFFSET_DELETE_REQUEST",
    "OFFSET_DELETE_RESPONSE",
    "OFFSET_FETCH_REQUEST",
    "OFFSET_FETCH_RESPONSE",
    "OFFSET_FOR_LEADER_EPOCH_API",
    "OFFSET_FOR_LEADER_EPOCH_REQUEST",
    "OFFSET_FOR_LEADER_EPOCH_RESPONSE",
    "PRODUCE_API",
    "PRODUCE_REQUEST",
    "PRODUCE_RESPONSE",
    "SYNC_GROUP_REQUEST",
    "SYNC_GROUP_RESPONSE",
    "TXN_COORDINATOR_APIS",
    "TXN_GROUP_APIS",
    "TXN_OFFSET_COMMIT_REQUEST",
    "TXN_OFFSET_COMMIT_RESPONSE",
    "WRITE_TXN_MARKERS_REQUEST",
    "WRITE_TXN_MARKERS_RESPONSE",
    "api_versions_body",
]
