"""KRaft's APIs: Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch (54), DescribeQuorum
(55), FetchSnapshot (59, KIP-630); RAFT_APIS, what a controller's listener adds to
serve its quorum.

Kafka's JSONs of the same names, field for field, at the versions Kafka 4.0 speaks:
Vote v0-2 (v1: KIP-853's voter and directory ids, v2: KIP-996's PreVote, and the
candidate's fields renamed Replica*), BeginQuorumEpoch and EndQuorumEpoch v0-1 (v1:
flexible, KIP-853's voter key and leader endpoints; EndQuorumEpoch's
PreferredSuccessors become PreferredCandidates), DescribeQuorum v0-2 (v1: KIP-836's
timestamps, v2: KIP-853's directory ids and nodes), FetchSnapshot v0-1 (flexible
from v0; v1: KIP-853's ReplicaDirectoryId and the answer's NodeEndpoints, both
tagged). The KRaft fields of Fetch
(ClusterId, ReplicaState, LastFetchedEpoch; DivergingEpoch, CurrentLeader,
SnapshotId) are declared with Fetch (messages/fetch.py).

Every request holds one topic (`__cluster_metadata`) with one partition (0);
kafkalab/raft/raft_wire.py translates between these dicts and kafkalab.raft's
RaftMessage data.
"""

from __future__ import annotations

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import Api
from kafkalab.protocol.schema import NULL, Message, Struct
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.types import (
    BOOL,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UUID,
    ArrayOf,
)

# KIP-853: the endpoints a leader advertises (tagged in responses)
_NODE_ENDPOINTS = [F("node_id", INT32), F("host", STRING), F("port", INT32)]
_LEADER_ENDPOINTS = [F("name", STRING), F("host", STRING), F("port", INT32)]

# -- Vote (52) -------------------------------------------------------------------------------

VOTE_REQUEST = Message(
    ApiKeys.VOTE,
    "VoteRequest",
    [
        F("cluster_id", STRING, nullable="0+", default=NULL),
        F("voter_id", INT32, "1+", default=-1),
        F(
            "topics",
            [
                F("topic_name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("replica_epoch", INT32),  # v0-1: CandidateEpoch
                        F("replica_id", INT32),  # v0-1: CandidateId
                        F("replica_directory_id", UUID, "1+"),
                        F("voter_directory_id", UUID, "1+"),
                        F("last_offset_epoch", INT32),
                        F("last_offset", INT64),
                        F("pre_vote", BOOL, "2+"),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=0,
)

VOTE_RESPONSE = Message(
    ApiKeys.VOTE,
    "VoteResponse",
    [
        F("error_code", INT16),
        F(
            "topics",
            [
                F("topic_name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("leader_id", INT32),
                        F("leader_epoch", INT32),
                        F("vote_granted", BOOL),
                    ],
                ),
            ],
        ),
        F("node_endpoints", _NODE_ENDPOINTS, "1+", tag=0),
    ],
    flexible_from=0,
)

# -- BeginQuorumEpoch (53) ------------------------------------------------------------------

BEGIN_QUORUM_EPOCH_REQUEST = Message(
    ApiKeys.BEGIN_QUORUM_EPOCH,
    "BeginQuorumEpochRequest",
    [
        F("cluster_id", STRING, nullable="0+", default=NULL),
        F("voter_id", INT32, "1+", default=-1),
        F(
            "topics",
            [
                F("topic_name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("voter_directory_id", UUID, "1+"),
                        F("leader_id", INT32),
                        F("leader_epoch", INT32),
                    ],
                ),
            ],
        ),
        F("leader_endpoints", _LEADER_ENDPOINTS, "1+"),
    ],
    flexible_from=1,
)

BEGIN_QUORUM_EPOCH_RESPONSE = Message(
    ApiKeys.BEGIN_QUORUM_EPOCH,
    "BeginQuorumEpochResponse",
    [
        F("error_code", INT16),
        F(
            "topics",
            [
                F("topic_name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("leader_id", INT32),
                        F("leader_epoch", INT32),
                    ],
                ),
            ],
        ),
        F("node_endpoints", _NODE_ENDPOINTS, "1+", tag=0),
    ],
    flexible_from=1,
)

# -- EndQuorumEpoch (54) --------------------------------------------------------------------

END_QUORUM_EPOCH_REQUEST = Message(
    ApiKeys.END_QUORUM_EPOCH,
    "EndQuorumEpochRequest",
    [
        F("cluster_id", STRING, nullable="0+", default=NULL),
        F(
            "topics",
            [
                F("topic_name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("leader_id", INT32),
                        F("leader_epoch", INT32),
                        F("preferred_successors", ArrayOf(INT32), "0"),
                        F(
                            "preferred_candidates",
                            [F("candidate_id", INT32), F("candidate_directory_id", UUID)],
                            "1+",
                        ),
                    ],
                ),
            ],
        ),
        F("leader_endpoints", _LEADER_ENDPOINTS, "1+"),
    ],
    flexible_from=1,
)

