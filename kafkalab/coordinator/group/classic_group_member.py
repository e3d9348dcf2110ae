"""One member of a classic group, as the coordinator sees it.

Kafka's class: org.apache.kafka.coordinator.group.classic.ClassicGroupMember
(MemberMetadata in the Scala coordinator of 3.x). A member has:

- `member_id`: chosen by the coordinator (`client.id` or `group.instance.id`,
  then "-" and a UUID); "" in a JoinGroup means "I have none yet";
- `group_instance_id`: set for *static* members (KIP-345). A static member keeps
  its place across restarts: rejoining with the same instance id and an empty
  member id replaces the old member id instead of adding a member;
- `client_id`, `client_host`: for DescribeGroups;
- `session_timeout_ms`: no heartbeat for this long and the member is removed;
  `rebalance_timeout_ms`: how long the coordinator waits for it to rejoin;
- `protocols`: the (name, metadata) pairs it can use, in order of preference
  (for consumers: one per assignor, metadata = its subscription);
- `assignment`: what the leader gave it in the last completed SyncGroup.

While a JoinGroup or SyncGroup of this member is parked, `join_request` /
`sync_request` hold the caller's handle for that request (so the coordinator
can answer it later). `is_new` is true from its first JoinGroup until that
join completes; new members expire after 5 minutes instead of after a session
timeout, since they cannot heartbeat yet.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_request: Hashable | None = None
    sync_request: Hashable | None = None
    is_new: bool = False
    heartbeat_deadline_ms: int | None = field(default=None)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_request is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_request is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        """This member's metadata for `protocol` (its subscription, for consumers)."""
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same metadata, same order: a rejoin that changes nothing."""
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The first protocol in this member's preference order that every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")
