"""AlterPartitionManager: a leader's ISR changes, sent to the controller.

Kafka's class: kafka.server.AlterPartitionManager (KIP-497). A leader never
changes its ISR by itself: Partition proposes (a follower caught up, or one
fell behind for `replica.lag.time.max.ms`), this sends the proposal as an
AlterPartition request with the leader and partition epochs it was made in,
and the controller's answer is applied: the committed ISR, or a refusal
(a stale epoch: the leader's metadata will bring the current state) that
drops the pending proposal.

Proposals are batched as Kafka batches them: one request in flight, and every
proposal made meanwhile goes in the next request. After a fenced broker comes
back, its leaders propose it back into hundreds of ISRs at once: one request
(and one metadata log write at the controller) instead of hundreds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.replication.partition import IsrChange
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.inter_broker_connection import InterBrokerConnection

log = logging.getLogger(__name__)


class AlterPartitionManager:
    def __init__(
        self,
        broker_id: int,
        controller: InterBrokerConnection,
        broker_epoch: Callable[[], int],
        replica_manager: ReplicaManager,
    ) -> None:
        self.broker_id = broker_id
        self.controller = controller
        self.broker_epoch = broker_epoch
        self.replica_manager = replica_manager
        self._unsent: dict[tuple[str, int], IsrChange] = {}
        self._sender: asyncio.Task | None = None
        self.requests_sent = 0  # for tests and the labs

    def submit(self, change: IsrChange) -> None:
        """Queue the proposal; it goes with every other queued one in the next
        AlterPartition request (ReplicaManager calls this)."""
        log.info(
            "%s-%d: proposing ISR %s (leader epoch %d)",
            change.topic,
            change.partition,
            change.new_isr,
            change.leader_epoch,
        )
        self._unsent[(change.topic, change.partition)] = change
        if self._sender is None or self._sender.done():
            self._sender = asyncio.ensure_future(self._send_unsent())

    async def _send_unsent(self) -> None:
        """One request in flight at a time; what was proposed meanwhile goes in the
        next one (Kafka: unsentIsrUpdates, sent when no request is in flight)."""
        while self._unsent:
            changes, self._unsent = list(self._unsent.values()), {}
            await self.send(*changes)

    async def send(self, *changes: IsrChange) -> None:
        """Send these proposals in one AlterPartition request and apply the answers."""
        topics: dict[str, list[dict]] = {}
        for change in changes:
            topics.setdefault(change.topic, []).append(
                {
                    "partition_index": change.partition,
                    "leader_epoch": change.leader_epoch,
                    "new_isr": change.new_isr,
                    "partition_epoch": change.partition_epoch,
                }
            )
        answers: dict[tuple[str, int], dict] = {}
        try:
            self.requests_sent += 1
            response = await self.controller.request(
                ApiKeys.ALTER_PARTITION,
                0,
                {
                    "broker_id": self.broker_id,
                    "broker_epoch": self.broker_epoch(),
                    "topics": [{"topic_name": t, "partitions": ps} for t, ps in topics.items()],
                },
            )
            for t in response["topics"]:
                for p in t["partitions"]:
                    answers[(t["topic_name"], p["partition_index"])] = p
            # a partition the answer leaves out was not changed
            error = {"error_code": int(response["error_code"] or Errors.UNKNOWN_SERVER_ERROR)}
        except KafkaError as e:
            error = {"error_code": int(e.code)}
        for change in changes:
            tp = (change.topic, change.partition)
            self._apply(tp, answers.get(tp, error))

    def _apply(self, tp: tuple[str, int], p: dict) -> None:
        part = self.replica_manager.partition(tp)
        if part is None:
            return
        if p["error_code"] == 0:
            if not self.replica_manager.apply_isr_change(tp, p["isr"], p["partition_epoch"]):
                log.info(
                    "%s-%d: AlterPartition answered ISR %s in partition epoch %d, older "
                    "than the metadata's %d: ignored",
                    *tp,
                    p["isr"],
                    p["partition_epoch"],
                    part.partition_epoch,
                )
        else:
            log.info("%s-%d: AlterPartition refused: %s", *tp, Errors(p["error_code"]).name)
            part.reject_isr_change()
            self.replica_manager.note_changed(tp)
