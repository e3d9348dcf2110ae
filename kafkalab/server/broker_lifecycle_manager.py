"""BrokerLifecycleManager: a broker's registration with the controller and its heartbeats.

Kafka's class: kafka.server.BrokerLifecycleManager (KIP-631). The broker
registers (BrokerRegistration) and gets a broker epoch; then it heartbeats
every `broker.heartbeat.interval.ms` (BrokerHeartbeat). The controller keeps
it fenced until its first heartbeat, and fences it again when heartbeats stop
for `broker.session.timeout.ms`. A controller that forgot us answers
STALE_BROKER_EPOCH: we register again. Stopping sends a last heartbeat that
asks to be fenced and shut down, so the controller moves our leaderships at
once instead of after the session timeout.

A graceful stop is a controlled shutdown (Kafka: the broker's
`controlled.shutdown` through its heartbeats, KIP-631): the broker asks to shut
down while it still serves, the controller fences it and elects other leaders
for its partitions, and the broker goes only once its metadata listener has
applied that (its partitions answer NOT_LEADER_OR_FOLLOWER by then, and clients
move to the new leaders) or after `controlled.shutdown.timeout.ms`.

Each heartbeat reports the offset of the last metadata record the broker
applied (`metadata_offset`, from the BrokerMetadataListener).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable

from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.server.inter_broker_connection import InterBrokerConnection

log = logging.getLogger(__name__)


class BrokerLifecycleManager:
    def __init__(
        self,
        broker_id: int,
        cluster_id: str | None,
        controller: InterBrokerConnection,
        advertised_listeners: Callable[[], list[tuple[str, str, int]]],
        heartbeat_interval_ms: int,
        metadata_offset: Callable[[], int],
    ) -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.controller = controller
        self.advertised_listeners = advertised_listeners  # (name, host, port), clients' first
        self.heartbeat_s = heartbeat_interval_ms / 1000
        self.metadata_offset = metadata_offset
        self.broker_epoch = -1
        self.unfenced = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def controlled_shutdown(
        self, applied: Callable[[], Awaitable[bool]], timeout_s: float
    ) -> bool:
        """Ask the controller to move our leaderships away and stop heartbeating once
        it agreed and `applied()` says our metadata shows it. False when that did
        not happen within `timeout_s` (the session timeout fences us then)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.broker_epoch < 0:
            return False
        try:
            response = await asyncio.wait_for(self._heartbeat(want_shut_down=True), timeout_s)
        except (TimeoutError, KafkaError) as e:
            log.warning("controlled shutdown: the controller did not answer (%s)", e)
            return False
        return bool(response["should_shut_down"]) and await applied()

    async def _run(self) -> None:
        while True:
            if self.broker_epoch < 0:
                await self._register()
            try:
                response = await self._heartbeat()
                if response["error_code"] == Errors.STALE_BROKER_EPOCH:
                    self.broker_epoch = -1  # the controller forgot us: register again
                    raise KafkaError(Errors.STALE_BROKER_EPOCH, "registering again")
                if not response["is_fenced"] and not self.unfenced.is_set():
                    self.unfenced.set()
                    print(
                        f"kafkalab broker {self.broker_id} registered and unfenced "
                        f"(broker epoch {self.broker_epoch})",
                        flush=True,
                    )
            except KafkaError as e:
                log.warning("controller unreachable (%s); retrying", e)
            await asyncio.sleep(self.heartbeat_s)

    def _listeners(self) -> list[dict]:
        """Every listener, named (Kafka: BrokerRegistrationRequest.Listeners); the
        first is the one clients are told."""
        return [
            {"name": name, "host": host, "port": port, "security_protocol": 0}
            for name, host, port in self.advertised_listeners()
        ]

    async def _register(self) -> None:
        incarnation = uuid.uuid4()
        while self.broker_epoch < 0:
            try:
                response = await self.controller.request(
                    ApiKeys.BROKER_REGISTRATION,
                    0,
                    {
                        "broker_id": self.broker_id,
                        "cluster_id": self.cluster_id,
                        "incarnation_id": incarnation,
                        "listeners": self._listeners(),
                        "features": [],
                        "rack": None,
                    },
                )
                if response["error_code"]:
                    raise KafkaError(response["error_code"], "BrokerRegistration")
                self.broker_epoch = response["broker_epoch"]
            except KafkaError as e:
                log.warning("registration with the controller failed (%s); retrying", e)
                await asyncio.sleep(self.heartbeat_s)

    async def _heartbeat(self, want_shut_down: bool = False) -> dict:
        return await self.controller.request(
            ApiKeys.BROKER_HEARTBEAT,
            0,
            {
                "broker_id": self.broker_id,
                "broker_epoch": self.broker_epoch,
                "current_metadata_offset": self.metadata_offset(),
                "want_fence": want_shut_down,
                "want_shut_down": want_shut_down,
            },
        )
