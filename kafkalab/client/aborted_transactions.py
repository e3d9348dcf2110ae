"""read_committed on the consumer: dropping the records of aborted transactions.

Kafka's class: the consumer's CompletedFetch (abortedProducerIds,
abortedTransactions). A read_committed Fetch (isolation_level 1) returns data up
to the last stable offset, so every transaction in it has ended, plus the
`aborted_transactions` that overlap it: (producer id, first offset) of each
aborted transaction. Walking the batches in offset order:

- a batch with a producer id first "opens" every aborted transaction of the list
  whose first offset is at or before the batch's last offset: its producer is
  now known to be aborting;
- a transactional data batch of such a producer is dropped;
- the producer's ABORT marker (a control batch) closes it again, so its later
  transactions are kept;
- control batches (COMMIT and ABORT markers) are never returned.

Non-transactional batches are always kept: they belong to no transaction.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from kafkalab.records.control_record import ControlRecordType, control_record_type


class AbortedTransactions:
    """Which batches of one partition's fetched data a read_committed consumer keeps."""

    def __init__(self, aborted: Iterable[tuple[int, int]] = ()) -> None:
        """`aborted`: (producer id, first offset) pairs, from the Fetch response."""
        self._queue = [(first_offset, producer_id) for producer_id, first_offset in aborted]
        heapq.heapify(self._queue)
        self.aborting: set[int] = set()  # producers whose aborted transaction is open here

    @classmethod
    def from_response(cls, partition: dict) -> AbortedTransactions:
        """From a Fetch response partition (`aborted_transactions` may be null)."""
        return cls(
            (a["producer_id"], a["first_offset"])
            for a in partition.get("aborted_transactions") or ()
        )

    def keep(self, batch) -> bool:
        """Should this batch's records reach the application? Call in offset order."""
        h = batch.header
        if h.producer_id >= 0:
            while self._queue and self._queue[0][0] <= h.last_offset:
                self.aborting.add(heapq.heappop(self._queue)[1])
        if h.is_control_batch:
            if h.producer_id in self.aborting and self._is_abort_marker(batch):
                self.aborting.discard(h.producer_id)
            return False
        return not (h.is_transactional and h.producer_id in self.aborting)

    @staticmethod
    def _is_abort_marker(batch) -> bool:
        for record in batch.records:
            return control_record_type(record) is ControlRecordType.ABORT
        return False
