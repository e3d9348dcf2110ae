"""The broker: start, serve, stop. `kafkalab broker CONFIG_FILE [--override k=v ...]`.

Kafka's class: kafka.server.KafkaServer / BrokerServer and kafka-server-start.sh.
Three ways to run one:

    kafkalab broker server.properties --override log.dirs=/tmp/k1    # a terminal
    with BrokerProcess({"log.dirs": d}) as b: ... b.bootstrap_servers  # a subprocess
    with BrokerThread({"log.dirs": d}) as b: ...                        # in this process

`listeners=PLAINTEXT://127.0.0.1:0` picks a free port; the broker prints
`kafkalab broker <id> listening on host:port` (its first listener, the clients')
once it serves, and logs `listener NAME on host:port` for each listener (a second
one, named by `inter.broker.listener.name`, is where brokers talk to each other). SIGTERM (or
Ctrl-C) stops it gracefully: stop accepting, finish in-flight requests, flush
and checkpoint every log, write the clean shutdown marker.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from kafkalab.controller.metadata_record_serde import MetadataParseError
from kafkalab.coordinator.group.group_config import GroupConfig
from kafkalab.coordinator.transaction import TransactionConfig
from kafkalab.errors import KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import APIS, CONTROLLER_APIS
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server import features
from kafkalab.server.add_partitions_to_txn_manager import (
    VERIFICATION_ENABLE,
    AddPartitionsToTxnManager,
)
from kafkalab.server.alter_partition_manager import AlterPartitionManager
from kafkalab.server.broker_lifecycle_manager import BrokerLifecycleManager
from kafkalab.server.clock import ProcessClock, monotonic_ms
from kafkalab.server.config import KafkaConfig, read_properties
from kafkalab.server.controller_channel import (
    QUORUM_METADATA_FETCH_VERSION,
    UNKNOWN_ID,
    ControllerChannel,
    KnownLeader,
    controller_endpoints,
    write_controller_state,
)
from kafkalab.server.dynamic_broker_config import DynamicBrokerConfig
from kafkalab.server.events import EventLog
from kafkalab.server.group_coordinator_service import GroupCoordinatorService
from kafkalab.server.inter_broker_connection import (
    REPLICA_FETCH_VERSION,
    InterBrokerConnection,
    broker_client_id,
)
from kafkalab.server.kafka_apis import KafkaApis
from kafkalab.server.link_faults import LinkFaults
from kafkalab.server.metadata_cache import (
    KRaftMetadataCache,
    MetadataCache,
    StandaloneMetadataCache,
)
from kafkalab.server.metadata_listener import BrokerMetadataListener
from kafkalab.server.producer_ids import ProducerIdManager, RPCProducerIdManager
from kafkalab.server.replica_fetcher import ReplicaFetcherManager
from kafkalab.server.replica_state import (
    FULL_REPORT_S,
    ReplicaStateReporter,
)
from kafkalab.server.socket_server import SocketServer
from kafkalab.server.transaction_coordinator_service import TransactionCoordinatorService
from kafkalab.storage import durability_ledger
from kafkalab.storage.errors import LogDirInUseError
from kafkalab.storage.log_manager import LogManager

log = logging.getLogger(__name__)
TICK_SECONDS = 1.0
EXIT_WITH_PID = "KAFKALAB_EXIT_WITH_PID"
#: How long a broker whose starter died may take to stop before it exits hard.
PARENT_GONE_STOP_TIMEOUT_S = 15


async def stop_when_parent_dies(stop) -> None:
    """If KAFKALAB_EXIT_WITH_PID names a process, call `stop()` once it is gone
    (BrokerProcess sets it, so a killed test runner or notebook kernel cannot
    leave brokers running; `kafkalab cluster up` does not)."""
    pid = int(os.environ.get(EXIT_WITH_PID, "0"))
    if pid <= 0:
        return
    while True:
        await asyncio.sleep(1)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            log.warning("process %d that started us is gone: stopping", pid)
            try:
                await asyncio.wait_for(stop(), PARENT_GONE_STOP_TIMEOUT_S)
            except Exception:
                # A stop that fails or hangs (a notebook's temp dir, our data
                # directory, removed with the kernel) must not leave us running.
                log.exception("could not stop cleanly after process %d died: exiting", pid)
                os._exit(1)
            return


class KafkaBroker:
    """One broker on the running asyncio loop: `await start()`, `await stop()`.

    Kafka's class: kafka.server.BrokerServer. What it starts, bottom up: the
    LogManager, the ReplicaManager, the metadata (a controller's metadata log
    through BrokerMetadataListener, BrokerLifecycleManager, ReplicaFetcherManager
    and AlterPartitionManager; or, with no controller configured, a standalone
    MetadataCache that leads every partition itself), KafkaApis and the
    SocketServer."""

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.socket_server: SocketServer | None = None  # the first listener's
        self.socket_servers: dict[str, SocketServer] = {}  # every listener's, by name
        self.advertised_address: tuple[str, int] = ("127.0.0.1", 0)  # the first listener's
        self.advertised_endpoints: dict[str, tuple[str, int]] = {}
        self._ticker: asyncio.Task | None = None
        self._reporter: asyncio.Task | None = None
        self.link_faults = LinkFaults(Path(config.log_dirs[0]))
        self.clock = ProcessClock(Path(config.log_dirs[0]))  # kafkalab's clock faults
        self.lifecycle: BrokerLifecycleManager | None = None
        self.metadata_listener: BrokerMetadataListener | None = None
        self.fetchers: ReplicaFetcherManager | None = None
        #: the controller this broker believes active (a controller quorum only)
        self.known_leader: KnownLeader | None = None
        self._stopped = asyncio.Event()

    async def start(self) -> None:
        config = self.config
        loop = asyncio.get_running_loop()
        self.log_manager = LogManager(
            config.log_dirs,
            config.log_config,
            retention_check_interval_ms=config.log_retention_check_interval_ms,
            flush_check_interval_ms=config.log_flush_scheduler_interval_ms,
            checkpoint_interval_ms=config.log_flush_offset_checkpoint_interval_ms,
            cleaner_enable=config.extra.get("log.cleaner.enable", "true").lower() == "true"
            and int(config.extra.get("log.cleaner.threads", 1)) > 0,
            cleaner_backoff_ms=int(config.extra.get("log.cleaner.backoff.ms", 15_000)),
            # Cleaning runs in cleaner processes, never on this event loop.
            cleaner_threads=max(1, int(config.extra.get("log.cleaner.threads", 1))),
            cleaner_io_max_bytes_per_second=float(
                config.extra.get("log.cleaner.io.max.bytes.per.second", "inf")
            ),
            cleaner_dedupe_buffer_size=int(
                config.extra.get("log.cleaner.dedupe.buffer.size", 128 * 1024 * 1024)
            ),
            background_threads=int(config.extra.get("background.threads", 10)),
            producer_id_expiration_ms=int(
                config.extra.get("producer.id.expiration.ms", 86_400_000)
            ),
            producer_id_expiration_check_interval_ms=int(
                config.extra.get("producer.id.expiration.check.interval.ms", 600_000)
            ),
            # wall time through kafkalab's clock faults (clock.py); duties on a timer
            clock=self.clock.wall_ms,
            timer_clock=monotonic_ms,
        )
        self.replica_manager = ReplicaManager(
            self.log_manager,
            loop.call_later,
            config.node_id,
            truncation_rule=config.extra.get(
                "kafkalab.follower.truncation.rule", "fenced-leader-epoch"
            ),
            replica_lag_time_max_ms=int(config.extra.get("replica.lag.time.max.ms", 30_000)),
            clock=monotonic_ms,  # its times are timers (ISR lag, fetch sessions)
        )
        # Where the controllers are: their voters (id@host:port, a static quorum) or
        # their addresses (host:port); neither: a broker on its own.
        controller = config.extra.get("controller.quorum.voters") or config.extra.get(
            "controller.quorum.bootstrap.servers"
        )
        # In a cluster, blocks of ids from the controller (AllocateProducerIds); on
        # its own, from a file in the broker's log dir.
        producer_ids: ProducerIdManager | RPCProducerIdManager = (
            RPCProducerIdManager(config.node_id, self._broker_epoch, self._allocate_producer_ids)
            if controller
            else ProducerIdManager(config.log_dirs[0])
        )
        self.producer_ids = producer_ids
        # Static config, then the dynamic broker configs the metadata brings.
        self.dynamic_config = DynamicBrokerConfig(config.node_id, config.extra)
        metadata = self._kraft_metadata() if controller else self._standalone_metadata()
        self.replica_manager.partition_exists = metadata.contains_partition
        self.replica_manager.broker_alive = lambda broker_id: any(
            b.broker_id == broker_id for b in metadata.alive_brokers()
        )
        self._start_coordinators(metadata, producer_ids)
        self.metadata_cache = metadata
        self.apis = KafkaApis(
            config,
            self.replica_manager,
            metadata,
            producer_ids,
            self.link_faults,
            self.group_coordinator,
            self.transaction_coordinator,
        )
        self.apis.dynamic_config = self.dynamic_config
        # the leader's side of KIP-890: it connects only when first asked
        self.apis.add_partitions_to_txn_manager = AddPartitionsToTxnManager(
            metadata,
            self.transaction_coordinator.coordinator.config.transaction_state_log_num_partitions,
            lambda host, port: InterBrokerConnection(host, port, APIS, self._client_id),
            listener=config.inter_broker_listener,
            request_timeout_ms=int(config.extra.get("request.timeout.ms", 30_000)),
        )
        self.apis.transaction_verification_enable = (
            config.extra.get(VERIFICATION_ENABLE, "true").lower() == "true"
        )
        advertised = config.advertised()
        for name, host, port in config.listener_list():
            server = SocketServer(
                self.apis,
                host,
                port,
                max_request_bytes=config.socket_request_max_bytes,
                queued_max_requests=config.queued_max_requests,
                num_handlers=config.num_io_threads,
                listener_name=name,
            )
            await server.start()
            self.socket_servers[name] = server
            adv_host, adv_port = advertised.get(name, (host, 0))
            self.advertised_endpoints[name] = (adv_host, adv_port or server.bound_port)
            log.info("listener %s on %s:%d", name, *self.advertised_endpoints[name])
        first = config.listener_list()[0][0]
        self.socket_server = self.socket_servers[first]
        self.advertised_address = self.advertised_endpoints[first]
        self._ticker = asyncio.create_task(self._tick())
        self._reporter = asyncio.create_task(self._report())
        self.replica_manager.start_isr_expiration()
        if self.lifecycle is not None:
            self.metadata_listener.start()
            self.lifecycle.start()
            self.producer_ids.start()  # the first block, as soon as we are registered

    def _start_coordinators(
        self, metadata: MetadataCache, producer_ids: ProducerIdManager | RPCProducerIdManager
    ) -> None:
        """The group and transaction coordinators, each built complete (coordinator,
        runtime, marker channel): from here on each follows leadership of its state
        topic, and takes over the partitions this broker leads already."""
        extra = self.config.extra
        self.group_coordinator = GroupCoordinatorService(
            GroupConfig.from_properties(extra),
            self.replica_manager,
            metadata,
            append_timeout_ms=int(extra.get("offsets.commit.timeout.ms", 5000)),
        )
        features.transaction_version(extra)  # 1 or 2, refused at start otherwise
        self.transaction_coordinator = TransactionCoordinatorService(
            TransactionConfig.from_properties(extra),
            self.replica_manager,
            metadata,
            producer_ids.generate,
            append_timeout_ms=int(extra.get("request.timeout.ms", 30_000)),
            retry_backoff_ms=int(extra.get("retry.backoff.ms", 100)),
            request_timeout_ms=int(extra.get("request.timeout.ms", 30_000)),
            connect=lambda host, port: InterBrokerConnection(host, port, APIS, self._client_id),
            listener=self.config.inter_broker_listener,
        )

    def _standalone_metadata(self) -> MetadataCache:
        return StandaloneMetadataCache(
            self.config,
            self.replica_manager,
            lambda: self.advertised_address,
            lambda: self.advertised_endpoints,
            self.dynamic_config,
        )

    def _kraft_metadata(self) -> MetadataCache:
        """The broker in a cluster: it registers and heartbeats (lifecycle), applies
        the metadata log (listener), follows leaders (fetchers) and sends the ISR
        changes its partitions want (AlterPartition). With a controller quorum every
        channel to it follows one KnownLeader (controller_channel.py)."""
        config = self.config
        endpoints = controller_endpoints(config.extra)
        quorum = len(endpoints) > 1
        # Controllers known by id (controller.quorum.voters), or several: a channel
        # that follows the leader and heeds cut links to each controller by its id.
        # One controller known only by its address: a plain connection, as always.
        follow = quorum or endpoints[0].node_id != UNKNOWN_ID
        if follow:
            from kafkalab.server.kafka_raft_manager import RAFT_CHANNEL_APIS

            self.known_leader = KnownLeader(
                endpoints, EventLog(config.log_dirs[0], f"broker-{config.node_id}")
            )
        link_faults = self.link_faults

        def connect() -> InterBrokerConnection | ControllerChannel:
            """One controller: a connection to it; a quorum's: to its active one."""
            if not follow:
                return InterBrokerConnection(endpoints[0].host, endpoints[0].port, CONTROLLER_APIS)
            return ControllerChannel(
                endpoints,
                {**CONTROLLER_APIS, **RAFT_CHANNEL_APIS},
                leader=self.known_leader,
                hears=link_faults.hears,
            )

        channel = connect()
        self.events = EventLog(config.log_dirs[0], f"broker-{config.node_id}")
        self.fetchers = ReplicaFetcherManager(
            config.node_id,
            self.replica_manager,
            self.link_faults,
            lambda broker_id: listener.broker_address(broker_id, config.inter_broker_listener),
            self.events,
            int(config.extra.get("replica.fetch.wait.max.ms", 500)),
            client_id=self._client_id,
            request_timeout_ms=int(config.extra.get("replica.socket.timeout.ms", 30_000)),
        )
        listener = BrokerMetadataListener(
            config.node_id,
            connect(),  # its own: long polls
            self.replica_manager,
            self.fetchers,
            self.events,
            fetch_version=QUORUM_METADATA_FETCH_VERSION if quorum else REPLICA_FETCH_VERSION,
        )
        self.metadata_listener = listener
        listener.on_broker_configs = lambda configs: self.log_manager.update_default_config(
            self.dynamic_config.update(configs)
        )
        self.lifecycle = BrokerLifecycleManager(
            config.node_id,
            config.cluster_id,
            # its own, on its own thread: no AlterPartition or busy loop delays a heartbeat
            connect(),
            lambda: [(name, *address) for name, address in self.advertised_endpoints.items()],
            int(config.extra.get("broker.heartbeat.interval.ms", 2000)),
            lambda: listener.last_applied_offset,
        )
        lifecycle = self.lifecycle
        self.replica_manager.alter_partition = AlterPartitionManager(
            config.node_id, channel, lambda: lifecycle.broker_epoch, self.replica_manager
        ).submit
        self._controller_channel = channel
        return KRaftMetadataCache(listener, channel)

    def _broker_epoch(self) -> int:
        return self.lifecycle.broker_epoch if self.lifecycle is not None else -1

    async def _allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """AllocateProducerIds to the controller: (first id, count) of our next block."""
        response = await self._controller_channel.request(
            ApiKeys.ALLOCATE_PRODUCER_IDS,
            0,
            {"broker_id": broker_id, "broker_epoch": broker_epoch},
        )
        if response["error_code"]:
            raise KafkaError(response["error_code"], "AllocateProducerIds")
        return response["producer_id_start"], response["producer_id_len"]

    def _client_id(self) -> str:
        """Our requests to other brokers say who we are, in which broker epoch
        (-1 before we registered, and on a broker without a controller)."""
        epoch = self.lifecycle.broker_epoch if self.lifecycle is not None else -1
        return broker_client_id(self.config.node_id, epoch)

    async def _controlled_shutdown(self) -> None:
        """Before going, hand our leaderships over (Kafka's controlled shutdown): ask
        the controller, and keep serving until our metadata shows we lead nothing
        (clients have been told NOT_LEADER_OR_FOLLOWER and moved on)."""
        me = self.config.node_id

        def handed_over(image) -> bool:
            leads = any(
                p.leader == me for t in image.topics.values() for p in t.partitions.values()
            )
            return image.brokers[me].fenced and not leads

        async def applied() -> bool:
            return await self.metadata_listener.wait_until(handed_over, 5)

        timeout_s = int(self.config.extra.get("controlled.shutdown.timeout.ms", 10_000)) / 1000
        if await self.lifecycle.controlled_shutdown(applied, timeout_s):
            log.info("controlled shutdown: leaderships moved to other brokers")
        else:
            log.warning("controlled shutdown did not complete; stopping anyway")

    async def _tick(self) -> None:
        """The LogManager's background duties (retention, flush.ms, checkpoints)."""
        while True:
            await asyncio.sleep(TICK_SECONDS)
            try:
                self.log_manager.tick()
            except Exception:
                log.exception("log manager duties failed")

    async def _report(self) -> None:
        """Re-read the link faults and write replica-state.json when it changed: every
        REPORT_INTERVAL_S, less often when a report costs more (replica_state.py)."""
        reporter = ReplicaStateReporter(Path(self.config.log_dirs[0]))
        loop = asyncio.get_running_loop()
        next_full = 0.0
        last_controller_state: dict | None = None
        next_controller_write = 0.0
        while True:
            await asyncio.sleep(reporter.next_delay())
            try:
                self.link_faults.refresh()  # it logs what changed
                changed = self.replica_manager.take_changed()
                if loop.time() >= next_full:
                    changed, next_full = None, loop.time() + FULL_REPORT_S
                reporter.report(self.config.node_id, self.replica_manager.partitions, changed)
                if self.known_leader is not None:
                    # a new leader or an unreachable controller at once; the request
                    # counts alone once a second
                    state = self.known_leader.state()
                    last = last_controller_state or {}
                    moved = {k: v for k, v in state.items() if k != "sent"} != {
                        k: v for k, v in last.items() if k != "sent"
                    }
                    if moved or (state != last and loop.time() >= next_controller_write):
                        write_controller_state(self.config.log_dirs[0], state)
                        last_controller_state = state
                        next_controller_write = loop.time() + 1.0
            except Exception:
                log.exception("replica state report failed")

    @property
    def bootstrap_servers(self) -> str:
        host, port = self.advertised_address
        return f"{host}:{port}"

    async def stop(self) -> None:
        for task in (self._ticker, self._reporter):
            if task is not None:
                task.cancel()
        if self.lifecycle is not None:
            self.producer_ids.stop()
            await self._controlled_shutdown()
            await self.metadata_listener.stop()
            await self.fetchers.stop()
            self._controller_channel.close()
            self.events.close()
            if self.known_leader is not None and self.known_leader.events is not None:
                self.known_leader.events.close()
        if self.socket_servers:
            # Parked fetches answer with what they have; in-flight requests finish.
            await asyncio.gather(
                *(
                    server.stop(before_close=self.replica_manager.delayed_fetch.shutdown)
                    for server in self.socket_servers.values()
                )
            )
        self.group_coordinator.shutdown()
        self.transaction_coordinator.shutdown()
        verifier = getattr(getattr(self, "apis", None), "add_partitions_to_txn_manager", None)
        if verifier is not None:
            verifier.close()
        self.replica_manager.shutdown()
        self._stopped.set()

    async def serve_forever(self) -> None:
        await self._stopped.wait()


