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

Heartbeats run on a thread of their own, with their own event loop and their
own connection to the controller (Kafka: the lifecycle manager's own event
queue and NodeToControllerChannelManager): nothing the broker's event loop does
(applying the leaderships of a thousand partitions, fsyncing their leader epoch
checkpoints, answering fetches) can hold a heartbeat back, so a busy broker is
never fenced as if it were dead. Only a stopped process (SIGSTOP, a crash)
misses its heartbeats.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

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
        """`controller`: a connection used by nobody else (it lives on the
        heartbeat thread's loop). `advertised_listeners` and `metadata_offset` are
        called from that thread: they must only read."""
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.controller = controller
        self.advertised_listeners = advertised_listeners  # (name, host, port), clients' first
        self.heartbeat_s = heartbeat_interval_ms / 1000
        self.metadata_offset = metadata_offset
        self.broker_epoch = -1
        #: set (from the heartbeat thread) once the controller unfenced us
        self.unfenced = threading.Event()
        self.heartbeats = 0  # answered heartbeats, for tests and the labs
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name=f"broker-{broker_id}-lifecycle"
        )
        self._task: asyncio.Future | None = None

    def start(self) -> None:
        """Register and heartbeat on the lifecycle thread."""
        self._thread.start()
        self._task = asyncio.run_coroutine_threadsafe(self._run(), self._loop)

    async def _on_thread(self, coro) -> Any:
        """Run `coro` on the lifecycle thread's loop and await it from the broker's."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    async def controlled_shutdown(
        self, applied: Callable[[], Awaitable[bool]], timeout_s: float
    ) -> bool:
        """Ask the controller to move our leaderships away and stop heartbeating once
        it agreed and `applied()` says our metadata shows it. False when that did
        not happen within `timeout_s` (the session timeout fences us then)."""
        try:
            await self._on_thread(self._stop_heartbeats())
            if self.broker_epoch < 0:
                return False
            try:
                response = await self._on_thread(
                    asyncio.wait_for(self._heartbeat(want_shut_down=True), timeout_s)
                )
            except (TimeoutError, KafkaError) as e:
                log.warning("controlled shutdown: the controller did not answer (%s)", e)
                return False
            return bool(response["should_shut_down"]) and await applied()
        finally:
            self.close()

    async def _stop_heartbeats(self) -> None:
        for task in asyncio.all_tasks(self._loop):
            if task is not asyncio.current_task():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def close(self) -> None:
        """Stop the heartbeat thread (no last heartbeat: see controlled_shutdown)."""
        if not self._thread.is_alive():
            return

        async def shut() -> None:
            await self._stop_heartbeats()
            self.controller.close()

        try:
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self._loop.close()

    async def _run(self) -> None:
        while True:
            if self.broker_epoch < 0:
                await self._register()
            try:
                response = await self._heartbeat()
                self.heartbeats += 1
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