END_QUORUM_EPOCH_RESPONSE = Message(
    ApiKeys.END_QUORUM_EPOCH,
    "EndQuorumEpochResponse",
    [
        F("error_code", INT16),
        F(
            "topics",
            [
                F("topic_name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("leader_id", INT32),
                        F("leader_epoch", INT32),
                    ],
                ),
            ],
        ),
        F("node_endpoints", _NODE_ENDPOINTS, "1+", tag=0),
    ],
    flexible_from=1,
)

# -- DescribeQuorum (55) --------------------------------------------------------------------

DESCRIBE_QUORUM_REQUEST = Message(
    ApiKeys.DESCRIBE_QUORUM,
    "DescribeQuorumRequest",
    [
        F(
            "topics",
            [F("topic_name", STRING), F("partitions", [F("partition_index", INT32)])],
        ),
    ],
    flexible_from=0,
)

_REPLICA_STATE = [
    F("replica_id", INT32),
    F("replica_directory_id", UUID, "2+"),
    F("log_end_offset", INT64),
    F("last_fetch_timestamp", INT64, "1+", default=-1),
    F("last_caught_up_timestamp", INT64, "1+", default=-1),
]

DESCRIBE_QUORUM_RESPONSE = Message(
    ApiKeys.DESCRIBE_QUORUM,
    "DescribeQuorumResponse",
    [
        F("error_code", INT16),
        F("error_message", STRING, "2+", nullable="2+", default=NULL),
        F(
            "topics",
            [
                F("topic_name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("error_message", STRING, "2+", nullable="2+", default=NULL),
                        F("leader_id", INT32),
                        F("leader_epoch", INT32),
                        F("high_watermark", INT64),
                        F("current_voters", _REPLICA_STATE),
                        F("observers", _REPLICA_STATE),
                    ],
                ),
            ],
        ),
        F(
            "nodes",
            [
                F("node_id", INT32),
                F("listeners", [F("name", STRING), F("host", STRING), F("port", UINT16)]),
            ],
            "2+",
        ),
    ],
    flexible_from=0,
)

# -- FetchSnapshot (59) ---------------------------------------------------------------------

_SNAPSHOT_ID = [F("end_offset", INT64), F("epoch", INT32)]

FETCH_SNAPSHOT_REQUEST = Message(
    ApiKeys.FETCH_SNAPSHOT,
    "FetchSnapshotRequest",
    [
        F("cluster_id", STRING, nullable="0+", default=NULL, tag=0),
        F("replica_id", INT32, default=-1),
        F("max_bytes", INT32, default=0x7FFFFFFF),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition", INT32),
                        F("current_leader_epoch", INT32),
                        F("snapshot_id", Struct(_SNAPSHOT_ID)),
                        F("position", INT64),
                        F("replica_directory_id", UUID, "1+", tag=0),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=0,
)

FETCH_SNAPSHOT_RESPONSE = Message(
    ApiKeys.FETCH_SNAPSHOT,
    "FetchSnapshotResponse",
    [
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("index", INT32),
                        F("error_code", INT16),
                        F("snapshot_id", Struct(_SNAPSHOT_ID)),
                        F(
                            "current_leader",
                            Struct(
                                [
                                    F("leader_id", INT32, default=-1),
                                    F("leader_epoch", INT32, default=-1),
                                ]
                            ),
                            tag=0,
                        ),
                        F("size", INT64),
                        F("position", INT64),
                        F("unaligned_records", RECORDS),
                    ],
                ),
            ],
        ),
        F("node_endpoints", _NODE_ENDPOINTS, "1+", tag=0),
    ],
    flexible_from=0,
)

VOTE_API = Api(ApiKeys.VOTE, "Vote", 0, 2, VOTE_REQUEST, VOTE_RESPONSE)
BEGIN_QUORUM_EPOCH_API = Api(
    ApiKeys.BEGIN_QUORUM_EPOCH,
    "BeginQuorumEpoch",
    0,
    1,
    BEGIN_QUORUM_EPOCH_REQUEST,
    BEGIN_QUORUM_EPOCH_RESPONSE,
)
END_QUORUM_EPOCH_API = Api(
    ApiKeys.END_QUORUM_EPOCH,
    "EndQuorumEpoch",
    0,
    1,
    END_QUORUM_EPOCH_REQUEST,
    END_QUORUM_EPOCH_RESPONSE,
)
DESCRIBE_QUORUM_API = Api(
    ApiKeys.DESCRIBE_QUORUM,
    "DescribeQuorum",
    0,
    2,
    DESCRIBE_QUORUM_REQUEST,
    DESCRIBE_QUORUM_RESPONSE,
)

FETCH_SNAPSHOT_API = Api(
    ApiKeys.FETCH_SNAPSHOT,
    "FetchSnapshot",
    0,
    1,
    FETCH_SNAPSHOT_REQUEST,
    FETCH_SNAPSHOT_RESPONSE,
)

RAFT_APIS: dict[ApiKeys, Api] = {
    api.key: api
    for api in (
        VOTE_API,
        BEGIN_QUORUM_EPOCH_API,
        END_QUORUM_EPOCH_API,
        DESCRIBE_QUORUM_API,
        FETCH_SNAPSHOT_API,
    )
}
