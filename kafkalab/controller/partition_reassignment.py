"""Partition reassignment as the controller works it out (KIP-455), sans-IO and pure.

Kafka's classes: org.apache.kafka.controller.PartitionReassignmentReplicas,
PartitionReassignmentRevert and PartitionChangeBuilder's completeReassignmentIfNeeded.
A reassignment moves a partition from its current replicas to a target list in
three steps, each one PartitionChangeRecord in the metadata log:

    start      replicas = target + (current not in target), adding = target not in
               current, removing = current not in target; the ISR is unchanged. The
               adding brokers start a follower, fetch, and their leader asks for them
               in the ISR (AlterPartition) once they have caught up.
    complete   once every adding replica is in the ISR: replicas = target, the ISR
               without the removing ones, adding and removing cleared; a removed leader
               gives way to the first target replica in the ISR, and the leader epoch
               goes up whenever a replica leaves (so the removed one is fenced).
    cancel     (target null, `revert`): back to the replicas before it began: the
               adding ones leave replicas and ISR.

Because every step is a record, a reassignment survives a controller restart:
replaying the log brings adding and removing back.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalab.errors import Errors, KafkaError


@dataclass(frozen=True)
class PartitionReassignmentReplicas:
    """The replicas of a partition while it moves from `current` to `target`."""

    replicas: list[int]
    adding: list[int]
    removing: list[int]

    @classmethod
    def of(cls, current: list[int], target: list[int]) -> PartitionReassignmentReplicas:
        removing = [r for r in current if r not in target]
        adding = [r for r in target if r not in current]
        return cls(list(target) + removing, adding, removing)

    def in_progress(self) -> bool:
        return bool(self.adding or self.removing)

    def completed(self, isr: list[int]) -> tuple[list[int], list[int]] | None:
        """(replicas, ISR) once the reassignment is done with this ISR, else None: done
        when every adding replica is in the ISR and the ISR keeps a member once the
        removing ones are gone (Kafka: maybeCompleteReassignment)."""
        if not self.in_progress():
            return None
        new_isr = [r for r in isr if r not in self.removing]
        if not new_isr or any(r not in new_isr for r in self.adding):
            return None
        return [r for r in self.replicas if r not in self.removing], new_isr


def revert(replicas: list[int], isr: list[int], adding: list[int]) -> tuple[list[int], list[int]]:
    """(replicas, ISR) of a cancelled reassignment: the adding replicas leave both
    (Kafka: PartitionReassignmentRevert). An empty ISR afterwards (every in-sync
    replica was an adding one) is the caller's to refuse: it would take an unclean
    election."""
    return [r for r in replicas if r not in adding], [r for r in isr if r not in adding]


def validate_target(target: list[int], registered: set[int]) -> None:
    """Kafka's validateManualPartitionAssignment, with its messages:
    INVALID_REPLICA_ASSIGNMENT for an empty list, a broker named twice, a broker
    that is not registered."""
    if not target:
        raise KafkaError(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    seen: set[int] = set()
    for r in target:
        if r in seen:
            raise KafkaError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {r} more than once.",
            )
        seen.add(r)
        if r not in registered:
            raise KafkaError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {r}, but no such broker "
                "is registered.",
            )
