"""The purgatory forgets an operation once it completes: a follower's fetch watches
every partition it follows, and on idle partitions nothing else would clear it."""

from __future__ import annotations

from kafkalab.replication.delayed_operation import DelayedOperation, DelayedOperationPurgatory


class ManualTimers:
    def __init__(self) -> None:
        self.pending: list = []

    class Handle:
        def __init__(self, timers, fn) -> None:
            self.timers, self.fn = timers, fn

        def cancel(self) -> None:
            if self in self.timers.pending:
                self.timers.pending.remove(self)

    def __call__(self, delay_s, fn):
        handle = self.Handle(self, fn)
        self.pending.append(handle)
        return handle

    def fire_all(self) -> None:
        for handle in list(self.pending):
            self.pending.remove(handle)
            handle.fn()


class WaitFor(DelayedOperation):
    def __init__(self, ready: set) -> None:
        super().__init__(500)
        self.ready = ready
        self.answered = 0

    def try_complete(self) -> bool:
        return bool(self.ready) and self.force_complete()

    def on_complete(self) -> None:
        self.answered += 1


def test_expired_operations_leave_every_watch_list():
    timers = ManualTimers()
    purgatory = DelayedOperationPurgatory("Fetch", timers)
    keys = [("t", p) for p in range(300)]
    ops = [WaitFor(set()) for _ in range(20)]  # twenty idle long polls
    for op in ops:
        assert not purgatory.try_complete_else_watch(op, keys)
    assert purgatory.watch_entries() == 20 * 300
    timers.fire_all()
    assert all(op.answered == 1 for op in ops)
    assert purgatory.watch_entries() == 0 and purgatory.watched() == 0


def test_an_operation_completed_on_one_key_leaves_the_others():
    timers = ManualTimers()
    purgatory = DelayedOperationPurgatory("Fetch", timers)
    ready: set = set()
    op = WaitFor(ready)
    other = WaitFor(set())
    purgatory.try_complete_else_watch(op, ["a", "b", "c"])
    purgatory.try_complete_else_watch(other, ["b"])
    ready.add("a")
    assert purgatory.check_and_complete("a") == 1
    assert op.answered == 1 and len(timers.pending) == 1  # its timer is cancelled
    assert purgatory.watch_entries() == 1  # only `other`, under "b"
    timers.fire_all()
    assert op.answered == 1 and other.answered == 1  # each answered exactly once
    assert purgatory.watch_entries() == 0
