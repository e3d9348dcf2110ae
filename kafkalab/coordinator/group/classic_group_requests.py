"""The requests of the classic group protocol, as the group coordinator takes them:
one frozen dataclass each, built once by the API module (kafkalab/server/apis/
group.py) from the request's body and passed as it is through the
GroupCoordinatorService and the GroupCoordinator to the ClassicGroupManager.

Kafka's classes: org.apache.kafka.common.message.JoinGroupRequestData,
SyncGroupRequestData, HeartbeatRequestData and LeaveGroupRequestData, generated
from the message JSONs; the fields are named as those JSONs name them (in
snake case). A few values Kafka's coordinator reads from the RequestContext (the
client's id and host, whether the version makes a new member ask for its id
first) travel in the JoinGroup data too, marked below.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JoinGroupRequestData:
    group_id: str
    member_id: str  # "": a member without an id yet
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), in order of preference
    session_timeout_ms: int
    rebalance_timeout_ms: int | None = None  # None (JoinGroup v0): the session timeout
    group_instance_id: str | None = None  # a static member (KIP-345, v5+)
    # from the request's header and version (Kafka: RequestContext)
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True  # v4+: MEMBER_ID_REQUIRED first

    @property
    def effective_rebalance_timeout_ms(self) -> int:
        """How long the coordinator waits for this member to rejoin."""
        if self.rebalance_timeout_ms is None:
            return self.session_timeout_ms
        return self.rebalance_timeout_ms


@dataclass(frozen=True)
class SyncGroupRequestData:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None  # v5+: checked against the group's
    protocol_name: str | None = None  # v5+: checked against the group's
    assignments: tuple[tuple[str, bytes], ...] = ()  # (member id, assignment): the leader's


@dataclass(frozen=True)
class HeartbeatRequestData:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True)
class LeaveGroupRequestData:
    group_id: str
    # (member id, group instance id) each (Kafka: MemberIdentity; v0-2 name one
    # member, by id). An empty member id with an instance id: the admin removes
    # that static member.
    members: tuple[tuple[str, str | None], ...]
