"""Delayed operations and their purgatory: requests that wait for something to happen.

Kafka's classes: kafka.server.DelayedOperation and DelayedOperationPurgatory. A
fetch with `min_bytes` not yet available (or a produce with acks=all waiting
for followers) is parked in a purgatory, watched under keys such as a
topic-partition. Whoever changes the state (an append, a high watermark
move) calls `check_and_complete(key)`; each watching operation then tries to
complete. An operation that never completes expires after its delay and
completes anyway (`on_expiration`, then `on_complete`). No polling loop runs.

Invariant: `on_complete` runs exactly once per operation, whichever of
"completed by an event" and "expired" comes first.

Timers come from the owner (the broker's event loop): `schedule(delay_s, fn)`
returns something with `.cancel()`, like `loop.call_later`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from typing import Any


class DelayedOperation:
    """Subclasses define `try_complete` (check; call force_complete when done),
    `on_complete` and optionally `on_expiration`."""

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self.completed = False
        self._timer: Any = None

    def force_complete(self) -> bool:
        """Complete now if nobody did yet. Returns True if this call completed it."""
        if self.completed:
            return False
        self.completed = True
        if self._timer is not None:
            self._timer.cancel()
        self.on_complete()
        return True

    def try_complete(self) -> bool:
        raise NotImplementedError

    def try_complete_on(self, key: Hashable) -> bool:
        """Something happened on `key` (one of the keys it watches): try again. An
        operation watching many keys may look at that one only."""
        return self.try_complete()

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called before on_complete when the delay ran out."""

    def _expire(self) -> None:
        if not self.completed:
            self.on_expiration()
            self.force_complete()


class DelayedOperationPurgatory:
    """Operations watched under keys until an event completes them or they expire.

    An operation leaves the watch lists of all its keys once it completes, by an
    event on any one key or by expiring (Kafka purges completed operations from
    its watch lists in the same spirit, every `purgeInterval` completions): a
    follower's fetch watches every partition it follows, and on an idle
    partition no event would ever come to clear it, so each expired fetch
    would stay in memory for good."""

    def __init__(self, name: str, schedule: Callable[[float, Callable[[], None]], Any]) -> None:
        self.name = name
        self._schedule = schedule
        # key -> the operations watching it (a dict keyed by id: insertion order, O(1) removal)
        self._watchers: dict[Hashable, dict[int, DelayedOperation]] = defaultdict(dict)
        self._keys: dict[int, list[Hashable]] = {}  # id(op) -> the keys it watches

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete `op` at once if it can; otherwise watch it under `keys` and start
        its expiry timer. Returns True when it completed at once."""
        if op.try_complete():
            return True
        keys = list(keys)
        for key in keys:
            self._watchers[key][id(op)] = op
        self._keys[id(op)] = keys
        # Kafka checks again after watching: an event may have come in between.
        if op.try_complete():
            self._unwatch(op)
            return True
        op._timer = self._schedule(op.delay_ms / 1000, lambda: self._expire(op))
        return False

    def _expire(self, op: DelayedOperation) -> None:
        op._expire()
        self._unwatch(op)

    def _unwatch(self, op: DelayedOperation) -> None:
        for key in self._keys.pop(id(op), ()):
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.pop(id(op), None)
                if not watchers:
                    del self._watchers[key]

    def check_and_complete(self, key: Hashable) -> int:
        """An event happened on `key`: let each watcher try. Returns how many completed."""
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        done = 0
        for op in list(watchers.values()):
            if op.completed:
                self._unwatch(op)
            elif op.try_complete_on(key):
                done += 1
                self._unwatch(op)
        return done

    def watched(self) -> int:
        """How many operations are waiting (for tests and the labs)."""
        return len(
            {id(op) for ops in self._watchers.values() for op in ops.values() if not op.completed}
        )

    def watch_entries(self) -> int:
        """How many (key, operation) watch entries are held, completed ones included:
        what the purgatory costs in memory."""
        return sum(len(ops) for ops in self._watchers.values())

    def shutdown(self) -> None:
        """Complete every waiting operation now (the broker is stopping)."""
        for ops in list(self._watchers.values()):
            for op in list(ops.values()):
                op.force_complete()
        self._watchers.clear()
        self._keys.clear()
