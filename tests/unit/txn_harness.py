"""A stand-in for the broker around the sans-IO TransactionCoordinator: appends go
to in-memory partition logs once "committed", markers are remembered, and a
failover builds a new coordinator from those logs."""

from __future__ import annotations

import itertools

from kafkalab.coordinator.group.results import AppendRecords, Effects, Respond
from kafkalab.coordinator.transaction import (
    SendTxnMarkers,
    TransactionConfig,
    TransactionCoordinator,
)
from kafkalab.errors import Errors


class TxnHarness:
    def __init__(self, config: TransactionConfig | None = None, now_ms: int = 1_000_000) -> None:
        self.config = config or TransactionConfig(transaction_state_log_num_partitions=3)
        self.now = now_ms
        self.logs: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.pids = itertools.count(5000)
        self.coordinator = self._new()
        self.appends: list[AppendRecords] = []  # asked for, not yet completed
        self.markers: list[SendTxnMarkers] = []
        self.answers: dict = {}
        self.requests = itertools.count(1)

    def _new(self) -> TransactionCoordinator:
        return TransactionCoordinator(self.config, producer_ids=lambda: next(self.pids))

    def run(self, effects: Effects) -> Effects:
        for e in effects:
            if isinstance(e, Respond):
                self.answers[e.request] = e.result
            elif isinstance(e, AppendRecords):
                self.appends.append(e)
            elif isinstance(e, SendTxnMarkers):
                self.markers.append(e)
        return effects

    def call(self, name: str, *args, **kw):
        """Call, complete every append it asked for, answer."""
        request = ("r", next(self.requests))
        self.run(getattr(self.coordinator, name)(*args, now_ms=self.now, request=request, **kw))
        self.complete_appends()
        return self.answers.pop(request, None)

    def call_pending(self, name: str, *args, **kw):
        """Call without completing its appends: (request handle, effects)."""
        request = ("r", next(self.requests))
        effects = self.run(
            getattr(self.coordinator, name)(*args, now_ms=self.now, request=request, **kw)
        )
        return request, effects

    def complete_appends(self, error: Errors = Errors.NONE) -> None:
        while self.appends:
            a = self.appends.pop(0)
            if error == Errors.NONE:
                self.logs.setdefault(a.partition, []).extend(a.records)
            if a.append_id is not None:
                self.run(self.coordinator.append_completed(a.append_id, error, self.now))

    def write_markers(self) -> None:
        """Every marker asked for is written (the marker channel's job)."""
        while self.markers:
            m = self.markers.pop(0)
            self.run(
                self.coordinator.markers_written(
                    m.transactional_id, m.producer_id, m.producer_epoch, m.partitions, self.now
                )
            )
            self.complete_appends()

    def advance(self, ms: int) -> None:
        self.now += ms
        self.run(self.coordinator.tick(self.now))
        self.complete_appends()

    def failover(self, epoch: int = 1) -> None:
        """The coordinator's broker dies; another loads every partition from the logs
        (appends not completed are lost, and so are markers not sent)."""
        self.appends.clear()
        self.markers.clear()
        self.coordinator = TransactionCoordinator(
            self.config, partitions=(), producer_ids=lambda: next(self.pids)
        )
        for p in range(self.config.transaction_state_log_num_partitions):
            self.run(self.coordinator.on_become_leader(p, epoch))
            self.run(self.coordinator.complete_load(p, list(self.logs.get(p, [])), self.now))

    def state(self, tid: str):
        return self.coordinator.transactions[tid].state
