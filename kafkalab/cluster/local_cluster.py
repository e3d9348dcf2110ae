"""LocalCluster: a controller and N brokers as real processes on loopback.

    with LocalCluster(brokers=3) as cluster:
        cluster.bootstrap_servers        # "127.0.0.1:port,..."
        cluster.kill(2)                  # SIGKILL broker 2
        cluster.restart(2)

Each process has its own data directory under `base_dir`; every process the
cluster starts it stops, also when a test fails (`__exit__`).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from kafkalab.server.broker import BrokerProcess
from kafkalab.storage.checkpoint_file import (
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkalab.storage.file_records import FileRecords
from kafkalab.storage.unified_log import parse_topic_partition


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
        point = points.get(tp, 0)
        removed = 0
        for log_path in sorted(partition_dir.glob("*.log")):
            base = int(log_path.stem)
            if base > point:  # written entirely after the last fsync: gone
                removed += log_path.stat().st_size
                log_path.unlink()
                continue
            records = FileRecords.open(log_path)
            try:
                found = records.search_for_offset_with_size(point, 0)
                if found is not None:
                    removed += records.truncate_to(found.position)
            finally:
                records.close()
        # Indexes past the cut are stale; recovery rebuilds them from the logs.
        for index in [*partition_dir.glob("*.index"), *partition_dir.glob("*.timeindex")]:
            index.unlink()
        cut[partition_dir.name] = removed
    return cut


class LocalCluster:
    def __init__(
        self,
        brokers: int = 3,
        base_dir: str | Path | None = None,
        broker_props: dict[str, str] | None = None,
        session_timeout_ms: int = 3000,
    ) -> None:
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir or tempfile.mkdtemp(prefix="kafkalab-cluster-"))
        self.n = brokers
        self.broker_props = dict(broker_props or {})
        self.session_timeout_ms = session_timeout_ms
        self.controller: BrokerProcess | None = None
        self.brokers: dict[int, BrokerProcess] = {}

    def _props(self, broker_id: int) -> dict[str, str]:
        assert self.controller is not None
        return {
            "node.id": str(broker_id),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.base_dir / f"broker-{broker_id}"),
            "controller.quorum.bootstrap.servers": self.controller.bootstrap_servers,
            "broker.heartbeat.interval.ms": "250",
            "default.replication.factor": str(min(3, self.n)),
            **self.broker_props,
        }

    def start(self) -> LocalCluster:
        self.controller = BrokerProcess(
            {
                "listeners": "CONTROLLER://127.0.0.1:0",
                "log.dirs": str(self.base_dir / "controller"),
                "broker.session.timeout.ms": str(self.session_timeout_ms),
            },
            verb="controller",
        ).start()
        for broker_id in range(1, self.n + 1):
            self.start_broker(broker_id)
        return self

    def start_broker(self, broker_id: int) -> BrokerProcess:
        """Start (or restart) a broker and wait until the controller unfenced it."""
        broker = BrokerProcess(self._props(broker_id)).start()
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
        self.brokers[broker_id].kill()

    def power_failure(self, broker_id: int) -> dict[str, int]:
        """SIGKILL the broker, then cut each of its logs back to its recovery point:
        what the broker knew it had fsynced (Kafka's recovery-point-offset-checkpoint).
        Everything written after it is gone, as after a power cut with data still in
        the page cache. Returns {partition: bytes cut}. Restart it with `restart`."""
        broker = self.brokers[broker_id]
        broker.kill()
        return cut_to_recovery_points(broker.dir)

    def restart(self, broker_id: int) -> BrokerProcess:
        """Stop (SIGTERM) if running, then start again with the same data."""
        self.brokers[broker_id].stop()
        return self.start_broker(broker_id)

    def stop(self) -> None:
        for broker in self.brokers.values():
            broker.stop()
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
