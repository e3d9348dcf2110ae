"""CoordinatorPartitions: which partitions of its topic a coordinator serves.

Kafka's counterpart: the per-partition state of
org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime (LOADING, ACTIVE,
CLOSED), shared by the group and the transaction coordinator. A key (a group
id, a transactional id) belongs to one partition of the coordinator's topic
(__consumer_offsets, __transaction_state); the coordinator serves it only while
this broker leads that partition and has loaded it.

Invariants kept here:
- a partition is in at most one of `loading` and `owned`;
- leadership changes carry the partition's leader epoch, and one older than an
  epoch already seen is ignored (answers and metadata arrive out of order);
- after `close` every key answers COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkalab.errors import Errors


class CoordinatorPartitions:
    def __init__(self, partitions: Iterable[int]) -> None:
        self.owned: set[int] = set(partitions)  # loaded: requests are served
        self.loading: set[int] = set()  # led, being loaded from the log
        self.epochs: dict[int, int] = {}  # the newest leader epoch seen per partition
        self.active = True

    def status(self, partition: int) -> Errors | None:
        """The error a request for a key of `partition` gets; None: serve it."""
        if not self.active:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if partition in self.loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return Errors.NOT_COORDINATOR
        return None

    def begin_load(self, partition: int, epoch: int) -> bool:
        """This broker now leads `partition` in `epoch`: loading starts. False when
        the epoch is older than one seen (a stale election: nothing changes)."""
        if epoch < self.epochs.get(partition, -1):
            return False
        self.epochs[partition] = epoch
        self.owned.discard(partition)
        self.loading.add(partition)
        return True

    def finish_load(self, partition: int) -> None:
        """The log of `partition` is replayed: serve it."""
        self.loading.discard(partition)
        self.owned.add(partition)

    def resign(self, partition: int, epoch: int | None = None) -> bool:
        """This broker no longer leads `partition`. False for a stale epoch."""
        if epoch is not None and epoch < self.epochs.get(partition, -1):
            return False
        if epoch is not None:
            self.epochs[partition] = epoch
        self.owned.discard(partition)
        self.loading.discard(partition)
        return True

    def close(self) -> None:
        """The broker stops: nothing is served any more."""
        self.owned.clear()
        self.loading.clear()
        self.active = False
