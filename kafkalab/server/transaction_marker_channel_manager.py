"""TransactionMarkerChannelManager: the transaction coordinator's markers, delivered.

Kafka's classes: kafka.coordinator.transaction.TransactionMarkerChannelManager and
TransactionMarkerRequestCompletionHandler. The coordinator's SendTxnMarkers effect
lands here: for each partition of the transaction, a WriteTxnMarkers request to
the partition's leader (looked up in the MetadataCache each round, so a leader
change is followed), over an InterBrokerConnection per broker (this broker's own
partitions too, as Kafka does). Partitions the leader answers NONE are reported to
the coordinator (`markers_written`); the rest (refused, or no answer within
`request_timeout_ms`) are tried again after `retry_backoff_ms`, for as long as the coordinator still wants them
(`markers_pending`: a failover or a newer epoch ends the delivery). A partition
whose topic is gone from the metadata counts as written, as in Kafka.

The coordinator side is a `MarkerCompletion` (the TransactionCoordinatorService,
which owns this channel and runs the coordinator's answer to each report).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from kafkalab.controller.metadata_image import BrokerRegistration
from kafkalab.coordinator.transaction.results import SendTxnMarkers
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import APIS
from kafkalab.server.inter_broker_connection import InterBrokerConnection
from kafkalab.server.metadata_cache import MetadataCache

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]
WRITE_TXN_MARKERS_VERSION = 1


class MarkerCompletion(Protocol):
    """The coordinator, as the channel reports to it (Kafka: the
    TransactionMarkerRequestCompletionHandler's calls into the coordinator)."""

    def markers_pending(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> frozenset[TopicPartition]:
        """The partitions of this transaction still waiting for their marker."""
        ...

    def markers_written(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> None:
        """These partitions have their marker."""
        ...


class TransactionMarkerChannelManager:
    def __init__(
        self,
        metadata_cache: MetadataCache,
        coordinator: MarkerCompletion,
        retry_backoff_ms: int = 100,
        connect: Callable[[str, int], InterBrokerConnection] | None = None,
        request_timeout_ms: int = 30_000,
        listener: str | None = None,
    ) -> None:
        """`listener`: the inter-broker listener, the only one that takes markers."""
        self.listener = listener
        self.metadata_cache = metadata_cache
        self.coordinator = coordinator
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self._connect = connect or (lambda host, port: InterBrokerConnection(host, port, APIS))
        self._connections: dict[tuple[int, str, int], InterBrokerConnection] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, effect: SendTxnMarkers) -> None:
        """Start delivering (the CoordinatorRuntime's effect handler)."""
        if not isinstance(effect, SendTxnMarkers):
            raise TypeError(f"not a SendTxnMarkers effect: {effect!r}")
        task = asyncio.get_running_loop().create_task(self._deliver(effect))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    # -- delivery ---------------------------------------------------------------------------

    def _pending(self, e: SendTxnMarkers) -> frozenset[TopicPartition]:
        return self.coordinator.markers_pending(e.transactional_id, e.producer_id, e.producer_epoch)

    async def _deliver(self, e: SendTxnMarkers) -> None:
        try:
            while True:
                pending = self._pending(e) & e.partitions
                if not pending:
                    return
                written = await self._round(e, pending)
                if written:
                    self.coordinator.markers_written(
                        e.transactional_id, e.producer_id, e.producer_epoch, written
                    )
                if not pending - written:
                    return
                await asyncio.sleep(self.retry_backoff_ms / 1000)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("markers for %s: delivery failed", e.transactional_id)

    async def _round(
        self, e: SendTxnMarkers, pending: frozenset[TopicPartition]
    ) -> set[TopicPartition]:
        """One WriteTxnMarkers to each leader of `pending`; the partitions done."""
        topics = self.metadata_cache.topics()
        brokers = {b.broker_id: b for b in self.metadata_cache.alive_brokers()}
        written: set[TopicPartition] = set()
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in pending:
            info = topics.get(tp[0])
            if info is None or tp[1] not in info.partitions:
                log.info("markers for %s: %s-%d no longer exists", e.transactional_id, *tp)
                written.add(tp)
                continue
            leader = info.partitions[tp[1]].leader
            if leader in brokers:
                by_leader.setdefault(leader, []).append(tp)
        results = await asyncio.gather(
            *(self._send(brokers[b], e, tps) for b, tps in by_leader.items())
        )
        for done in results:
            written |= done
        return written

    async def _send(
        self, broker: BrokerRegistration, e: SendTxnMarkers, tps: list[TopicPartition]
    ) -> set[TopicPartition]:
        host, port = broker.endpoint(self.listener) if self.listener else (broker.host, broker.port)
        key = (broker.broker_id, host, port)
        conn = self._connections.get(key)
        if conn is None:
            conn = self._connections[key] = self._connect(host, port)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(tps):
            by_topic.setdefault(topic, []).append(partition)
        body = {
            "markers": [
                {
                    "producer_id": e.producer_id,
                    "producer_epoch": e.producer_epoch,
                    "transaction_result": e.committed,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
                    "coordinator_epoch": e.coordinator_epoch,
                }
            ]
        }
        try:
            response = await asyncio.wait_for(
                conn.request(ApiKeys.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body),
                self.request_timeout_ms / 1000,
            )
        except (KafkaError, TimeoutError) as err:
            # a hung leader (paused, partitioned) must not hold the markers forever:
            # drop the connection, and the next round asks whoever leads by then
            log.info("markers to broker %d: %s", broker.broker_id, err or "timed out")
            conn.close()
            self._connections.pop(key, None)
            return set()
        done: set[TopicPartition] = set()
        for marker in response["markers"]:
            for topic in marker["topics"]:
                for p in topic["partitions"]:
                    error = Errors(p["error_code"])
                    if error == Errors.NONE:
                        done.add((topic["name"], p["partition_index"]))
                    else:
                        log.info(
                            "marker for %s-%d (%s): %s, retrying",
                            topic["name"],
                            p["partition_index"],
                            e.transactional_id,
                            error.name,
                        )
        return done
