"""AlterPartitionManager: a leader's ISR changes, sent to the controller.

Kafka's class: kafka.server.AlterPartitionManager (KIP-497). A leader never
changes its ISR by itself: Partition proposes (a follower caught up, or one
fell behind for `replica.lag.time.max.ms`), this sends the proposal as an
AlterPartition request with the leader and partition epochs it was made in,
and the controller's answer is applied: the committed ISR, or a refusal
(a stale epoch: the leader's metadata will bring the current state) that
drops the pending proposal.
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

    def submit(self, change: IsrChange) -> None:
        """Send the proposal in the background (ReplicaManager calls this)."""
        log.info(
            "%s-%d: proposing ISR %s (leader epoch %d)",
            change.topic,
            change.partition,
            change.new_isr,
            change.leader_epoch,
        )
        asyncio.ensure_future(self.send(change))

    async def send(self, change: IsrChange) -> None:
        tp = (change.topic, change.partition)
        try:
            response = await self.controller.request(
                ApiKeys.ALTER_PARTITION,
                0,
                {
                    "broker_id": self.broker_id,
                    "broker_epoch": self.broker_epoch(),
                    "topics": [
                        {
                            "topic_name": change.topic,
                            "partitions": [
                                {
                                    "partition_index": change.partition,
                                    "leader_epoch": change.leader_epoch,
                                    "new_isr": change.new_isr,
                                    "partition_epoch": change.partition_epoch,
                                }
                            ],
                        }
                    ],
                },
            )
            p = response["topics"][0]["partitions"][0]
        except KafkaError as e:
            p = {"error_code": int(e.code)}
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