def _config_from(props: dict[str, str] | KafkaConfig | None) -> KafkaConfig:
    if isinstance(props, KafkaConfig):
        return props
    props = dict(props or {})
    props.setdefault("listeners", "PLAINTEXT://127.0.0.1:0")
    if "log.dirs" not in props and "log.dir" not in props:
        props["log.dirs"] = tempfile.mkdtemp(prefix="kafkalab-broker-")
    return KafkaConfig.from_properties(props)


class BrokerThread:
    """A broker on its own event loop in a background thread of this process."""

    def __init__(self, props: dict[str, str] | KafkaConfig | None = None) -> None:
        self.config = _config_from(props)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="kafkalab-broker"
        )
        self.broker: KafkaBroker | None = None

    def start(self) -> BrokerThread:
        self._thread.start()
        self.broker = KafkaBroker(self.config)
        asyncio.run_coroutine_threadsafe(self.broker.start(), self._loop).result(timeout=60)
        return self

    def stop(self) -> None:
        if self.broker is not None:
            asyncio.run_coroutine_threadsafe(self.broker.stop(), self._loop).result(timeout=60)
            self.broker = None
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if not self._loop.is_closed() and not self._loop.is_running():
            self._loop.close()

    @property
    def bootstrap_servers(self) -> str:
        assert self.broker is not None, "start() the broker first"
        return self.broker.bootstrap_servers

    def __enter__(self) -> BrokerThread:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class BrokerProcess:
    """A broker (or, with verb="controller", a controller) in a child process
    (`python -m kafkalab broker`), stopped with SIGTERM (gracefully) or killed
    with SIGKILL. Its output goes to `<log dir>/<verb>.out`, so it can outlive
    the Python process that started it (`kafkalab cluster up`)."""

    def __init__(
        self, props: dict[str, str] | None = None, verb: str = "broker", exit_with_parent=True
    ) -> None:
        self.verb = verb
        self.exit_with_parent = exit_with_parent
        self.props = dict(props or {})
        self.props.setdefault("listeners", "PLAINTEXT://127.0.0.1:0")
        if "log.dirs" not in self.props:
            self.props["log.dirs"] = tempfile.mkdtemp(prefix="kafkalab-broker-")
        self.dir = Path(self.props["log.dirs"].split(",")[0])
        self.log_path = self.dir / f"{verb}.out"
        self.process: subprocess.Popen | None = None
        self.bootstrap_servers = ""
        self._output_from = 0

    @property
    def output(self) -> list[str]:
        """What the process printed since it was last started."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                f.seek(self._output_from)
                return f.readlines()
        except FileNotFoundError:
            return []

    def start(self, timeout: float = 60) -> BrokerProcess:
        self.dir.mkdir(parents=True, exist_ok=True)
        config_file = self.dir / f"{self.verb}.properties"
        config_file.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        self._output_from = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "a") as out:
            env = dict(os.environ)
            if self.exit_with_parent:  # a dead notebook kernel or test leaves no broker behind
                env[EXIT_WITH_PID] = str(os.getpid())
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kafkalab", self.verb, str(config_file)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        if not self.wait_for_line(" listening on ", timeout):
            self.kill()
            raise RuntimeError(f"{self.verb} did not start:\n" + "".join(self.output))
        line = next(x for x in self.output if " listening on " in x)
        self.bootstrap_servers = line.rsplit(" ", 1)[1].strip()
        return self

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait; SIGKILL if it does not stop in time. Returns the exit code."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.terminate()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def pause(self) -> None:
        """SIGSTOP: the process hangs (a long GC pause, a stuck disk)."""
        if self.process is not None:
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)

    def wait_for_line(self, text: str, timeout: float = 60) -> bool:
        """Wait until the process printed a line containing `text`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.output):
                return True
            if self.process is not None and self.process.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def kill(self) -> None:
        """SIGKILL: no flush, no checkpoint, no clean shutdown marker."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


async def serve(server, started: Callable[[], str], stopped: str) -> None:
    """Start a broker or controller process's server, print `started()` (what
    BrokerProcess waits for), and serve until SIGTERM / Ctrl-C or the death of the
    process that started us stops it gracefully."""
    await server.start()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(server.stop()))
    print(started(), flush=True)
    watchdog = asyncio.create_task(stop_when_parent_dies(server.stop))
    await server.serve_forever()
    watchdog.cancel()
    print(stopped, flush=True)


async def _run(props: dict[str, str]) -> None:
    config = KafkaConfig.from_properties(props)
    broker = KafkaBroker(config)
    await serve(
        broker,
        lambda: f"kafkalab broker {config.node_id} listening on {broker.bootstrap_servers}",
        f"kafkalab broker {config.node_id} stopped",
    )


def run_from_command_line(
    args: argparse.Namespace, run: Callable[[dict[str, str]], Coroutine[Any, Any, None]]
) -> int:
    """`kafkalab broker|controller CONFIG [--override KEY=VALUE ...]`: read the
    properties, log to stdout, run until stopped. Exit 2 for bad arguments, 1
    when the data directory is another process's or holds a metadata log this
    version cannot read (its message says what to do)."""
    overrides = {}
    for item in args.override:
        if "=" not in item:
            print(f"--override {item!r}: expected KEY=VALUE", file=sys.stderr)
            return 2
        key, value = item.split("=", 1)
        overrides[key] = value
    if not args.config.exists():
        print(f"config file {args.config} does not exist", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=os.environ.get("KAFKALAB_LOG_LEVEL", "INFO"),
        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s",
    )
    props = {**read_properties(args.config), **overrides}
    if props.get(durability_ledger.LAZYFS_ENABLE_CONFIG, "false").lower() == "true":
        durability_ledger.install_for(props)
    try:
        asyncio.run(run(props))
    except (LogDirInUseError, MetadataParseError) as e:
        print(e, file=sys.stderr)
        return 1
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "broker",
        help="run a broker (kafka-server-start.sh)",
        description="Run a kafkalab broker from a server.properties file.",
    )
    parser.add_argument("config", type=Path, help="server.properties with Kafka's key names")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a property (repeatable)",
    )
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    return run_from_command_line(args, _run)
