"""Protocol fuzz: hostile frames against a live broker while real clients keep working.

    .venv/bin/python benchmarks/fuzz_protocol.py --frames 1000000 --seed 1
    .venv/bin/python benchmarks/fuzz_protocol.py --seed 1 --no-capture --only 1234   # frame 1234 again

Frame n of a seed is the same bytes for the same templates: with --no-capture
(schema samples only) always; librdkafka's captured requests carry timestamps and
producer ids, so with them a frame is reproduced by the same run's templates.

A kafkalab broker runs in its own process. `--connections` asyncio connections
send frames from kafkalab.protocol.fuzz.HostileFrames (mutations of a valid
request of every API and version the broker advertises, plus requests captured
from librdkafka through a recording proxy), each followed by an ApiVersions
probe, and classify what the broker did: answered (the probe's answer came
back), closed the connection, or neither within --timeout (a long poll, acks=0).
Every answer to a request the broker could parse must decode with that API's
response schema and carry its correlation id. Meanwhile a librdkafka producer
(idempotent, acks=all) and consumer work on their own topic and count every
error they see; at the end the consumer must have read exactly what the producer
got acknowledged, in order. A janitor deletes the topics the fuzz created
(mutated names in Metadata v0-v3 and CreateTopics v0 auto-create them, as in Kafka).

What must hold (the CI slice, tests/integration/test_protocol_fuzz.py, asserts it):
no unhandled exception in the broker's log, no error seen by the well-behaved
clients, no answer that does not decode, the broker alive and stopping cleanly,
its open sockets back to where they were, and its peak RSS (VmHWM) bounded:
a hostile length never makes the broker allocate it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import gc
import json
import os
import socket
import struct
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafkalab.protocol import APIS, RequestHeader, decode_response, encode_request
from kafkalab.protocol.fuzz import (
    TARGET_TOPIC,
    HostileFrames,
    Mutation,
    Template,
    sample_templates,
    template_for,
)
from kafkalab.server.broker import BrokerProcess

PROBE_ID = -0x5A5A5A5B  # the correlation id of the ApiVersions probe behind each frame
PROBE = encode_request(RequestHeader(18, 0, PROBE_ID, "probe"), {})
GOOD_TOPIC = "well-behaved"
KEEP_TOPICS = {TARGET_TOPIC, GOOD_TOPIC}
_SIZE = struct.Struct(">i")

# What counts as an unhandled exception in the broker's output: anything logged at
# ERROR or above (log.exception included), a traceback, asyncio's own complaints.
EXCEPTION_MARKERS = (
    " ERROR ",
    " CRITICAL ",
    "Traceback (most recent call last)",
    "Task exception was never retrieved",
    "Exception in callback",
    "Unhandled",
)


@dataclass
class FuzzReport:
    frames: int
    seed: int
    connections: int
    templates: int
    captured_templates: int
    advertised_api_keys: list[int]
    api_keys_sent: list[int]
    kinds: dict[str, int]
    answered: int = 0
    closed_by_broker: int = 0
    hung_up: int = 0
    timed_out: int = 0
    # the hostile frames behind those, by "ApiName/mutation": a parked request
    # (a long poll, a rebalance, acks within a timeout) holds the probe back
    timed_out_by: dict[str, int] = field(default_factory=dict)
    undecodable_responses: list[str] = field(default_factory=list)
    valid_refused: list[str] = field(default_factory=list)
    broker_exceptions: list[str] = field(default_factory=list)
    well_behaved_acked: int = 0
    well_behaved_consumed: int = 0
    well_behaved_errors: list[str] = field(default_factory=list)
    janitor_deleted_topics: int = 0
    broker_alive_after: bool = False
    broker_exit_code: int | None = None
    rss_start_kb: int = 0
    rss_peak_kb: int = 0
    rss_end_kb: int = 0
    sockets_start: int = 0
    sockets_end: int = 0
    lingering_sockets: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.wall_s if self.wall_s else 0.0

    def table(self) -> str:
        rows = [
            ("frames sent", f"{self.frames:,}"),
            ("seed", str(self.seed)),
            ("concurrent connections", str(self.connections)),
            (
                "templates (schema + captured)",
                f"{self.templates - self.captured_templates} + {self.captured_templates}",
            ),
            (
                "API keys advertised / fuzzed",
                f"{len(self.advertised_api_keys)} / "
                f"{len(set(self.api_keys_sent) & set(self.advertised_api_keys))}",
            ),
            ("answered", f"{self.answered:,}"),
            ("connections closed by the broker", f"{self.closed_by_broker:,}"),
            ("frames cut short by the fuzzer (hung up)", f"{self.hung_up:,}"),
            ("no answer within the timeout", f"{self.timed_out:,}"),
            ("answers that do not decode", str(len(self.undecodable_responses))),
            ("valid requests refused (connection closed)", str(len(self.valid_refused))),
            ("broker exceptions (unhandled)", str(len(self.broker_exceptions))),
            (
                "well-behaved records acked / consumed",
                f"{self.well_behaved_acked:,} / {self.well_behaved_consumed:,}",
            ),
            ("well-behaved client errors", str(len(self.well_behaved_errors))),
            ("topics the fuzz created (janitor deleted)", f"{self.janitor_deleted_topics:,}"),
            (
                "broker alive after / exit code",
                f"{self.broker_alive_after} / {self.broker_exit_code}",
            ),
            (
                "broker RSS start / peak / end (MB)",
                f"{self.rss_start_kb / 1024:.0f} / {self.rss_peak_kb / 1024:.0f} / "
                f"{self.rss_end_kb / 1024:.0f}",
            ),
            ("broker open sockets before / after", f"{self.sockets_start} / {self.sockets_end}"),
            ("wall time (s) / frames per s", f"{self.wall_s:.0f} / {self.frames_per_s:,.0f}"),
        ]
        width = max(len(r[0]) for r in rows)
        lines = ["| measurement | result |", "|---|---:|"]
        lines += [f"| {name.ljust(width)} | {value} |" for name, value in rows]
        lines.append("kinds: " + ", ".join(f"{k} {v:,}" for k, v in sorted(self.kinds.items())))
        for title, items in (
            ("broker exceptions", self.broker_exceptions),
            ("undecodable answers", self.undecodable_responses),
            ("valid requests refused", self.valid_refused),
            ("well-behaved errors", self.well_behaved_errors),
            ("lingering broker sockets", self.lingering_sockets),
        ):
            for item in items[:20]:
                lines.append(f"{title}: {item}")
        return "\n".join(lines)

    @property
    def ok(self) -> bool:
        return (
            not self.broker_exceptions
            and not self.undecodable_responses
            and not self.valid_refused
            and not self.well_behaved_errors
            and self.broker_alive_after
            and self.broker_exit_code == 0
            and self.well_behaved_consumed == self.well_behaved_acked > 0
            and self.sockets_end <= self.sockets_start
        )


# -- the broker's process: memory, descriptors, output -------------------------------------


def proc_status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            out[key] = int(value.split()[0])
    return out


def socket_peers(pid: int) -> list[str]:
    """The process's TCP sockets as `local -> remote (state)`, to say which linger."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        cols = line.split()
        if cols[9] in inodes:
            local, remote = (int(a.split(":")[1], 16) for a in cols[1:3])
            out.append(f"port {local} -> {remote} (state {cols[3]})")
    return out


