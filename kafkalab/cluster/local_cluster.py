"""LocalCluster: a controller and N brokers as real processes on loopback.

    with LocalCluster(brokers=3) as cluster:
        cluster.bootstrap_servers        # "127.0.0.1:port,..."
        cluster.describe()               # a DataFrame: every replica's role, LEO, HW, ISR, lag
        cluster.kill(2)                  # SIGKILL broker 2
        cluster.restart(2)
        cluster.pause(3); cluster.resume(3)   # SIGSTOP / SIGCONT
        cluster.cut_link(1, 2)           # broker 1 and 2 no longer hear each other
        cluster.cut_link(1, 2, mode="drop")   # ... and their requests time out
        cluster.isolate_clients(1, mode="drop", client_id_prefix="p1-")
        cluster.heal_links()
        cluster.clock_step(2, -3600)     # broker 2's wall clock an hour back

Each process has its own data directory under `base_dir`; every process the
cluster starts it stops, also when a test fails (`__exit__`).

`KAFKALAB_MIN_SESSION_TIMEOUT_MS` in the environment raises every cluster's
`broker.session.timeout.ms` to at least that much (binder/start sets 3000: on
one throttled CPU a broker's heartbeats come late, and a lab's 500 ms session
would have the controller fence healthy brokers).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

from kafkalab.kinds import Kind
from kafkalab.raft.kafka_metadata_log import METADATA_LOG_DIR, cut_to_recovery_point
from kafkalab.server.broker import BrokerProcess
from kafkalab.server.clock import reset_clock, skew_clock, step_clock
from kafkalab.server.link_faults import (
    CutMode,
    cut,
    heal,
    hold_requests,
    isolate_clients,
    release_requests,
)
from kafkalab.server.replica_state import read_replica_state
from kafkalab.storage import durability_ledger
from kafkalab.storage.checkpoint_file import (
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkalab.storage.unified_log import cut_to, parse_topic_partition


def cut_to_recovery_points(log_dir: Path) -> dict[str, int]:
    """Truncate every partition's segment files in `log_dir` at its checkpointed
    recovery point (0 when it has none), deleting later segments whole."""
    points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT).read()
    cut: dict[str, int] = {}
    for partition_dir in sorted(p for p in log_dir.iterdir() if p.is_dir()):
        try:
            tp = parse_topic_partition(partition_dir)
        except ValueError:
            continue
        cut[partition_dir.name] = cut_to(partition_dir, points.get(tp, 0))
    return cut


class ProcessState(Kind):
    """A broker or controller process as /proc sees it; the value is what
    `kafkalab cluster status` and the `status` column show."""

    RUNNING = "running"
    PAUSED = "paused"  # SIGSTOP
    DOWN = "down"  # gone, or a zombie


# /proc/PID/stat's state letter -> ProcessState (any other letter: running)
_PROC_STATES = {"T": ProcessState.PAUSED, "Z": ProcessState.DOWN}


def process_state(pid: int | None) -> ProcessState:
    """running | paused (SIGSTOP) | down, from /proc."""
    if pid is None:
        return ProcessState.DOWN
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return ProcessState.DOWN
    return _PROC_STATES.get(fields[0], ProcessState.RUNNING)


DESCRIBE_COLUMNS = [
    "topic", "partition", "broker", "status", "role", "leader", "leader epoch",
    "LEO", "HW", "ISR", "lag", "epochs",
]  # fmt: skip


def describe_rows(broker_dirs: dict[int, Path], states: dict[int, str]) -> list[dict]:
    """One row per partition replica, from each broker's replica-state.json: what
    that broker last knew (a paused or killed broker shows its last report; the
    `status` column says so). `lag` is how far the replica's LEO is behind the
    leader's LEO, taken from the running leader with the newest epoch."""
    rows = []
    for broker_id, directory in sorted(broker_dirs.items()):
        report = read_replica_state(directory) or {"partitions": []}
        for p in report["partitions"]:
            rows.append(
                {
                    "topic": p["topic"],
                    "partition": p["partition"],
                    "broker": broker_id,
                    "status": str(states.get(broker_id, ProcessState.DOWN)),
                    "role": p["role"],
                    "leader": p["leader"],
                    "leader epoch": p["leader_epoch"],
                    "LEO": p["log_end_offset"],
                    "HW": p["high_watermark"],
                    "ISR": p["isr"],
                    "epochs": " ".join(f"{e}@{start}" for e, start in p["epochs"]),
                }
            )
    leader_leo: dict[tuple[str, int], tuple[int, int]] = {}
    for r in rows:
        if r["role"] == "leader" and r["status"] == ProcessState.RUNNING:
            key = (r["topic"], r["partition"])
            leader_leo[key] = max(leader_leo.get(key, (-1, 0)), (r["leader epoch"], r["LEO"]))
    for r in rows:
        r["lag"] = leader_leo.get((r["topic"], r["partition"]), (0, r["LEO"]))[1] - r["LEO"]
    rows.sort(key=lambda r: (r["topic"], r["partition"], r["broker"]))
    return [{c: r[c] for c in DESCRIBE_COLUMNS} for r in rows]


