"""The classic group protocol (before KIP-848): FindCoordinator (10), JoinGroup (11),
Heartbeat (12), LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16),
DeleteGroups (42), and GROUP_APIS, with the offset APIs from `offsets`.
"""

from __future__ import annotations

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import Api
from kafkalab.protocol.messages.offsets import (
    OFFSET_COMMIT_REQUEST,
    OFFSET_COMMIT_RESPONSE,
    OFFSET_DELETE_REQUEST,
    OFFSET_DELETE_RESPONSE,
    OFFSET_FETCH_REQUEST,
    OFFSET_FETCH_RESPONSE,
)
from kafkalab.protocol.schema import NULL, Message
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.types import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    STRING,
    ArrayOf,
)

# -- Classic consumer-group APIs: the group coordinator's requests (the "classic"
#    rebalance protocol, before KIP-848), served by kafkalab.server.apis.group. Fields
#    that exist only in versions above the declared range are left out, as elsewhere in
#    this package. ----------------------------------------------------------------------------

# -- FindCoordinator (10) ------------------------------------------------------------------

FIND_COORDINATOR_REQUEST = Message(
    ApiKeys.FIND_COORDINATOR,
    "FindCoordinatorRequest",
    [
        F("key", STRING, "0-3"),
        F("key_type", INT8, "1+"),
    ],
    flexible_from=3,
)

FIND_COORDINATOR_RESPONSE = Message(
    ApiKeys.FIND_COORDINATOR,
    "FindCoordinatorResponse",
    [
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "0-3"),
        F("error_message", STRING, "1-3", nullable="1-3"),
        F("node_id", INT32, "0-3"),
        F("host", STRING, "0-3"),
        F("port", INT32, "0-3"),
    ],
    flexible_from=3,
)

# -- JoinGroup (11) ------------------------------------------------------------------------

JOIN_GROUP_REQUEST = Message(
    ApiKeys.JOIN_GROUP,
    "JoinGroupRequest",
    [
        F("group_id", STRING),
        F("session_timeout_ms", INT32),
        F("rebalance_timeout_ms", INT32, "1+", default=-1),
        F("member_id", STRING),
        F("group_instance_id", STRING, "5+", nullable="5+", default=NULL),
        F("protocol_type", STRING),
        F(
            "protocols",
            [
                F("name", STRING),
                F("metadata", BYTES),
            ],
        ),
    ],
    flexible_from=6,
)

JOIN_GROUP_RESPONSE = Message(
    ApiKeys.JOIN_GROUP,
    "JoinGroupResponse",
    [
        F("throttle_time_ms", INT32, "2+"),
        F("error_code", INT16),
        F("generation_id", INT32, default=-1),
        F("protocol_name", STRING, nullable="7+"),
        F("leader", STRING),
        F("member_id", STRING),
        F(
            "members",
            [
                F("member_id", STRING),
                F("group_instance_id", STRING, "5+", nullable="5+", default=NULL),
                F("metadata", BYTES),
            ],
        ),
    ],
    flexible_from=6,
)

# -- Heartbeat (12) ------------------------------------------------------------------------

HEARTBEAT_REQUEST = Message(
    ApiKeys.HEARTBEAT,
    "HeartbeatRequest",
    [
        F("group_id", STRING),
        F("generation_id", INT32),
        F("member_id", STRING),
        F("group_instance_id", STRING, "3+", nullable="3+", default=NULL),
    ],
    flexible_from=4,
)

HEARTBEAT_RESPONSE = Message(
    ApiKeys.HEARTBEAT,
    "HeartbeatResponse",
    [
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
    ],
    flexible_from=4,
)

# -- LeaveGroup (13) -----------------------------------------------------------------------

LEAVE_GROUP_REQUEST = Message(
    ApiKeys.LEAVE_GROUP,
    "LeaveGroupRequest",
    [
        F("group_id", STRING),
        F("member_id", STRING, "0-2"),
        F(
            "members",
            [
                F("member_id", STRING, "3+"),
                F("group_instance_id", STRING, "3+", nullable="3+", default=NULL),
            ],
            "3+",
        ),
    ],
    flexible_from=4,
)

LEAVE_GROUP_RESPONSE = Message(
    ApiKeys.LEAVE_GROUP,
    "LeaveGroupResponse",
    [
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F(
            "members",
            [
                F("member_id", STRING, "3+"),
                F("group_instance_id", STRING, "3+", nullable="3+"),
                F("error_code", INT16, "3+"),
            ],
            "3+",
        ),
    ],
    flexible_from=4,
)

# -- SyncGroup (14) ------------------------------------------------------------------------

SYNC_GROUP_REQUEST = Message(
    ApiKeys.SYNC_GROUP,
    "SyncGroupRequest",
    [
        F("group_id", STRING),
        F("generation_id", INT32),
        F("member_id", STRING),
        F("group_instance_id", STRING, "3+", nullable="3+", default=NULL),
        F(
            "assignments",
            [
                F("member_id", STRING),
                F("assignment", BYTES),
            ],
        ),
    ],
    flexible_from=4,
)

SYNC_GROUP_RESPONSE = Message(
    ApiKeys.SYNC_GROUP,
    "SyncGroupResponse",
    [
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F("assignment", BYTES),
    ],
    flexible_from=4,
)