def open_sockets(pid: int) -> int:
    """The process's open sockets (its listener and its connections)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except FileNotFoundError:
            pass  # closed meanwhile
    return count


def broker_exceptions(log_path: Path, start: int = 0) -> list[str]:
    """Each unhandled exception in the broker's output: the line that reported it
    (an ERROR log line, a bare traceback, asyncio's complaint) with the exception
    that ended its traceback, if one follows."""
    found: list[str] = []
    with open(log_path, encoding="utf-8", errors="replace") as f:
        f.seek(start)
        lines = [line.rstrip("\n") for line in f]
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not any(m in line for m in EXCEPTION_MARKERS):
            continue
        what = ""  # the traceback's last line: the exception and its message
        while i < len(lines) and not lines[i].startswith("["):  # up to the next log line
            text = lines[i]
            if text.strip() and not text.startswith((" ", "\t", "Traceback", "During", "The ")):
                what = text.strip()
            i += 1
        found.append(line.strip() + (f" -> {what}" if what else ""))
    return found


# -- a small blocking client for set-up, the janitor and captures --------------------------


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            out += chunk
        return bytes(out)

    (size,) = _SIZE.unpack(exactly(4))
    return exactly(size)


def call(sock: socket.socket, api_key: int, version: int, body: dict) -> dict:
    sock.sendall(encode_request(RequestHeader(api_key, version, 1, "fuzz-control"), body))
    return decode_response(APIS[api_key], version, read_frame(sock))[1]


def create_topic(sock: socket.socket, name: str, partitions: int) -> None:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout_ms": 10_000,
        "validate_only": False,
    }
    answer = call(sock, 19, 4, body)["topics"][0]
    if answer["error_code"] not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
        raise RuntimeError(f"cannot create {name}: {answer}")


# -- capturing real clients' requests ---------------------------------------------------------


def capture_librdkafka(log_dir: str, seconds: float = 4.0) -> list[bytes]:
    """Request frames librdkafka sends, recorded by a proxy on loopback: an idempotent
    producer, a consumer and an admin client talk to a broker of their own through it
    (that broker advertises the proxy's address, so every request passes it)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    frames: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))
    proxy = f"127.0.0.1:{listener.getsockname()[1]}"
    with socket.create_server(("127.0.0.1", 0)) as free:
        host, port = free.getsockname()  # the broker's own port (it prints the proxy's)
    broker = BrokerProcess(
        {
            "log.dirs": log_dir,
            "listeners": f"PLAINTEXT://{host}:{port}",
            "advertised.listeners": f"PLAINTEXT://{proxy}",
        }
    ).start()
    with socket.create_connection((host, port), timeout=30) as sock:
        create_topic(sock, TARGET_TOPIC, 2)
    stop = threading.Event()

    def pump(src: socket.socket, dst: socket.socket, record: bool) -> None:
        buf = bytearray()
        try:
            while not stop.is_set():
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                if record:
                    buf += data
                    while len(buf) >= 4 and len(buf) >= 4 + _SIZE.unpack_from(buf)[0]:
                        n = 4 + _SIZE.unpack_from(buf)[0]
                        frames.append(bytes(buf[:n]))
                        del buf[:n]
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            upstream = socket.create_connection((host, int(port)))
            threading.Thread(target=pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=pump, args=(upstream, client, False), daemon=True).start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        common = {"bootstrap.servers": proxy, "client.id": "captured"}
        producer = Producer({**common, "enable.idempotence": True, "acks": "all"})
        for i in range(5):
            producer.produce(TARGET_TOPIC, b"captured-%d" % i, partition=0)
        producer.flush(seconds)
        consumer = Consumer({**common, "group.id": "fuzz-capture", "enable.auto.commit": False})
        consumer.assign([TopicPartition(TARGET_TOPIC, 0, 0)])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if consumer.poll(0.2) is not None:
                break
        consumer.get_watermark_offsets(TopicPartition(TARGET_TOPIC, 0), timeout=seconds)
        consumer.close()
        AdminClient(common).list_topics(timeout=seconds)
        del producer, consumer  # librdkafka handles go now, not after the broker
    finally:
        stop.set()
        acceptor.join()
        listener.close()
        broker.stop()
    return frames


# -- the well-behaved clients ------------------------------------------------------------------


class WellBehaved:
    """A librdkafka producer (idempotent, acks=all) and consumer on GOOD_TOPIC, in
    threads, counting every error either sees."""

    def __init__(self, bootstrap: str, rate: float = 200) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition

        self.errors: list[str] = []
        self.acked: list[bytes] = []
        self.consumed: list[bytes] = []
        self.rate = rate
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
                "error_cb": lambda e: self.errors.append(f"producer: {e}"),
            }
        )
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "well-behaved",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                "error_cb": lambda e: self.errors.append(f"consumer: {e}"),
            }
        )
        self.consumer.assign([TopicPartition(GOOD_TOPIC, 0, 0)])
        self._threads = [
            threading.Thread(target=self._produce, daemon=True, name="well-behaved-producer"),
            threading.Thread(target=self._consume, daemon=True, name="well-behaved-consumer"),
        ]

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(f"delivery: {err}")
        else:
            self.acked.append(msg.value())

    def _produce(self) -> None:
        n = 0
        while not self._stop_producing.is_set():
            self.producer.produce(
                GOOD_TOPIC, b"good-%d" % n, partition=0, on_delivery=self._delivered
            )
            n += 1
            self.producer.poll(0)
            time.sleep(1 / self.rate)
        if self.producer.flush(60):
            self.errors.append("producer: records still unacknowledged after 60 s")

    def _consume(self) -> None:
        while not self._stop_consuming.is_set():
            m = self.consumer.poll(0.2)
            if m is None:
                continue
            if m.error() is not None:
                self.errors.append(f"consumer record: {m.error()}")
            else:
                self.consumed.append(m.value())
        self.consumer.close()

    def start(self) -> WellBehaved:
        for t in self._threads:
            t.start()
        return self

    def stop(self, timeout: float = 60) -> None:
        self._stop_producing.set()
        self._threads[0].join()
        deadline = time.monotonic() + timeout
        while len(self.consumed) < len(self.acked) and time.monotonic() < deadline:
            time.sleep(0.1)
        self._stop_consuming.set()
        self._threads[1].join()
        del self.producer, self.consumer
        if self.consumed != self.acked:
            self.errors.append(
                f"consumed {len(self.consumed)} records, acknowledged {len(self.acked)}: "
                "they differ"
            )