def under_replicated(rows: list[dict]) -> list[tuple[str, int]]:
    """Partitions whose leader (running, newest epoch) does not have every replica
    in its ISR, or that have no running leader (Kafka's UnderReplicatedPartitions,
    and offline ones)."""
    by_partition: dict[tuple[str, int], list[dict]] = {}
    for r in rows:
        by_partition.setdefault((r["topic"], r["partition"]), []).append(r)
    out = []
    for tp, replicas in sorted(by_partition.items()):
        leaders = [
            r for r in replicas if r["role"] == "leader" and r["status"] == ProcessState.RUNNING
        ]
        leader = max(leaders, key=lambda r: r["leader epoch"], default=None)
        if leader is None or sorted(leader["ISR"]) != sorted(r["broker"] for r in replicas):
            out.append(tp)
    return out


#: A quorum controller's node id is this plus 1, 2, 3 (brokers are 1..n).
CONTROLLER_ID_BASE = 3000
#: The node id of a single controller (a quorum of one: the first voter's id).
SINGLE_CONTROLLER_ID = CONTROLLER_ID_BASE + 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


MIN_SESSION_TIMEOUT_ENV = "KAFKALAB_MIN_SESSION_TIMEOUT_MS"


def effective_session_timeout_ms(session_timeout_ms: int) -> int:
    """The session timeout a cluster uses: the one asked for, raised to the
    environment's floor (`KAFKALAB_MIN_SESSION_TIMEOUT_MS`) where one is set."""
    floor = os.environ.get(MIN_SESSION_TIMEOUT_ENV, "").strip()
    if not floor:
        return session_timeout_ms
    if not floor.isdigit():
        raise ValueError(f"{MIN_SESSION_TIMEOUT_ENV} must be a whole number of ms, not {floor!r}")
    return max(session_timeout_ms, int(floor))


