"""The sans-IO core both coordinators share: partitions, pending appends, timers.

Kafka's package: org.apache.kafka.coordinator.common.runtime. There one
CoordinatorRuntime drives a CoordinatorShard per partition of the coordinator's
topic (__consumer_offsets, __transaction_state): it loads a partition by replaying
its records into the shard, runs the shard's request handlers, appends the records
a handler returns (a CoordinatorResult: the records and the response) and answers
the request once they are committed, and fires the shard's timers
(CoordinatorTimer). kafkalab splits that class in two:

    kafkalab.coordinator.runtime           this module: what needs no I/O, kept as
                                           data, stepped by hand in notebooks
    kafkalab.server.coordinator_runtime    the broker half: the event loop, the
                                           ReplicaManager appends, reading the log

What lives here, written once for the group and the transaction coordinator:

    CoordinatorShard           the Protocol of a shard: replay(record) and the end
                               of a transaction, the load/unload hooks
    CoordinatorResult          a handler's answer: the response and the records
    CoordinatorState           a partition's state (Kafka's
                               CoordinatorRuntime.CoordinatorState) with its
                               transition table as data (VALID_PREVIOUS_STATES)
    CoordinatorRuntimeCore     the partitions a coordinator serves, its pending
                               appends (keyed by an append id, each of a typed kind),
                               its timers and the handles of requests made without one

The partition rule (Kafka: CoordinatorRuntime.scheduleLoadOperation and
scheduleUnloadOperation): a partition is loaded for one leader epoch. A load that
finishes after the partition was resigned, or after a newer election began a
newer load, is stale and is thrown away: `complete_load` says so by returning
False, and the coordinator must then not apply what it read. Elections and
resignations carry leader epochs, and one older than an epoch already seen is
ignored (answers and metadata arrive out of order).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, cast

from kafkalab.coordinator.coordinator_timer import CoordinatorTimer
from kafkalab.errors import Errors

RecordT = TypeVar("RecordT")
RecordT_contra = TypeVar("RecordT_contra", contravariant=True)
ResponseT = TypeVar("ResponseT")
KindT = TypeVar("KindT", bound=enum.Enum)
PayloadT = TypeVar("PayloadT")
TimerKeyT = TypeVar("TimerKeyT", bound=Hashable)
EffectsT_co = TypeVar("EffectsT_co", covariant=True)
LoadedT_contra = TypeVar("LoadedT_contra", contravariant=True)

_AUTO_REQUESTS = itertools.count(1)  # handles for calls made without one (notebooks, tests)


def request_handle(request: Hashable | None) -> Hashable:
    """The handle a call answers under: the caller's, or a fresh one when it gave none
    (a notebook or a test stepping a coordinator reads the answer off the effects)."""
    return request if request is not None else ("request", next(_AUTO_REQUESTS))


# -- the shard -------------------------------------------------------------------------------


class CoordinatorShard(Protocol[RecordT_contra]):
    """A coordinator's state machine over its topic's records (Kafka: CoordinatorShard).

    Its handlers decide from its state and return a CoordinatorResult; they change
    nothing that a record carries. `replay` applies one record, the same way when
    the handler's records commit and when a partition is loaded from the log, so
    the state after live handling and after a reload cannot differ."""

    def replay(self, record: RecordT_contra) -> None:
        """Apply one record of the coordinator's topic (a tombstone deletes)."""
        ...

    def replay_end_transaction_marker(self, producer_id: int, committed: bool) -> None:
        """A producer's transaction ended here: its records replayed so far count
        (committed) or are dropped (Kafka: replayEndTransactionMarker)."""
        ...

    def on_loaded(self, partition: int, now_ms: int) -> None:
        """The partition's records are all replayed: arm what the log does not carry
        (session timers, markers still to send)."""
        ...

    def on_unloaded(self, partition: int) -> None:
        """The partition is no longer served: forget its state."""
        ...


class Coordinator(Protocol[EffectsT_co, LoadedT_contra]):
    """What the broker's half (kafkalab.server.coordinator_runtime) calls on a
    coordinator: its partitions' leadership, its timers and its appends' outcome."""

    def on_become_leader(self, partition: int, epoch: int = 0) -> EffectsT_co: ...

    def complete_load(
        self, partition: int, records: Iterable[LoadedT_contra], now_ms: int
    ) -> EffectsT_co: ...

    def on_resign(self, partition: int, epoch: int | None = None) -> EffectsT_co: ...

    def append_completed(
        self, append_id: int, error: Errors | int = Errors.NONE, now_ms: int = 0
    ) -> EffectsT_co: ...

    def next_deadline_ms(self) -> int | None: ...

    def tick(self, now_ms: int) -> EffectsT_co: ...

    def shutdown(self) -> EffectsT_co: ...