# -- the fuzzer -------------------------------------------------------------------------------


class Fuzzer:
    def __init__(
        self,
        host: str,
        port: int,
        frames: HostileFrames,
        numbers: list[int],
        connections: int,
        timeout: float,
        report: FuzzReport,
    ) -> None:
        self.host, self.port = host, port
        self.frames = frames
        self.numbers = collections.deque(numbers)
        self.connections = connections
        self.timeout = timeout
        self.report = report
        self.kinds: collections.Counter[str] = collections.Counter()
        self.api_keys: set[int] = set()
        self.done = 0
        self.deadline = float("inf")  # stop sending at this time.monotonic() (--max-seconds)

    async def run(self) -> None:
        await asyncio.gather(*(self._worker() for _ in range(self.connections)))

    async def _worker(self) -> None:
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        while self.numbers and time.monotonic() < self.deadline:
            hostile = self.frames.frame(self.numbers.popleft())
            self.kinds[hostile.kind] += 1
            self.api_keys.add(hostile.api_key)
            if conn is None:
                conn = await asyncio.open_connection(self.host, self.port)
                conn[1].get_extra_info("socket").setsockopt(
                    socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
                )
            keep = await self._one(conn, hostile)
            self.done += 1
            if not keep:
                conn[1].close()
                conn = None
        if conn is not None:
            conn[1].close()

    async def _one(self, conn, hostile) -> bool:
        reader, writer = conn
        data = hostile.data
        try:
            if hostile.chunks > 1:
                step = max(1, len(data) // hostile.chunks)
                for i in range(0, len(data), step):
                    writer.write(data[i : i + step])
                    await writer.drain()
                    await asyncio.sleep(0)
            else:
                writer.write(data)
            if hostile.hang_up:
                await writer.drain()
                self.report.hung_up += 1
                return False
            writer.write(PROBE)
            await writer.drain()
        except ConnectionError:
            self.report.closed_by_broker += 1
            return False
        try:
            return await asyncio.wait_for(self._answers(reader, hostile), self.timeout)
        except TimeoutError:
            self.report.timed_out += 1
            api = APIS.get(hostile.api_key)
            what = f"{api.name if api else hostile.api_key}/{hostile.kind}"
            self.report.timed_out_by[what] = self.report.timed_out_by.get(what, 0) + 1
            return False

    async def _answers(self, reader: asyncio.StreamReader, hostile) -> bool:
        """Read answers up to the probe's; False when the broker closed the connection."""
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                frame = await reader.readexactly(size)
                (correlation_id,) = _SIZE.unpack_from(frame)
                if correlation_id == PROBE_ID:
                    self.report.answered += 1
                    return True
                self._check_answer(hostile, frame)
        except (asyncio.IncompleteReadError, ConnectionError):
            self.report.closed_by_broker += 1
            if hostile.kind == Mutation.VALID:
                self.report.valid_refused.append(
                    f"frame {hostile.number}: a valid {APIS[hostile.api_key].name} "
                    f"v{hostile.version} closed the connection"
                )
            return False

    def _check_answer(self, hostile, frame: bytes) -> None:
        """An answer to the hostile frame itself must decode with the schema of the API
        and version its header named, and carry its correlation id."""
        if hostile.kind in (Mutation.PIPELINE, Mutation.SIZE_SMALL) or len(hostile.data) < 12:
            return  # several requests, or a frame boundary the fuzzer did not choose
        api_key, version, correlation_id = struct.unpack_from(">hhi", hostile.data, 4)
        api = APIS.get(api_key)
        if api is None:
            self.report.undecodable_responses.append(
                f"frame {hostile.number} ({hostile.kind}): an answer to unknown API {api_key}"
            )
            return
        if not api.supports(version):
            version = 0  # ApiVersions answers a version it does not speak at v0
        try:
            got, _ = decode_response(api, version, frame)
            if got != correlation_id:
                raise ValueError(f"correlation id {got}, expected {correlation_id}")
        except Exception as e:  # any failure to decode is a finding
            self.report.undecodable_responses.append(
                f"frame {hostile.number} ({hostile.kind}, {api.name} v{version}): {e}"
            )


async def janitor(host: str, port: int, report: FuzzReport, stop: asyncio.Event) -> None:
    """Delete the topics mutated names created (a blocking client in a thread)."""

    def sweep() -> None:
        with socket.create_connection((host, port), timeout=30) as sock:
            names = [t["name"] for t in call(sock, 3, 1, {"topics": None})["topics"]]
            doomed = [n for n in names if n not in KEEP_TOPICS]
            if doomed:
                call(sock, 20, 3, {"topic_names": doomed, "timeout_ms": 10_000})
                report.janitor_deleted_topics += len(doomed)
            if TARGET_TOPIC not in names:
                create_topic(sock, TARGET_TOPIC, 2)

    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), 2.0)
        except TimeoutError:
            pass
        await asyncio.to_thread(sweep)


