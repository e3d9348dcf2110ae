"""A classic group's state: its members, generation, protocol, leader and offsets.

Kafka's classes: org.apache.kafka.coordinator.group.classic.ClassicGroup and
ClassicGroupState (the Java coordinator of 3.7+; GroupMetadata and GroupState in
the Scala one of 3.x). The state enum keeps the short name GroupState here.

The group's state machine; every transition not drawn here is a bug, and
`transition_to` refuses it (Kafka: `assertValidTransition`):

    Empty ──a member joins──> PreparingRebalance ──every member rejoined, or the
      ^                          ^     │             rebalance timeout──> CompletingRebalance
      │                          │     └─ the last member left ──> Empty          │
      │      a member joins, leaves, changes its protocols, fails,      leader's SyncGroup
      │      or the leader rejoins  │                                 written to the log
      │                          Stable <──────────────────────────────────────────┘
      └── Dead <── (from any state) the group is deleted, its offsets expired, or
                   its __consumer_offsets partition moved to another broker

    Empty                no members (offsets may remain); the only state that accepts
                         commits without a member id and that DeleteGroups accepts
    PreparingRebalance   waiting for every known member to (re)join
    CompletingRebalance  joins answered; waiting for the leader's assignment (SyncGroup)
    Stable               every member has its assignment for this generation
    Dead                 no longer served here; requests get COORDINATOR_NOT_AVAILABLE

Invariants (checked by tests/unit/test_group_coordinator_state_machine.py):
- `generation_id` only grows, by one per completed join phase;
- in Stable every member holds an assignment from the current generation;
- the leader, when there is one, is a member; a non-empty group outside
  PreparingRebalance has a leader and a selected protocol that every member supports;
- a static member's group.instance.id maps to exactly one member id.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field

from kafkalab.coordinator.group.classic_group_member import ClassicGroupMember
from kafkalab.coordinator.group.coordinator_records import GroupMetadataRecord, OffsetAndMetadata
from kafkalab.protocol.consumer_protocol import PROTOCOL_TYPE, decode_subscription


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:  # DescribeGroups / ListGroups spell states this way
        return self.value


# The allowed transitions, as data: state -> the states it may be entered from
# (Kafka: GroupState.validPreviousStates).
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalGroupTransition(RuntimeError):
    """A coordinator bug: a transition the state machine does not allow."""


TopicPartition = tuple[str, int]


@dataclass
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1  # when the current state was entered (currentStateTimestamp)
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)  # in join order
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # told MEMBER_ID_REQUIRED
    pending_sync_members: set[str] = field(default_factory=set)
    new_member_added: bool = False  # a member joined during the initial delay
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    # appends in flight: partition -> number of commits not yet acknowledged
    pending_offset_commits: dict[TopicPartition, int] = field(default_factory=dict)
    # for each committed offset, the sequence number of the append that wrote it, so
    # that acknowledgements arriving out of order never let an older commit win
    offset_append_seq: dict[TopicPartition, int] = field(default_factory=dict)
    # for each partition whose offset was deleted, the sequence number of the tombstone:
    # a commit written before it and acknowledged after it must not come back
    offset_tombstone_seq: dict[TopicPartition, int] = field(default_factory=dict)
    # TxnOffsetCommit (Kafka: pendingTransactionalOffsetCommits): producer id ->
    # partition -> (offset, append sequence). Invisible to OffsetFetch until the
    # transaction's COMMIT marker makes them committed; its ABORT drops them.
    pending_transactional_offset_commits: dict[
        int, dict[TopicPartition, tuple[OffsetAndMetadata, int]]
    ] = field(default_factory=dict)
    subscribed_topics: set[str] | None = None  # of the current generation
    # the last GroupMetadata record handed out for writing: a record acknowledged
    # after a later one was written is not replayed (the later one carries the group)
    latest_record: GroupMetadataRecord | None = None
    # the last transitions as (time ms, from, to): the path a lab draws on the state machine
    transitions: deque = field(default_factory=lambda: deque(maxlen=100))

    # -- state -----------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalGroupTransition(
                f"group {self.group_id}: {self.state} -> {target} is not a transition of the "
                f"group state machine (allowed into {target}: "
                f"{sorted(str(s) for s in VALID_PREVIOUS_STATES[target])})"
            )
        self.transitions.append((now_ms, self.state, target))
        self.state = target
        self.state_timestamp_ms = now_ms

    # -- offsets ---------------------------------------------------------------------------

    def has_pending_offset_commits_for(self, tp: TopicPartition) -> bool:
        """Kafka: hasPendingOffsetCommitsForTopicPartition. A plain commit not yet
        written, or a transaction's commit not yet ended: an OffsetFetch with
        require_stable answers UNSTABLE_OFFSET_COMMIT for this partition."""
        return tp in self.pending_offset_commits or any(
            tp in pending for pending in self.pending_transactional_offset_commits.values()
        )

    def has_offsets(self) -> bool:
        """Kafka: hasOffsets. Pending transactional offsets keep an Empty group alive."""
        return bool(
            self.offsets or self.pending_offset_commits or self.pending_transactional_offset_commits
        )

    # -- members ---------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> ClassicGroupMember:
        return self.members[member_id]

    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join() == len(self.members) and not self.pending_members

    def not_yet_rejoined_members(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of any member: how long a join phase may last."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def add(self, member: ClassicGroupMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> ClassicGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        self.pending_sync_members.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def current_static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def replace_static_member(
        self, group_instance_id: str, old_id: str, new_id: str
    ) -> ClassicGroupMember:
        """A static member came back with a new member id: same place, new id.
        (Answering the old id's parked requests is the coordinator's job.)"""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_id)
            self.pending_sync_members.add(new_id)
        self.static_members[group_instance_id] = new_id
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        """At the end of a join phase: keep the leader if it rejoined, else pick any
        member that did. False if no member rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    # -- protocols -------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """May a member with these protocols join? An Empty group takes any (non-empty)
        protocol type; otherwise the type must match and at least one protocol must be
        one every current member supports."""
        names = {name for name, _ in protocols}
        if self.is_(GroupState.EMPTY) or not self.members:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol among those all support;
        the most votes win. Kafka breaks ties by HashMap order (unspecified); we break
        them by the name, so that the outcome is deterministic."""
        if not self.members:
            raise IllegalGroupTransition(
                f"cannot select a protocol for empty group {self.group_id}"
            )
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda name: votes[name])

    def compute_subscribed_topics(self) -> set[str] | None:
        """The topics the members of a consumer group read, parsed from their
        subscriptions; None when unknown (not a consumer group, or unparseable).
        Computed once per generation, as Kafka does."""
        if self.protocol_type != PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(decode_subscription(member.metadata(self.protocol_name)).topics)
        except Exception:
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    # -- generations -----------------------------------------------------------------------

    def init_next_generation(self, now_ms: int) -> None:
        """The join phase ends with members: a new generation, its protocol chosen
        by vote. Soft state until the generation's record is written at SyncGroup
        (a generation that ends Empty is its record, replayed: see
        ClassicGroupRebalance.on_complete_join)."""
        self.generation_id += 1
        self.protocol_name = self.select_protocol()  # refuses a group with no member
        self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        self.subscribed_topics = self.compute_subscribed_topics()
        self.pending_sync_members = set()