class LocalCluster:
    def __init__(
        self,
        brokers: int = 3,
        base_dir: str | Path | None = None,
        broker_props: dict[str, str] | None = None,
        session_timeout_ms: int = 3000,
        controller_props: dict[str, str] | None = None,
        props_by_broker: dict[int, dict[str, str]] | None = None,
        outlive_parent: bool = False,
        controllers: int = 1,
    ) -> None:
        """`outlive_parent`: the processes keep running when this Python process
        ends (`kafkalab cluster up`); by default they stop with it.

        `controllers`: 1 (the default) is a single controller process, a KRaft quorum
        of one (node id 3001, the only voter); more make a quorum of several
        (controller.quorum.voters): voters with
        node ids CONTROLLER_ID_BASE + 1, + 2, ... (`controller_ids`), each in
        `<base>/controller-<id>`, brokers given them as controller.quorum.voters
        (and controller.quorum.bootstrap.servers). Every fault verb (kill, pause, resume,
        restart, power_failure) takes a controller's id as it takes a broker's."""
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir or tempfile.mkdtemp(prefix="kafkalab-cluster-"))
        self.n = brokers
        self.broker_props = dict(broker_props or {})
        self.session_timeout_ms = effective_session_timeout_ms(session_timeout_ms)
        self.controller_props = dict(controller_props or {})
        self.props_by_broker = {b: dict(p) for b, p in (props_by_broker or {}).items()}
        self.outlive_parent = outlive_parent
        if controllers < 1:
            raise ValueError(f"a cluster needs a controller, not {controllers}")
        self.n_controllers = controllers
        #: the controller process with one controller; the first voter with a quorum
        self.controller: BrokerProcess | None = None
        #: a quorum's voters by node id (empty with a single controller)
        self.controllers: dict[int, BrokerProcess] = {}
        self.brokers: dict[int, BrokerProcess] = {}
        #: what the last `power_failure(..., lose_unsynced=True)` did to the files
        self.last_power_failure: durability_ledger.PowerFailure | None = None

    def _props(self, broker_id: int) -> dict[str, str]:
        assert self.controller is not None
        return {
            "node.id": str(broker_id),
            # Clients on PLAINTEXT; brokers among themselves on BROKER, the only
            # listener where a follower's fetch or a WriteTxnMarkers is served.
            "listeners": "PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:0",
            "inter.broker.listener.name": "BROKER",
            "log.dirs": str(self.base_dir / f"broker-{broker_id}"),
            "controller.quorum.bootstrap.servers": self.controller_bootstrap_servers,
            # the controllers' ids and endpoints, as Kafka's brokers in a static quorum
            # have them: the leader a controller names is found at its endpoint
            "controller.quorum.voters": self.quorum_voters,
            "broker.heartbeat.interval.ms": "250",
            "default.replication.factor": str(min(3, self.n)),
            **self.broker_props,
            **self.props_by_broker.get(broker_id, {}),
        }

    @property
    def controller_ids(self) -> list[int]:
        return sorted(self.controllers)

    @property
    def controller_bootstrap_servers(self) -> str:
        if self.controllers:
            return ",".join(self.controllers[c].props["listeners"].split("//", 1)[1]
                            for c in self.controller_ids)  # fmt: skip
        assert self.controller is not None
        return self.controller.bootstrap_servers

    @property
    def quorum_voters(self) -> str:
        """`controller.quorum.voters`: `id@host:port,...` (a single controller: its
        SINGLE_CONTROLLER_ID at its address)."""
        if not self.controllers:
            assert self.controller is not None
            return f"{SINGLE_CONTROLLER_ID}@{self.controller.bootstrap_servers}"
        return ",".join(
            f"{c}@{self.controllers[c].props['listeners'].split('//', 1)[1]}"
            for c in self.controller_ids
        )

    def _start_quorum(self) -> None:
        """Voters on ports chosen now (each voter's address is in every voter's
        config); they elect the active controller among themselves."""
        ids = [CONTROLLER_ID_BASE + i for i in range(1, self.n_controllers + 1)]
        ports = {c: _free_port() for c in ids}
        voters = ",".join(f"{c}@127.0.0.1:{ports[c]}" for c in ids)
        for c in ids:
            self.controllers[c] = BrokerProcess(
                {
                    "node.id": str(c),
                    "listeners": f"CONTROLLER://127.0.0.1:{ports[c]}",
                    "log.dirs": str(self.base_dir / f"controller-{c}"),
                    "controller.quorum.voters": voters,
                    "broker.session.timeout.ms": str(self.session_timeout_ms),
                    **self.controller_props,
                },
                verb="controller",
                exit_with_parent=not self.outlive_parent,
            )
        for c in ids:
            self.controllers[c].start()
        self.controller = self.controllers[ids[0]]

    def describe_quorum(self, timeout_s: float = 10.0):
        """The quorum's leader, epoch, high watermark and each voter's log end offset
        (DescribeQuorum, answered by the leader: kafkalab.cluster.metadata_quorum)."""
        from kafkalab.cluster.metadata_quorum import describe_quorum
        from kafkalab.server.controller_channel import parse_bootstrap_servers

        addresses = parse_bootstrap_servers(self.controller_bootstrap_servers)
        return describe_quorum(addresses, timeout_s)

    def active_controller(self, timeout_s: float = 10.0) -> int:
        """The node id of the active controller (the quorum's leader)."""
        return self.describe_quorum(timeout_s).leader_id

    def _process(self, node_id: int) -> BrokerProcess:
        """A broker's process, or a controller's (a quorum's voter, or the single
        controller by SINGLE_CONTROLLER_ID)."""
        if node_id in self.controllers:
            return self.controllers[node_id]
        if self._is_single_controller(node_id):
            assert self.controller is not None
            return self.controller
        return self.brokers[node_id]

    def _is_single_controller(self, node_id: int) -> bool:
        return node_id == SINGLE_CONTROLLER_ID and not self.controllers

    def start(self) -> LocalCluster:
        if self.n_controllers > 1:
            self._start_quorum()
            for broker_id in range(1, self.n + 1):
                self.start_broker(broker_id)
            return self
        self.controller = BrokerProcess(
            {
                "node.id": str(SINGLE_CONTROLLER_ID),  # the only voter of its quorum
                "listeners": "CONTROLLER://127.0.0.1:0",
                "log.dirs": str(self.base_dir / "controller"),
                "broker.session.timeout.ms": str(self.session_timeout_ms),
                **self.controller_props,
            },
            verb="controller",
            exit_with_parent=not self.outlive_parent,
        ).start()
        for broker_id in range(1, self.n + 1):
            self.start_broker(broker_id)
        return self

    def start_broker(self, broker_id: int) -> BrokerProcess:
        """Start (or restart) a broker and wait until the controller unfenced it.

        A restarted broker listens on the address it had before, as a Kafka broker
        does (its listeners are in its config): clients keep their bootstrap list,
        and librdkafka, which goes back to that list when it loses its connections
        (metadata.recovery.strategy=rebootstrap), finds the cluster again. Only if
        that port was taken meanwhile does it get a new one. (The inter-broker
        listener may move: brokers find each other through the controller.)"""
        props = self._props(broker_id)
        previous = self.brokers.get(broker_id)
        first, *others = props["listeners"].split(",")
        if previous and previous.bootstrap_servers and first.endswith(":0"):
            port = previous.bootstrap_servers.rsplit(":", 1)[1]
            listeners = ",".join([first[:-1] + port, *others])
            try:
                return self._start(broker_id, {**props, "listeners": listeners})
            except RuntimeError as e:
                if "address already in use" not in str(e).lower():
                    raise
        return self._start(broker_id, props)

    def _start(self, broker_id: int, props: dict[str, str]) -> BrokerProcess:
        broker = BrokerProcess(props, exit_with_parent=not self.outlive_parent).start()
        self.brokers[broker_id] = broker
        if not broker.wait_for_line("registered and unfenced", 60):
            raise RuntimeError(f"broker {broker_id} did not join:\n" + "".join(broker.output))
        return broker

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(
            b.bootstrap_servers
            for b in self.brokers.values()
            if b.process is not None and b.process.poll() is None
        )

    def kill(self, broker_id: int) -> None:
        """SIGKILL: no flush, no checkpoint; unflushed writes stay in the page cache.
        A quorum controller's id kills that controller."""
        self._process(broker_id).kill()

    def pause(self, broker_id: int) -> None:
        """SIGSTOP: a hung broker (a long GC pause, a stuck disk), or controller."""
        self._process(broker_id).pause()

    def resume(self, broker_id: int) -> None:
        """SIGCONT a paused broker or controller."""
        self._process(broker_id).resume()

    def broker_dir(self, broker_id: int) -> Path:
        return self.base_dir / f"broker-{broker_id}"

    def node_dir(self, node_id: int) -> Path:
        """A broker's log dir, or a controller's data dir (where its link-faults.json
        and clock.json live): a quorum's voter, or the single controller by
        SINGLE_CONTROLLER_ID."""
        if self._is_single_controller(node_id):
            assert self.controller is not None
            return self.controller.dir
        if node_id in self.controllers:
            return self._process(node_id).dir
        return self.broker_dir(node_id)

    def cut_link(
        self, a: int, b: int, both_ways: bool = True, mode: CutMode | str = CutMode.REFUSE
    ) -> None:
        """Cut the replication link a -> b (b no longer hears a) and, by default,
        b -> a too. See kafkalab.server.link_faults for what each direction means.
        `mode`: "refuse" (the connection closed at once) or "drop" (requests never
        answered: the sender waits for its request timeout).
        Either may be a controller (a quorum's voter, or the single one by
        SINGLE_CONTROLLER_ID): between two controllers the cut is of their Raft
        traffic; a controller deaf to a broker drops its requests (its heartbeats
        never arrive: fenced after the session timeout), a broker deaf to a
        controller throws its answers away (its heartbeats arrive, it learns
        nothing: its metadata goes stale)."""
        for sender, receiver in [(a, b), (b, a)] if both_ways else [(a, b)]:
            cut(self.node_dir(receiver), {sender}, mode)

    def isolate_clients(
        self,
        broker_id: int,
        mode: CutMode | str = CutMode.REFUSE,
        client_id_prefix: str | None = None,
    ) -> None:
        """Broker `broker_id` no longer hears its clients: all of them, or those whose
        client.id starts with `client_id_prefix` (a partition between a client
        process and a broker). `mode` as for `cut_link`: "refuse" closes their
        connections at once, "drop" leaves their requests unanswered until each
        client's request timeout. Brokers still hear each other."""
        isolate_clients(self.broker_dir(broker_id), mode, client_id_prefix)

    def heal_links(self) -> None:
        """Every broker and controller hears every other, and every client, again."""
        for broker_id in self.brokers:
            heal(self.broker_dir(broker_id))
        for controller in self.controllers.values():
            heal(controller.dir)
        if not self.controllers and self.controller is not None:
            heal(self.controller.dir)

    def clock_step(self, node_id: int, seconds: float) -> None:
        """Step a broker's or controller's wall clock by `seconds` (negative: back;
        the single controller is SINGLE_CONTROLLER_ID).
        It stamps records (LogAppendTime, the metadata log's batches) and rolls and
        retains segments by it; its timers (sessions, ISR lag, duties) are monotonic
        and do not move (kafkalab.server.clock)."""
        step_clock(self.node_dir(node_id), seconds * 1000)

    def clock_skew(self, node_id: int, rate: float) -> None:
        """Run a broker's or controller's wall clock at `rate` times real speed from
        now on (1.0: real speed again, keeping the drift so far)."""
        skew_clock(self.node_dir(node_id), rate)

    def clock_reset(self, node_id: int | None = None) -> None:
        """The real clock again on one node, or (None) on every node."""
        nodes = [node_id] if node_id is not None else [*self.brokers, *self.controllers]
        for n in nodes:
            reset_clock(self.node_dir(n))
        if node_id is None and self.controller is not None and not self.controllers:
            reset_clock(self.node_dir(SINGLE_CONTROLLER_ID))

    def hold_requests(self, broker_id: int, api_key: int, count: int = 1, ms: int = 60_000):
        """Broker `broker_id` holds its next `count` client requests of `api_key`
        for `ms` each, or until `release_requests` (a slow network path for client
        traffic; see kafkalab.server.link_faults)."""
        hold_requests(self.broker_dir(broker_id), api_key, count, ms)

    def release_requests(self, broker_id: int) -> None:
        """Broker `broker_id` lets every held request go now, and holds no more."""
        release_requests(self.broker_dir(broker_id))

    def describe(self, topic: str | None = None):
        """Every partition replica: broker, status, role, leader, leader epoch, LEO,
        HW, ISR (as that broker knows it), lag behind the leader, epochs."""
        states = {
            b: process_state(p.process.pid if p.process else None) for b, p in self.brokers.items()
        }
        import pandas as pd  # the labs' dependency; the cluster itself does not need it

        rows = describe_rows({b: self.broker_dir(b) for b in self.brokers}, states)
        rows = [r for r in rows if topic is None or r["topic"] == topic]
        return pd.DataFrame(rows, columns=DESCRIBE_COLUMNS)

    def power_failure(
        self, broker_id: int, *, lose_unsynced: bool = False, seed: int | None = None
    ) -> dict[str, int]:
        """SIGKILL the broker, then cut each of its logs back to its recovery point:
        what the broker knew it had fsynced (Kafka's recovery-point-offset-checkpoint).
        Everything written after it is gone, as after a power cut with data still in
        the page cache. Returns {partition: bytes cut}. Restart it with `restart`.

        `lose_unsynced=True` is lazyfs's power failure instead: every file of the node
        (segments, indexes, checkpoints, producer snapshots, quorum-state, the KRaft
        log) goes back to its last fsync, renames and new files whose directory was
        not fsynced are undone (kafkalab.storage.durability_ledger); the node must run
        with `kafkalab.lazyfs.enable=true`. With a `seed`, a log file may keep part of
        what was written after its fsync (a torn write). Returns {file: bytes lost};
        `last_power_failure` has the whole report (removed, torn)."""
        if lose_unsynced:
            node = self._process(broker_id)
            ledger = durability_ledger.ledger_dir_for(node.dir)
            if not (ledger / "roots.json").exists():
                raise ValueError(
                    f"node {broker_id} keeps no durability ledger: start it with "
                    f"{durability_ledger.LAZYFS_ENABLE_CONFIG}=true"
                )
            node.kill()
            self.last_power_failure = durability_ledger.power_failure(ledger, seed=seed)
            return self.last_power_failure.cut
        if broker_id in self.controllers:
            controller = self.controllers[broker_id]
            controller.kill()
            return {METADATA_LOG_DIR: cut_to_recovery_point(controller.dir)}
        broker = self.brokers[broker_id]
        broker.kill()
        return cut_to_recovery_points(broker.dir)

    def restart(self, broker_id: int) -> BrokerProcess:
        """Stop gracefully (SIGTERM: a controlled shutdown, its leaderships move
        first) if running, then start again with the same data. A quorum
        controller comes back on its address, with its Raft log and quorum-state."""
        if broker_id in self.controllers:
            controller = self.controllers[broker_id]
            controller.stop()
            return controller.start()
        self.brokers[broker_id].stop()
        return self.start_broker(broker_id)

    def under_replicated(self) -> list[tuple[str, int]]:
        """Partitions not fully replicated right now (see `under_replicated`)."""
        states = {
            b: process_state(p.process.pid if p.process else None) for b, p in self.brokers.items()
        }
        return under_replicated(
            describe_rows({b: self.broker_dir(b) for b in self.brokers}, states)
        )

    def rolling_restart(self, timeout_s: float = 120) -> None:
        """Restart every broker in turn, each once no partition is under-replicated
        (Kafka's rule for a rolling restart). With acks=all, RF=3 and
        min.insync.replicas=2 no acknowledged write is lost, and producers see
        leaders move (NOT_LEADER_OR_FOLLOWER, then a retry), not errors."""
        for broker_id in sorted(self.brokers):
            self.wait_fully_replicated(timeout_s)
            self.restart(broker_id)
        self.wait_fully_replicated(timeout_s)

    def wait_fully_replicated(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while stuck := self.under_replicated():
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"under-replicated after {timeout_s} s: {stuck}; each replica's "
                    f"last report: {self._replica_reports(stuck)}"
                )
            time.sleep(0.1)

    def _replica_reports(self, tps: list[tuple[str, int]]) -> dict:
        """What each broker last reported of these partitions (replica-state.json,
        pending ISR proposals included): the evidence a timeout shows."""
        out: dict = {}
        for b in self.brokers:
            for p in (read_replica_state(self.broker_dir(b)) or {}).get("partitions", []):
                if (p["topic"], p["partition"]) in tps:
                    out[f"{p['topic']}-{p['partition']}@{b}"] = p
        return out

    def stop(self) -> None:
        for broker in self.brokers.values():
            broker.stop()
        for controller in self.controllers.values():
            controller.stop()
        if self.controller is not None:
            self.controller.stop()
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