def run_fuzz(
    frames: int,
    seed: int,
    connections: int = 16,
    timeout: float = 2.0,
    only: list[int] | None = None,
    log_dir: str | None = None,
    capture: bool = True,
    well_behaved_rate: float = 200,
    progress: bool = False,
    max_seconds: float | None = None,
) -> FuzzReport:
    """Run a fuzz campaign against a fresh broker process; see the module docstring."""
    log_dir = log_dir or tempfile.mkdtemp(prefix="kafkalab-fuzz-")
    broker = BrokerProcess({"log.dirs": str(Path(log_dir) / "broker")}).start()
    pid = broker.process.pid
    host, port = broker.bootstrap_servers.split(":")
    port_n = int(port)
    well_behaved = None
    sockets_before = open_sockets(pid)
    try:
        with socket.create_connection((host, port_n), timeout=30) as sock:
            versions = call(sock, 18, 0, {})
            create_topic(sock, TARGET_TOPIC, 2)
            create_topic(sock, GOOD_TOPIC, 1)
        advertised = sorted(k["api_key"] for k in versions["api_keys"])
        templates: list[Template] = sample_templates({k: APIS[k] for k in advertised})
        captured = 0
        if capture:
            for frame in capture_librdkafka(str(Path(log_dir) / "capture")):
                t = template_for(frame, APIS, source="librdkafka")
                if t is not None:
                    templates.append(t)
                    captured += 1
        report = FuzzReport(
            frames=len(only) if only else frames,
            seed=seed,
            connections=connections,
            templates=len(templates),
            captured_templates=captured,
            advertised_api_keys=advertised,
            api_keys_sent=[],
            kinds={},
        )
        start_status = proc_status(pid)
        report.rss_start_kb = start_status["VmRSS"]
        report.sockets_start = sockets_before
        well_behaved = WellBehaved(broker.bootstrap_servers, well_behaved_rate).start()
        fuzzer = Fuzzer(
            host,
            port_n,
            HostileFrames(seed, templates),
            only if only else list(range(frames)),
            connections,
            timeout,
            report,
        )

        async def main() -> None:
            stop = asyncio.Event()
            sweeper = asyncio.create_task(janitor(host, port_n, report, stop))
            reporter = asyncio.create_task(_progress(fuzzer, report, pid)) if progress else None
            try:
                await fuzzer.run()
            finally:
                stop.set()
                await sweeper
                if reporter:
                    reporter.cancel()

        started = time.monotonic()
        if max_seconds is not None:
            fuzzer.deadline = started + max_seconds
        asyncio.run(main())
        report.wall_s = time.monotonic() - started
        report.frames = fuzzer.done  # fewer than asked when --max-seconds ran out
        report.kinds = dict(fuzzer.kinds)
        report.api_keys_sent = sorted(fuzzer.api_keys)
        well_behaved.stop()
        report.well_behaved_errors = list(well_behaved.errors)
        report.well_behaved_acked = len(well_behaved.acked)
        report.well_behaved_consumed = len(well_behaved.consumed)
        well_behaved = None  # librdkafka's handles go, and their connections
        gc.collect()
        time.sleep(1.0)  # the broker sees the last connections go
        report.broker_alive_after = broker.process.poll() is None
        if report.broker_alive_after:
            status = proc_status(pid)
            report.rss_peak_kb, report.rss_end_kb = status["VmHWM"], status["VmRSS"]
            report.sockets_end = open_sockets(pid)
            if report.sockets_end > report.sockets_start:
                report.lingering_sockets = socket_peers(pid)
    finally:
        if well_behaved is not None:
            well_behaved.stop(timeout=5)
        exit_code = broker.stop()
    report.broker_exit_code = exit_code
    report.broker_exceptions = broker_exceptions(broker.log_path)
    return report


