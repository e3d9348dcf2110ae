"""The group coordinator driven by hypothesis: clients (two dynamic, two static) join,
sync, heartbeat, commit, leave, crash and restart while time passes and the
coordinator fails over to a new one built from its log. After every step:

- the group moves only along the state machine (ClassicGroup.transition_to raises
  otherwise), and its generation only grows
  (across a failover it is the last generation written to the log: a generation
  whose SyncGroup was never written is forgotten, as in Kafka);
- in Stable every member holds the assignment its leader made in this generation;
- the leader is a member; outside PreparingRebalance every member supports the
  selected protocol; static instance ids map one to one to members;
- no member can stay silent for ever: each one has a session deadline in the
  future, or waits in a rebalance (whose own deadline removes it);
- every committed offset (answered NONE) is what OffsetFetch returns;
- every parked request is answered exactly once (or is still waiting).
"""

from __future__ import annotations

import itertools
import os

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kafkalab.coordinator.group import GroupConfig, GroupCoordinator, GroupState
from kafkalab.coordinator.group.coordinator_records import GroupKey, read_group_value, read_key
from kafkalab.coordinator.group.coordinator_records import partition_for as partition_of
from kafkalab.coordinator.group.results import CommitOffset, Effects, Respond
from kafkalab.errors import Errors

GROUP = "g"
SESSION = 10_000
REBALANCE = 15_000
CLIENTS = (0, 1, 2, 3)
INSTANCE = {0: None, 1: None, 2: "s2", 3: "s3"}


class Client:
    def __init__(self, i: int) -> None:
        self.i = i
        self.instance = INSTANCE[i]
        self.reset()

    def reset(self) -> None:
        self.member_id = ""
        self.generation = -1
        self.join_result = None  # the last successful JoinGroup answer
        self.synced_generation = -1
        self.join_pending: str | None = None
        self.sync_pending: str | None = None

    def key(self) -> str:
        return self.instance or self.member_id


