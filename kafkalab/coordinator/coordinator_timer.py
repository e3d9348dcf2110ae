"""CoordinatorTimer: the deadlines of a sans-IO coordinator, kept as data.

Kafka's class: org.apache.kafka.coordinator.common.runtime.CoordinatorTimer.
A coordinator never sleeps: it schedules a deadline under a key that says what
it is for (`("heartbeat", group, member)`, `("timeout", transactional_id)`),
and its caller asks `next_deadline_ms()` when to call `tick(now_ms)` next; the
coordinator then takes every due deadline with `pop_due`, earliest first.

Invariants kept here:
- one deadline per key: scheduling a key again replaces its deadline, and a
  cancelled or replaced deadline never fires (stale heap entries are skipped);
- deadlines due at the same time fire in the order they were scheduled.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable


class CoordinatorTimer:
    def __init__(self) -> None:
        self._deadlines: dict[Hashable, tuple[int, int]] = {}  # key -> (at_ms, sequence)
        self._heap: list[tuple[int, int, Hashable]] = []
        self._sequence = itertools.count()

    def schedule(self, key: Hashable, at_ms: int) -> None:
        """Fire `key` at `at_ms`, instead of any deadline it had."""
        entry = (at_ms, next(self._sequence))
        self._deadlines[key] = entry
        heapq.heappush(self._heap, (*entry, key))

    def cancel(self, key: Hashable) -> None:
        self._deadlines.pop(key, None)

    def clear(self) -> None:
        self._deadlines.clear()
        self._heap.clear()

    def __contains__(self, key: Hashable) -> bool:
        return key in self._deadlines

    def next_deadline_ms(self) -> int | None:
        """When the earliest deadline is due (None: nothing scheduled)."""
        heap = self._heap
        while heap and self._deadlines.get(heap[0][2]) != heap[0][:2]:
            heapq.heappop(heap)  # cancelled or replaced
        return heap[0][0] if heap else None

    def pop_due(self, now_ms: int) -> tuple[int, Hashable] | None:
        """The earliest deadline due at `now_ms` as (at_ms, key), removed; None if none is."""
        at = self.next_deadline_ms()
        if at is None or at > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        del self._deadlines[key]
        return at, key