@dataclass(frozen=True)
class CoordinatorResult(Generic[RecordT, ResponseT]):
    """What a handler returns (Kafka: CoordinatorResult): the records to append and
    the response, given once the records are committed (at once when there are
    none). A handler that answers only later (a parked JoinGroup) has no response."""

    records: tuple[RecordT, ...] = ()
    response: ResponseT | None = None


# -- partitions --------------------------------------------------------------------------------


class CoordinatorState(enum.Enum):
    """A partition of the coordinator's topic, as this broker sees it."""

    INITIAL = "initial"  # never led here
    LOADING = "loading"  # led: its records are being replayed (COORDINATOR_LOAD_IN_PROGRESS)
    ACTIVE = "active"  # loaded: requests are served
    CLOSED = "closed"  # resigned, or the broker stopped (NOT_COORDINATOR)


# the states a partition may come from, per state (Kafka: CoordinatorState.canTransitionFrom)
VALID_PREVIOUS_STATES: dict[CoordinatorState, frozenset[CoordinatorState]] = {
    CoordinatorState.INITIAL: frozenset(),
    CoordinatorState.LOADING: frozenset(
        {CoordinatorState.INITIAL, CoordinatorState.LOADING, CoordinatorState.ACTIVE}
        | {CoordinatorState.CLOSED}
    ),
    CoordinatorState.ACTIVE: frozenset({CoordinatorState.LOADING}),
    CoordinatorState.CLOSED: frozenset(
        {CoordinatorState.INITIAL, CoordinatorState.LOADING, CoordinatorState.ACTIVE}
    ),
}


class IllegalCoordinatorStateTransition(RuntimeError):
    """A partition was moved along an edge VALID_PREVIOUS_STATES does not have: a bug
    in the coordinator, not something a client did."""


@dataclass
class CoordinatorContext:
    """One partition (Kafka: CoordinatorRuntime.CoordinatorContext)."""

    partition: int
    state: CoordinatorState = CoordinatorState.INITIAL
    epoch: int = -1  # the newest leader epoch seen

    def transition_to(self, state: CoordinatorState) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalCoordinatorStateTransition(
                f"partition {self.partition}: {self.state.name} -> {state.name}"
            )
        self.state = state


# -- pending appends ---------------------------------------------------------------------------


@dataclass
class PendingAppend(Generic[KindT, PayloadT]):
    """Records appended for a request, waiting to be committed: what to do then
    depends on `kind` (an enum of the coordinator's) and `payload`."""

    append_id: int
    partition: int
    kind: KindT
    request: Hashable | None
    payload: PayloadT


# -- the core ----------------------------------------------------------------------------------