class GroupMachine(RuleBasedStateMachine):
    @initialize(delay=st.sampled_from([0, 3000]))
    def start(self, delay):
        self.config = GroupConfig(group_initial_rebalance_delay_ms=delay)
        ids = itertools.count(1)
        self.member_ids = lambda client, instance: f"{instance or client}-{next(ids)}"
        self.c = GroupCoordinator(self.config, member_id_factory=self.member_ids)
        self.now = 0
        self.log: list[tuple[int, bytes, bytes | None]] = []
        self.clients = {i: Client(i) for i in CLIENTS}
        self.outstanding: dict[str, Client | None] = {}  # handle -> client (None: crashed)
        self.answered: set[str] = set()
        self.committed: dict[tuple[str, int], int] = {}
        self.max_generation = 0
        self.requests = itertools.count(1)

    # -- plumbing ----------------------------------------------------------------------------

    def handle(self, name: str) -> str:
        return f"{name}-{next(self.requests)}"

    def apply(self, effects: Effects) -> Effects:
        effects = self.c.complete_appends(effects, self.now, self.log)
        for e in effects:
            if isinstance(e, Respond):
                self.deliver(e.request, e.result)
        return effects

    def deliver(self, request, result) -> None:
        assert request not in self.answered, f"{request} answered twice"
        self.answered.add(request)
        if request not in self.outstanding:
            return  # an immediate answer to a call made in this step
        client = self.outstanding.pop(request)
        if client is None:
            return  # that client crashed; the answer goes nowhere
        if client.join_pending == request:
            client.join_pending = None
            self.on_join_answer(client, result)
        elif client.sync_pending == request:
            client.sync_pending = None
            self.on_sync_answer(client, result)

    def on_join_answer(self, client: Client, r) -> None:
        if r.error == Errors.MEMBER_ID_REQUIRED:
            client.member_id = r.member_id
        elif r.error == Errors.NONE:
            client.member_id = r.member_id
            client.generation = r.generation_id
            client.join_result = r
        elif r.error in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID):
            client.reset()

    def on_sync_answer(self, client: Client, r) -> None:
        if r.error == Errors.NONE:
            client.synced_generation = client.generation
        elif r.error in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID):
            client.reset()

    def group(self):
        return self.c.groups.get(GROUP)

    # -- rules -------------------------------------------------------------------------------

    @rule(i=st.sampled_from(CLIENTS), meta=st.sampled_from([b"v1", b"v2"]))
    def join(self, i, meta):
        client = self.clients[i]
        if client.join_pending is not None:
            return
        request = self.handle(f"join{i}")
        self.outstanding[request] = client
        client.join_pending = request
        self.apply(
            self.c.join_group(
                GROUP,
                client.member_id,
                protocol_type="consumer",
                protocols=[("range", meta)],
                session_timeout_ms=SESSION,
                rebalance_timeout_ms=REBALANCE,
                group_instance_id=client.instance,
                client_id=f"c{i}",
                now_ms=self.now,
                request=request,
            )
        )

    @rule(i=st.sampled_from(CLIENTS))
    def sync(self, i):
        client = self.clients[i]
        r = client.join_result
        if (
            r is None
            or client.sync_pending is not None
            or client.member_id != r.member_id
            or client.synced_generation == r.generation_id
        ):
            return
        assignments = None
        if r.leader_id == client.member_id:
            assignments = {
                m.member_id: f"{r.generation_id}:{m.group_instance_id or m.member_id}".encode()
                for m in r.members
            }
        request = self.handle(f"sync{i}")
        self.outstanding[request] = client
        client.sync_pending = request
        self.apply(
            self.c.sync_group(
                GROUP,
                r.generation_id,
                client.member_id,
                assignments=assignments,
                group_instance_id=client.instance,
                now_ms=self.now,
                request=request,
            )
        )

    @rule()
    def everyone_joins(self):
        """Well-behaved clients: all (re)join together, as after REBALANCE_IN_PROGRESS."""
        for i in CLIENTS:
            self.join(i, b"v1")
        for i in CLIENTS:  # new dynamic members come back with their id
            if self.clients[i].join_pending is None and self.clients[i].join_result is None:
                self.join(i, b"v1")

    @rule(leader_last=st.booleans())
    def everyone_syncs(self, leader_last):
        order = sorted(
            CLIENTS,
            key=lambda i: (
                (
                    self.clients[i].join_result is not None
                    and self.clients[i].join_result.leader_id == self.clients[i].member_id
                )
                == leader_last
            ),
        )
        for i in order:
            self.sync(i)

    @rule(i=st.sampled_from(CLIENTS))
    def heartbeat(self, i):
        client = self.clients[i]
        if not client.member_id:
            return
        e = self.apply(
            self.c.heartbeat(
                GROUP,
                client.generation,
                client.member_id,
                group_instance_id=client.instance,
                now_ms=self.now,
            )
        )
        if e.response.error in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID):
            client.reset()

    @rule(i=st.sampled_from(CLIENTS), partition=st.integers(0, 2), offset=st.integers(0, 10**6))
    def commit(self, i, partition, offset):
        client = self.clients[i]
        e = self.apply(
            self.c.commit_offsets(
                GROUP,
                {("t", partition): CommitOffset(offset)},
                generation_id=client.generation if client.member_id else -1,
                member_id=client.member_id,
                group_instance_id=client.instance if client.member_id else None,
                now_ms=self.now,
            )
        )
        if e.response.partitions[("t", partition)] == Errors.NONE:
            self.committed[("t", partition)] = offset

    @rule(i=st.sampled_from(CLIENTS))
    def leave(self, i):
        client = self.clients[i]
        if not client.member_id:
            return
        self.apply(
            self.c.leave_group(GROUP, [(client.member_id, client.instance)], now_ms=self.now)
        )
        self.crash(i)

    @rule(i=st.sampled_from(CLIENTS))
    def crash(self, i):
        """The client process dies: it stops talking; a restart starts from scratch."""
        client = self.clients[i]
        for request in (client.join_pending, client.sync_pending):
            if request is not None:
                self.outstanding[request] = None
        client.reset()

    @rule(ms=st.one_of(st.integers(1, 3000), st.integers(3000, 12_000)))
    def time_passes(self, ms):
        self.now += ms
        self.apply(self.c.tick(self.now))

    @precondition(lambda self: self.log)
    @rule()
    def failover(self):
        """The coordinator's broker dies; another loads the partition from the log."""
        p = partition_of(GROUP, self.config.offsets_topic_num_partitions)
        event(f"failover in {self.group().state if self.group() else None}")
        for e in self.c.on_resign(p):
            if isinstance(e, Respond):
                self.deliver(e.request, e.result)
        assert not [r for r, c in self.outstanding.items() if c is not None], "lost requests"
        self.outstanding.clear()
        self.c = GroupCoordinator(self.config, partitions=[], member_id_factory=self.member_ids)
        self.c.on_become_leader(p, epoch=1)
        self.apply(self.c.complete_load(p, [(k, v) for q, k, v in self.log if q == p], self.now))
        written = [
            read_group_value(v) for q, k, v in self.log if v and read_key(k) == GroupKey(GROUP)
        ]
        group = self.group()
        if written and group is not None:
            assert group.generation_id == written[-1].generation
            self.max_generation = group.generation_id
        elif group is not None:
            self.max_generation = group.generation_id

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def generation_only_grows(self):
        group = self.group()
        if group is None:
            return
        assert group.generation_id >= self.max_generation
        self.max_generation = group.generation_id
        event(f"state {group.state}")
        event(f"generation {min(group.generation_id, 5)}{'+' if group.generation_id >= 5 else ''}")

    @invariant()
    def stable_members_hold_this_generations_assignment(self):
        group = self.group()
        if group is None or group.state is not GroupState.STABLE:
            return
        for m in group.members.values():
            assert (
                m.assignment
                == f"{group.generation_id}:{m.group_instance_id or m.member_id}".encode()
            )

    @invariant()
    def leader_protocol_and_static_members_are_consistent(self):
        group = self.group()
        if group is None:
            return
        assert (group.leader_id is None) == (not group.members)
        if group.leader_id is not None:
            assert group.leader_id in group.members
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            assert all(group.protocol_name in m.protocol_names() for m in group.members.values())
        statics = {m.group_instance_id: mid for mid, m in group.members.items() if m.is_static}
        assert statics == group.static_members

    @invariant()
    def nobody_stays_silent_for_ever(self):
        group = self.group()
        if group is None:
            return
        for m in group.members.values():
            waiting = (
                m.is_awaiting_join
                or m.is_awaiting_sync
                or group.state is GroupState.PREPARING_REBALANCE
            )
            if not waiting:
                assert m.heartbeat_deadline_ms is not None and m.heartbeat_deadline_ms > self.now

    @invariant()
    def committed_offsets_are_readable(self):
        fetched = self.c.fetch_offsets(GROUP, list(self.committed)).partitions
        assert {tp: fetched[tp].offset for tp in self.committed} == self.committed

    @invariant()
    def parked_requests_are_the_outstanding_ones(self):
        group = self.group()
        parked = set()
        if group is not None:
            for m in group.members.values():
                parked |= {r for r in (m.join_request, m.sync_request) if r is not None}
        assert parked == set(self.outstanding)


GroupMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("GROUP_SM_EXAMPLES", 200)),  # more: a longer hunt
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_group_coordinator_state_machine = GroupMachine.TestCase
