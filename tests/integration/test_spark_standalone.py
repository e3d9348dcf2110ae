"""kafkalab.spark on a Spark standalone cluster, not local mode: a master and two
workers started with pyspark's own launcher (`bin/spark-class`), executors in
their own JVMs, their Python workers running this venv's interpreter
(PYSPARK_PYTHON), as the README's Spark section documents. A batch write and read
through it against a real broker must give exactly the records librdkafka reads,
and a streaming query (Trigger.AvailableNow) must copy them to another topic. Every JVM started here is stopped, also when the test fails."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spark_helpers import consume_all, create_topic

from kafkalab.server.broker import BrokerThread

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited {proc.returncode}: {log.read_text()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"port {port} never opened: {log.read_text()[-3000:]}")


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, stack = [], [pid]
    while stack:
        for c in children.get(stack.pop(), []):
            out.append(c)
            stack.append(c)
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


class Standalone:
    """A standalone master and workers, each `spark-class` in its own process group."""

    def __init__(self, tmp: Path, workers: int = 2) -> None:
        import pyspark

        self.home = Path(pyspark.__file__).parent
        self.tmp = tmp
        self.env = {
            **os.environ,
            "SPARK_HOME": str(self.home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_LOG_DIR": str(tmp / "logs"),
            "PYSPARK_PYTHON": sys.executable,
        }
        self.procs: list[subprocess.Popen] = []
        self.n_workers = workers
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        log = self.tmp / f"{name}.log"
        proc = subprocess.Popen(
            [str(self.home / "bin" / "spark-class"), *args],
            env=self.env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        master = self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(free_port()),
        )  # fmt: skip
        wait_port(self.port, master, self.tmp / "master.log")
        for i in range(self.n_workers):
            port = free_port()
            work = self.tmp / f"work-{i}"
            work.mkdir()
            worker = self._start(
                f"worker-{i}",
                "org.apache.spark.deploy.worker.Worker",
                self.url,
                "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port()),
                "--cores", "1", "--memory", "768m", "--work-dir", str(work),
            )  # fmt: skip
            wait_port(port, worker, self.tmp / f"worker-{i}.log")
        self.workers = self.procs[1:]

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


@pytest.fixture
def standalone(tmp_path):
    pytest.importorskip("pyspark", reason="pyspark is in the labs extra")
    pytest.importorskip("pyarrow", reason="pyarrow is in the labs extra")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java 17 runtime (scripts/ensure-system-deps.sh installs it)")
    cluster = Standalone(tmp_path)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def broker(tmp_path):
    with BrokerThread({"log.dirs": str(tmp_path / "broker")}) as b:
        yield b


def test_batch_and_stream_on_a_standalone_cluster(standalone, broker, monkeypatch, tmp_path):
    from pyspark.sql import SparkSession

    from kafkalab.spark import register
    from kafkalab.spark.session import spark_settings

    settings = spark_settings(
        2,
        **{
            "spark.driver.memory": "1g",
            "spark.driver.host": "127.0.0.1",
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
            # The executors' Python workers run this venv's interpreter; this
            # checkout's kafkalab goes on their path (a packed venv brings its own).
            "spark.executorEnv.PYTHONPATH": str(ROOT),
        },
    )
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(standalone.url).appName("kafkalab-standalone")
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        register(spark)
        sc = spark.sparkContext
        driver_jvm = int(sc._jvm.ProcessHandle.current().pid())
        deadline = time.monotonic() + 120
        while sc._jsc.sc().getExecutorMemoryStatus().size() < 3:  # the driver and 2 executors
            assert time.monotonic() < deadline, "the two executors never registered"
            time.sleep(0.5)
        # Each worker launched an executor JVM of its own for this application.
        for worker in standalone.workers:
            jvms = [
                p for p in descendants(worker.pid) if "CoarseGrainedExecutorBackend" in cmdline(p)
            ]
            assert len(jvms) == 1, [cmdline(p) for p in descendants(worker.pid)]

        bs = broker.bootstrap_servers
        create_topic(bs, "standalone", partitions=4)
        n = 20_000
        source = spark.range(n, numPartitions=4).selectExpr(
            "CAST(id % 101 AS STRING) AS key", "CONCAT('rec-', id) AS value"
        )
        source.write.format("kafkalab").option("kafka.bootstrap.servers", bs).option(
            "topic", "standalone"
        ).mode("append").save()
        df = (
            spark.read.format("kafkalab")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", "standalone")
            .option("minPartitions", "8")
            .load()
        )

        # The read's Python ran under an executor JVM, not under the driver's.
        def executor_jvm() -> int | None:  # defined here: pickled by value to the executors
            import os
            from pathlib import Path

            pid = os.getpid()
            while pid > 1:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                if b"CoarseGrainedExecutorBackend" in cmd:
                    return pid
                pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            return None

        under = df.rdd.mapPartitions(lambda rows: [(sum(1 for _ in rows), executor_jvm())])
        assert all(jvm and jvm != driver_jvm for _, jvm in under.collect())
        rows = df.select("key", "value", "partition", "offset").collect()
        direct = consume_all(bs, "standalone", 4)
        assert len(rows) == n
        assert sorted((r.key, r.value, r.partition, r.offset) for r in rows) == sorted(
            (m.key(), m.value(), m.partition(), m.offset()) for m in direct
        )
        assert sorted(r.value for r in rows) == sorted(f"rec-{i}".encode() for i in range(n))

        # A streaming query through the same executors copies the topic, exactly.
        create_topic(bs, "standalone-copy", partitions=3)
        q = (
            spark.readStream.format("kafkalab")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", "standalone")
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("key", "value")
            .writeStream.format("kafkalab")
            .option("kafka.bootstrap.servers", bs)
            .option("topic", "standalone-copy")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            q.awaitTermination(300)
            assert q.exception() is None
            assert not q.isActive, "the streaming copy did not finish within 300 s"
        finally:
            q.stop()
        copied = consume_all(bs, "standalone-copy", 3)
        assert sorted((m.key(), m.value()) for m in copied) == sorted(
            (m.key(), m.value()) for m in direct
        )
    finally:
        spark.stop()