# -- DescribeGroups (15) -------------------------------------------------------------------

DESCRIBE_GROUPS_REQUEST = Message(
    ApiKeys.DESCRIBE_GROUPS,
    "DescribeGroupsRequest",
    [
        F("groups", ArrayOf(STRING)),
        F("include_authorized_operations", BOOL, "3+"),
    ],
    flexible_from=5,
)

DESCRIBE_GROUPS_RESPONSE = Message(
    ApiKeys.DESCRIBE_GROUPS,
    "DescribeGroupsResponse",
    [
        F("throttle_time_ms", INT32, "1+"),
        F(
            "groups",
            [
                F("error_code", INT16),
                F("group_id", STRING),
                F("group_state", STRING),
                F("protocol_type", STRING),
                F("protocol_data", STRING),
                F(
                    "members",
                    [
                        F("member_id", STRING),
                        F("group_instance_id", STRING, "4+", nullable="4+", default=NULL),
                        F("client_id", STRING),
                        F("client_host", STRING),
                        F("member_metadata", BYTES),
                        F("member_assignment", BYTES),
                    ],
                ),
                F("authorized_operations", INT32, "3+", default=-(2**31)),
            ],
        ),
    ],
    flexible_from=5,
)

# -- ListGroups (16) -----------------------------------------------------------------------

LIST_GROUPS_REQUEST = Message(
    ApiKeys.LIST_GROUPS,
    "ListGroupsRequest",
    [
        # v0-3 have no fields; v4 filters by state (KIP-518), v5 by type (KIP-848)
        F("states_filter", ArrayOf(STRING), "4+"),
        F("types_filter", ArrayOf(STRING), "5+"),
    ],
    flexible_from=3,
)

LIST_GROUPS_RESPONSE = Message(
    ApiKeys.LIST_GROUPS,
    "ListGroupsResponse",
    [
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F(
            "groups",
            [
                F("group_id", STRING),
                F("protocol_type", STRING),
                F("group_state", STRING, "4+"),
                F("group_type", STRING, "5+"),  # classic or consumer (KIP-848)
            ],
        ),
    ],
    flexible_from=3,
)

# -- DeleteGroups (42) ---------------------------------------------------------------------

DELETE_GROUPS_REQUEST = Message(
    ApiKeys.DELETE_GROUPS,
    "DeleteGroupsRequest",
    [
        F("groups_names", ArrayOf(STRING)),
    ],
    flexible_from=2,
)

DELETE_GROUPS_RESPONSE = Message(
    ApiKeys.DELETE_GROUPS,
    "DeleteGroupsResponse",
    [
        F("throttle_time_ms", INT32),
        F(
            "results",
            [
                F("group_id", STRING),
                F("error_code", INT16),
            ],
        ),
    ],
    flexible_from=2,
)

# Served by kafkalab.server.apis.group; OffsetFetch is raised to v7 by TXN_GROUP_APIS.
GROUP_APIS: dict[ApiKeys, Api] = {
    api.key: api
    for api in (
        Api(
            ApiKeys.FIND_COORDINATOR,
            "FindCoordinator",
            0,
            3,
            FIND_COORDINATOR_REQUEST,
            FIND_COORDINATOR_RESPONSE,
        ),
        Api(ApiKeys.JOIN_GROUP, "JoinGroup", 0, 5, JOIN_GROUP_REQUEST, JOIN_GROUP_RESPONSE),
        Api(ApiKeys.HEARTBEAT, "Heartbeat", 0, 3, HEARTBEAT_REQUEST, HEARTBEAT_RESPONSE),
        Api(ApiKeys.LEAVE_GROUP, "LeaveGroup", 0, 3, LEAVE_GROUP_REQUEST, LEAVE_GROUP_RESPONSE),
        Api(ApiKeys.SYNC_GROUP, "SyncGroup", 0, 3, SYNC_GROUP_REQUEST, SYNC_GROUP_RESPONSE),
        # v8 flexible, v9 for KIP-848 members (their member epoch), v10 topic ids
        Api(
            ApiKeys.OFFSET_COMMIT,
            "OffsetCommit",
            0,
            10,
            OFFSET_COMMIT_REQUEST,
            OFFSET_COMMIT_RESPONSE,
        ),
        Api(
            ApiKeys.OFFSET_FETCH,
            "OffsetFetch",
            0,
            5,
            OFFSET_FETCH_REQUEST,
            OFFSET_FETCH_RESPONSE,
        ),
        Api(
            ApiKeys.DESCRIBE_GROUPS,
            "DescribeGroups",
            0,
            4,
            DESCRIBE_GROUPS_REQUEST,
            DESCRIBE_GROUPS_RESPONSE,
        ),
        Api(ApiKeys.LIST_GROUPS, "ListGroups", 0, 5, LIST_GROUPS_REQUEST, LIST_GROUPS_RESPONSE),
        Api(
            ApiKeys.DELETE_GROUPS,
            "DeleteGroups",
            0,
            1,
            DELETE_GROUPS_REQUEST,
            DELETE_GROUPS_RESPONSE,
        ),
        Api(
            ApiKeys.OFFSET_DELETE,
            "OffsetDelete",
            0,
            0,
            OFFSET_DELETE_REQUEST,
            OFFSET_DELETE_RESPONSE,
        ),
    )
}
