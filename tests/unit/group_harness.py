"""A small driver for the sans-IO GroupCoordinator, shared by the group tests:
a clock, deterministic member ids, and a list standing in for __consumer_offsets."""

from __future__ import annotations

import itertools

from kafkalab.coordinator.group import GroupConfig, GroupCoordinator
from kafkalab.coordinator.group.results import CommitOffset, Effects
from kafkalab.protocol.consumer_protocol import Subscription, encode_subscription

SUB = encode_subscription(Subscription(("t",)))


class Harness:
    def __init__(self, partitions=None, **config) -> None:
        config.setdefault("group_initial_rebalance_delay_ms", 0)
        ids = itertools.count(1)
        self.c = GroupCoordinator(
            GroupConfig(**config),
            partitions=partitions,
            member_id_factory=lambda client, instance: f"{instance or client}-{next(ids)}",
        )
        self.log: list[tuple[int, bytes, bytes | None]] = []
        self.now = 0
        self._requests = itertools.count(1)

    def run(self, effects: Effects) -> Effects:
        """Acknowledge every append, as a healthy replicated log would."""
        return self.c.complete_appends(effects, self.now, self.log)

    def request(self, name: str) -> str:
        return f"{name}#{next(self._requests)}"

    def join(
        self,
        group: str,
        member_id: str = "",
        *,
        protocols=(("range", SUB),),
        protocol_type: str = "consumer",
        session: int = 10_000,
        rebalance: int = 30_000,
        instance: str | None = None,
        require_known: bool = True,
        client: str = "c",
        request: str | None = None,
    ) -> Effects:
        return self.run(
            self.c.join_group(
                group,
                member_id,
                protocol_type=protocol_type,
                protocols=list(protocols),
                session_timeout_ms=session,
                rebalance_timeout_ms=rebalance,
                group_instance_id=instance,
                client_id=client,
                require_known_member_id=require_known,
                now_ms=self.now,
                request=request or self.request("join"),
            )
        )

    def join_new(self, group: str, **kw) -> tuple[str, Effects]:
        """A new dynamic member: MEMBER_ID_REQUIRED, then the join with its id."""
        first = self.join(group, **kw).response
        assert first.error.name == "MEMBER_ID_REQUIRED", first
        return first.member_id, self.join(group, first.member_id, **kw)

    def sync(
        self, group, generation, member_id, assignments=None, instance=None, request=None
    ) -> Effects:
        return self.run(
            self.c.sync_group(
                group,
                generation,
                member_id,
                assignments=assignments,
                group_instance_id=instance,
                now_ms=self.now,
                request=request or self.request("sync"),
            )
        )

    def heartbeat(self, group, generation, member_id, instance=None):
        return self.c.heartbeat(
            group, generation, member_id, group_instance_id=instance, now_ms=self.now
        ).response.error

    def commit(self, group, offsets, generation=-1, member_id="", instance=None, **kw) -> Effects:
        return self.run(
            self.c.commit_offsets(
                group,
                {
                    tp: o if isinstance(o, CommitOffset) else CommitOffset(o)
                    for tp, o in offsets.items()
                },
                generation_id=generation,
                member_id=member_id,
                group_instance_id=instance,
                now_ms=self.now,
                **kw,
            )
        )

    def tick(self, to_ms: int) -> Effects:
        self.now = to_ms
        return self.run(self.c.tick(to_ms))

    def stable_group(self, group: str, n: int, **kw) -> list[str]:
        """n dynamic members, joined and synced: a Stable group. Returns member ids."""
        members = []
        for _ in range(n):
            member_id, _ = self.join_new(group, **kw)
            members.append(member_id)
            for other in members[:-1]:  # earlier members rejoin
                self.join(group, other, **kw)
        g = self.c.groups[group]
        assert g.state.value == "CompletingRebalance", g.state
        leader = g.leader_id
        for m in members:
            if m != leader:
                self.sync(group, g.generation_id, m)
        self.sync(group, g.generation_id, leader, {m: m.encode() for m in members})
        assert g.state.value == "Stable"
        return members
