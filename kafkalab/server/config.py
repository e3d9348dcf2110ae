"""KafkaConfig: a broker's settings from a server.properties file, Kafka's key names.

Kafka's class: kafka.server.KafkaConfig. The file is Java properties: `key=value`
lines, `#` comments. `--override key=value` on the command line wins, as with
kafka-server-start.sh. Unknown keys are kept (a real server.properties has many)
but only the ones below change what kafkalab does.

Listeners: `listeners=PLAINTEXT://127.0.0.1:9092,BROKER://127.0.0.1:9093` opens one
server socket per listener; `inter.broker.listener.name=BROKER` names the one brokers
use among themselves (default: the first). Only requests that arrive there count as
coming from a broker (follower fetches, WriteTxnMarkers): with no authentication, the
listener stands for the broker principal of a secured Kafka cluster. Every listener
is PLAINTEXT here (`listener.security.protocol.map` is kept but not used).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalab.storage.log_config import BROKER_TIMESTAMP_AFTER_MAX_MS, InvalidConfigError, LogConfig

DEFAULT_LISTENER = "PLAINTEXT://127.0.0.1:9092"


def read_properties(path: str | Path) -> dict[str, str]:
    props: dict[str, str] = {}
    for number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        for sep in ("=", ":"):
            if sep in line:
                key, value = line.split(sep, 1)
                props[key.strip()] = value.strip()
                break
        else:
            raise InvalidConfigError(f"{path}:{number}: {raw!r} is not a key=value line")
    return props


def parse_listener(listener: str) -> tuple[str, str, int]:
    """`PLAINTEXT://127.0.0.1:9092` -> ('PLAINTEXT', '127.0.0.1', 9092)."""
    try:
        name, rest = listener.split("://", 1)
        host, port = rest.rsplit(":", 1)
        return name, host or "127.0.0.1", int(port)
    except ValueError:
        raise InvalidConfigError(
            f"listener {listener!r} must look like PLAINTEXT://127.0.0.1:9092 (port 0 picks one)"
        ) from None


@dataclass
class KafkaConfig:
    node_id: int = 1
    listeners: str = DEFAULT_LISTENER
    advertised_listeners: str | None = None
    log_dirs: list[str] = field(default_factory=lambda: ["/tmp/kafkalab-logs"])
    num_partitions: int = 1
    auto_create_topics_enable: bool = True
    default_replication_factor: int = 1
    socket_request_max_bytes: int = 100 * 1024 * 1024
    queued_max_requests: int = 500
    num_io_threads: int = 8
    cluster_id: str = "kafkalab-cluster"
    log_config: LogConfig = field(default_factory=lambda: _broker_log_config({}))
    log_retention_check_interval_ms: int = 300_000
    log_flush_scheduler_interval_ms: int = 2**63 - 1
    log_flush_offset_checkpoint_interval_ms: int = 60_000
    inter_broker_listener_name: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def listener_list(self) -> list[tuple[str, str, int]]:
        """(name, host, port) of every listener, in the order configured."""
        return [parse_listener(x.strip()) for x in self.listeners.split(",") if x.strip()]

    def advertised(self) -> dict[str, tuple[str, int]]:
        """What each listener advertises (`advertised.listeners`, by name; port 0 or a
        listener without one: the listener's own address, its port filled in once bound)."""
        out = {}
        for x in (self.advertised_listeners or "").split(","):
            if x.strip():
                name, host, port = parse_listener(x.strip())
                out[name] = (host, port)
        return out

    @property
    def inter_broker_listener(self) -> str:
        """The listener brokers use among themselves (inter.broker.listener.name)."""
        return self.inter_broker_listener_name or self.listener_list()[0][0]

    @classmethod
    def from_properties(cls, props: dict[str, Any]) -> KafkaConfig:
        props = {k: str(v) for k, v in props.items()}

        def get(*keys: str, default: Any = None) -> Any:
            for key in keys:
                if key in props:
                    return props[key]
            return default

        def as_int(value: Any, key: str) -> int:
            try:
                return int(value)
            except ValueError:
                raise InvalidConfigError(f"{key}={value!r} is not an integer") from None

        config = cls()
        config.node_id = as_int(get("node.id", "broker.id", default=1), "node.id")
        config.listeners = get("listeners", default=DEFAULT_LISTENER)
        config.advertised_listeners = get("advertised.listeners")
        dirs = get("log.dirs", "log.dir", default="/tmp/kafkalab-logs")
        config.log_dirs = [d.strip() for d in dirs.split(",") if d.strip()]
        config.num_partitions = as_int(get("num.partitions", default=1), "num.partitions")
        config.auto_create_topics_enable = (
            get("auto.create.topics.enable", default="true").lower() == "true"
        )
        config.default_replication_factor = as_int(
            get("default.replication.factor", default=1), "default.replication.factor"
        )
        config.socket_request_max_bytes = as_int(
            get("socket.request.max.bytes", default=config.socket_request_max_bytes),
            "socket.request.max.bytes",
        )
        config.queued_max_requests = as_int(
            get("queued.max.requests", default=500), "queued.max.requests"
        )
        config.num_io_threads = as_int(get("num.io.threads", default=8), "num.io.threads")
        config.cluster_id = get("cluster.id", default=config.cluster_id)
        config.log_retention_check_interval_ms = as_int(
            get("log.retention.check.interval.ms", default=300_000),
            "log.retention.check.interval.ms",
        )
        config.log_flush_offset_checkpoint_interval_ms = as_int(
            get("log.flush.offset.checkpoint.interval.ms", default=60_000),
            "log.flush.offset.checkpoint.interval.ms",
        )
        config.log_config = _broker_log_config(props)
        config.extra = props
        names = [name for name, _, _ in config.listener_list()]  # fail early on a bad one
        if not names or len(set(names)) != len(names):
            raise InvalidConfigError(f"listeners={config.listeners!r}: give each a distinct name")
        config.inter_broker_listener_name = get("inter.broker.listener.name")
        if config.inter_broker_listener not in names:
            raise InvalidConfigError(
                f"inter.broker.listener.name={config.inter_broker_listener!r} is not one of "
                f"the listeners {names}"
            )
        return config

    @classmethod
    def from_file(cls, path: str | Path, overrides: dict[str, str] | None = None) -> KafkaConfig:
        props = read_properties(path)
        props.update(overrides or {})
        return cls.from_properties(props)


def _broker_log_config(props: dict[str, Any]) -> LogConfig:
    """The topics' defaults from server.properties (`log.`-prefixed keys), over
    Kafka 4.0's broker defaults where a hand-built LogConfig differs from them."""
    base = LogConfig(message_timestamp_after_max_ms=BROKER_TIMESTAMP_AFTER_MAX_MS)
    return LogConfig.from_properties(props, broker_prefix=True, base=base)