class CoordinatorRuntimeCore(Generic[KindT, PayloadT, TimerKeyT]):
    """A coordinator's partitions, pending appends and timers (sans-IO).

    Built with the partitions it owns from the start (a notebook's coordinator owns
    them all, ACTIVE at once); a broker's coordinator starts with none and follows
    leadership through `begin_load`, `complete_load` and `resign`."""

    def __init__(self, owned: Iterable[int] = ()) -> None:
        self.contexts: dict[int, CoordinatorContext] = {
            p: CoordinatorContext(p, CoordinatorState.ACTIVE) for p in owned
        }
        self.timer = CoordinatorTimer()
        self.appends: dict[int, PendingAppend[KindT, PayloadT]] = {}
        self.active = True  # False once closed: every key answers COORDINATOR_NOT_AVAILABLE
        self._append_ids = itertools.count(1)

    # -- partitions ----------------------------------------------------------------------------

    def state(self, partition: int) -> CoordinatorState:
        context = self.contexts.get(partition)
        return CoordinatorState.INITIAL if context is None else context.state

    def in_state(self, state: CoordinatorState) -> set[int]:
        return {p for p, c in self.contexts.items() if c.state is state}

    @property
    def owned(self) -> set[int]:
        """The partitions served now."""
        return self.in_state(CoordinatorState.ACTIVE)

    @property
    def loading(self) -> set[int]:
        return self.in_state(CoordinatorState.LOADING)

    def status(self, partition: int) -> Errors | None:
        """The error a request for a key of `partition` gets; None: serve it."""
        if not self.active:
            return Errors.COORDINATOR_NOT_AVAILABLE
        state = self.state(partition)
        if state is CoordinatorState.LOADING:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        if state is not CoordinatorState.ACTIVE:
            return Errors.NOT_COORDINATOR
        return None

    def _context(self, partition: int) -> CoordinatorContext:
        return self.contexts.setdefault(partition, CoordinatorContext(partition))

    def begin_load(self, partition: int, epoch: int) -> bool:
        """This broker now leads `partition` in `epoch`: loading starts (the caller
        drops what it still holds of the partition). False when the epoch is older
        than one seen, or the coordinator is closed: nothing changes."""
        context = self._context(partition)
        if not self.active or epoch < context.epoch:
            return False
        context.epoch = epoch
        context.transition_to(CoordinatorState.LOADING)
        return True

    def complete_load(self, partition: int, epoch: int | None = None) -> bool:
        """The log of `partition` is replayed: serve it. False when the load is stale
        (the partition was resigned or re-elected meanwhile, or `epoch` is not the
        one being loaded): the caller must throw away what it read."""
        context = self.contexts.get(partition)
        if context is None or context.state is not CoordinatorState.LOADING:
            return False
        if epoch is not None and epoch != context.epoch:
            return False
        context.transition_to(CoordinatorState.ACTIVE)
        return True

    def resign(self, partition: int, epoch: int | None = None) -> bool:
        """This broker no longer leads `partition`. False for a stale epoch."""
        context = self._context(partition)
        if epoch is not None and epoch < context.epoch:
            return False
        if epoch is not None:
            context.epoch = epoch
        if context.state is not CoordinatorState.CLOSED:
            context.transition_to(CoordinatorState.CLOSED)
        return True

    def close(self) -> None:
        """The broker stops: nothing is served any more, no timer fires. The appends
        still pending stay: the coordinator answers them (`drop_appends(None)`) or
        lets their completion answer."""
        for context in self.contexts.values():
            if context.state is not CoordinatorState.CLOSED:
                context.transition_to(CoordinatorState.CLOSED)
        self.active = False
        self.timer.clear()

    # -- pending appends -----------------------------------------------------------------------

    def add_append(
        self, kind: KindT, partition: int, request: Hashable | None, payload: PayloadT
    ) -> int:
        """Remember what to do once this append commits; its id, for AppendRecords."""
        append_id = next(self._append_ids)
        self.appends[append_id] = PendingAppend(append_id, partition, kind, request, payload)
        return append_id

    def next_sequence(self) -> int:
        """A number from the append ids' sequence, without an append: the log order of
        records replayed at load, below every later append's."""
        return next(self._append_ids)

    def take_append(self, append_id: int) -> PendingAppend[KindT, PayloadT] | None:
        """The append `append_id` completed: what waited for it (None if nothing did,
        or the partition was unloaded meanwhile)."""
        return self.appends.pop(append_id, None)

    def drop_appends(self, partition: int | None) -> list[PendingAppend[KindT, PayloadT]]:
        """Forget the appends pending in `partition` (None: all), oldest first."""
        dropped = [a for a in self.appends.values() if partition in (None, a.partition)]
        for pending in dropped:
            del self.appends[pending.append_id]
        return dropped

    # -- timers --------------------------------------------------------------------------------

    def schedule(self, key: TimerKeyT, at_ms: int) -> None:
        self.timer.schedule(key, at_ms)

    def schedule_if_absent(self, key: TimerKeyT, at_ms: int) -> None:
        """Arm a periodic task's first deadline while the coordinator is open."""
        if self.active and key not in self.timer:
            self.timer.schedule(key, at_ms)

    def cancel(self, key: TimerKeyT) -> None:
        self.timer.cancel(key)

    def is_scheduled(self, key: TimerKeyT) -> bool:
        return key in self.timer

    def next_deadline_ms(self) -> int | None:
        return self.timer.next_deadline_ms()

    def fire_due(self, now_ms: int, fire: Callable[[TimerKeyT, int], None]) -> None:
        """Call `fire(key, at_ms)` for every deadline due at `now_ms`, earliest first,
        including those a firing schedules and that are due by then."""
        while (due := self.timer.pop_due(now_ms)) is not None:
            at, key = due
            fire(cast(TimerKeyT, key), at)  # the timer holds only keys scheduled here