async def _progress(fuzzer: Fuzzer, report: FuzzReport, pid: int) -> None:
    started = time.monotonic()
    while True:
        await asyncio.sleep(30)
        status = proc_status(pid)
        elapsed = time.monotonic() - started
        print(
            f"[{elapsed:6.0f} s] {fuzzer.done:,} frames ({fuzzer.done / elapsed:,.0f}/s), "
            f"closed {report.closed_by_broker:,}, timeouts {report.timed_out:,}, "
            f"RSS {status['VmRSS'] / 1024:.0f} MB (peak {status['VmHWM'] / 1024:.0f})",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for an answer")
    parser.add_argument("--only", type=int, action="append", help="send only frame N (repeatable)")
    parser.add_argument("--log-dir", help="the broker's log dir (default: a new temp dir)")
    parser.add_argument("--no-capture", action="store_true", help="schema samples only")
    parser.add_argument(
        "--max-seconds", type=float, help="stop sending after this long and report what was sent"
    )
    args = parser.parse_args(argv)
    report = run_fuzz(
        args.frames,
        args.seed,
        args.connections,
        args.timeout,
        args.only,
        args.log_dir,
        capture=not args.no_capture,
        progress=True,
        max_seconds=args.max_seconds,
    )
    print(report.table())
    if report.timed_out_by:
        slowest = sorted(report.timed_out_by.items(), key=lambda kv: -kv[1])
        print(
            "no answer within the timeout, by API/mutation: "
            + ", ".join(f"{k} {v}" for k, v in slowest)
        )
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "fuzz.json").write_text(json.dumps(dataclasses.asdict(report), indent=1, default=str))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

__all__ = ["FuzzReport", "run_fuzz"]
