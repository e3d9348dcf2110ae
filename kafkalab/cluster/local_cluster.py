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

    def restart(self, broker_id: int) -> BrokerProcess:
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
