"""NetworkClient: connections to brokers, version negotiation, and request/response.

Kafka's class: org.apache.kafka.clients.NetworkClient (with ApiVersions). The
teaching client keeps it simple and blocking: one socket per broker, requests
sent with a correlation id and the matching response read back. On connect it
sends ApiVersions and from then on uses, for each API, the highest version both
sides speak.

Metadata (Kafka: org.apache.kafka.clients.Metadata) maps topics to partitions
and partitions to their leader's node; it is refreshed on demand and when a
request fails with an error that says the leader moved.
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Any

from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import RequestHeader, decode_response, encode_request_parts
from kafkalab.protocol.messages import APIS

CLIENT_ID = "kafkalab-client"
#: Versions only brokers send each other: a client stops below them, as Kafka's Java
#: client does (AddPartitionsToTxnRequest.Builder.forClient: v3 at most; v4+ is the
#: partition leader's verify-only form, KIP-890). And versions this client does not
#: speak: it is a classic-protocol consumer that names topics, so OffsetCommit and
#: OffsetFetch stay at v7 (v8+ batch groups, v9 is for KIP-848 members, v10 uses ids);
#: and it speaks transactions version 1 (kafkalab.client.transaction_manager): it stays
#: below the versions that mean version 2 (Produce v12, EndTxn v5, TxnOffsetCommit v5),
#: at the versions it spoke before the broker declared them, as Kafka's Java client
#: caps them when `transaction.version` is not finalized at 2.
CLIENT_MAX_VERSIONS = {
    ApiKeys.ADD_PARTITIONS_TO_TXN: 3,
    ApiKeys.OFFSET_COMMIT: 7,
    ApiKeys.OFFSET_FETCH: 7,
    ApiKeys.PRODUCE: 8,
    ApiKeys.END_TXN: 3,
    ApiKeys.TXN_OFFSET_COMMIT: 3,
}
_SIZE = struct.Struct(">i")


def merge_config(
    what: str, defaults: dict[str, Any], config: dict[str, Any] | None, kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Kafka-named settings over the defaults; keyword arguments may use `_` for `.`
    (`linger_ms=5`). Unknown names are refused, so a typo does not pass silently."""
    conf = {**defaults, **(config or {}), **{k.replace("_", "."): v for k, v in kwargs.items()}}
    unknown = set(conf) - set(defaults)
    if unknown:
        raise ValueError(f"unknown {what} configs {sorted(unknown)}; known: {sorted(defaults)}")
    return conf


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int


class BrokerConnection:
    """One blocking socket to one broker."""

    def __init__(self, host: str, port: int, timeout_s: float = 30.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.broken = False
        self.versions: dict[int, int] = {}
        _, body = self._call(ApiKeys.API_VERSIONS, 0, {})
        for entry in body["api_keys"]:
            api = APIS.get(entry["api_key"])
            if api is not None:
                top = min(
                    api.max_version,
                    entry["max_version"],
                    CLIENT_MAX_VERSIONS.get(api.key, api.max_version),
                )
                if top >= max(api.min_version, entry["min_version"]):
                    self.versions[api.key] = top

    def version(self, api_key: int) -> int:
        if api_key not in self.versions:
            raise KafkaError(
                Errors.UNSUPPORTED_VERSION, f"the broker does not speak {APIS[api_key].name}"
            )
        return self.versions[api_key]

    def request(self, api_key: int, body: dict, *, expect_response: bool = True) -> dict | None:
        """Send a request at the negotiated version and return the response body."""
        return self._call(api_key, self.version(api_key), body, expect_response)[1]

    def _call(
        self, api_key: int, version: int, body: dict, expect_response: bool = True
    ) -> tuple[int, dict | None]:
        with self._lock:
            correlation_id = self._send(api_key, version, body)
            if not expect_response:
                return version, None
            return version, self._receive(api_key, version, correlation_id)

    def send(self, api_key: int, body: dict) -> tuple[int, int]:
        """Send a request at the negotiated version without waiting for its
        response: (correlation id, version), for receive(). Several requests may be
        in flight on one connection (Kafka: max.in.flight.requests.per.connection);
        the broker answers them in the order sent. Only for a connection no other
        thread uses meanwhile. Records given as a RecordsView go to the socket from
        their own buffer, not copied into the frame."""
        version = self.version(api_key)
        with self._lock:
            return self._send(api_key, version, body), version

    def receive(self, api_key: int, version: int, correlation_id: int) -> dict:
        """The response to the oldest request in flight, sent by send()."""
        with self._lock:
            return self._receive(api_key, version, correlation_id)

    def _send(self, api_key: int, version: int, body: dict) -> int:
        correlation_id = next(self._ids)
        header = RequestHeader(api_key, version, correlation_id, CLIENT_ID)
        parts = encode_request_parts(header, body)
        views = [memoryview(p if isinstance(p, (bytes, bytearray)) else p.data) for p in parts]
        try:
            while views:  # sendmsg may send only a part: go on from there
                sent = self.sock.sendmsg(views)
                while views and sent >= views[0].nbytes:
                    sent -= views[0].nbytes
                    views.pop(0)
                if views and sent:
                    views[0] = views[0][sent:]
        except OSError as e:  # the broker went away: a retriable network error
            self.broken = True
            raise KafkaError(Errors.NETWORK_EXCEPTION, str(e)) from e
        return correlation_id

    def _receive(self, api_key: int, version: int, correlation_id: int) -> dict:
        try:
            frame = self._read_frame()
        except OSError as e:
            self.broken = True
            raise KafkaError(Errors.NETWORK_EXCEPTION, str(e)) from e
        got_id, response = decode_response(APIS[api_key], version, frame)
        if got_id != correlation_id:
            raise KafkaError(
                Errors.NETWORK_EXCEPTION, f"correlation id {got_id} does not match {correlation_id}"
            )
        return response

    def _read_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._exactly(4))
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self.sock.recv(min(left, 1 << 20))
            if not chunk:
                self.broken = True
                raise KafkaError(Errors.NETWORK_EXCEPTION, "the broker closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()


class NetworkClient:
    """Connections by node id, plus the cluster metadata the producer and consumer need."""

    def __init__(self, bootstrap_servers: str, timeout_s: float = 30.0) -> None:
        self.bootstrap = [
            (host, int(port))
            for host, port in (
                s.strip().rsplit(":", 1) for s in bootstrap_servers.split(",") if s.strip()
            )
        ]
        if not self.bootstrap:
            raise ValueError("bootstrap.servers is empty: give host:port[,host:port]")
        self.timeout_s = timeout_s
        self._connections: dict[int | tuple[str, int], BrokerConnection] = {}
        self.nodes: dict[int, Node] = {}
        self.partitions: dict[str, dict[int, int]] = {}  # topic -> partition -> leader id
        self.topic_errors: dict[str, Errors] = {}
        self._lock = threading.Lock()

    def _connect(self, key, host: str, port: int) -> BrokerConnection:
        with self._lock:
            conn = self._connections.get(key)
            if conn is not None and conn.broken:
                conn.close()
                conn = None
            if conn is None:
                conn = BrokerConnection(host, port, self.timeout_s)
                self._connections[key] = conn
            return conn

    def any_connection(self) -> BrokerConnection:
        last_error: Exception | None = None
        for host, port in self.bootstrap:
            try:
                return self._connect((host, port), host, port)
            except (OSError, KafkaError) as e:
                last_error = e
        raise KafkaError(
            Errors.NETWORK_EXCEPTION,
            f"no bootstrap server answered ({self.bootstrap}): {last_error}",
        )

    def connection(self, node_id: int) -> BrokerConnection:
        node = self.nodes.get(node_id)
        if node is None:
            self.refresh_metadata()
            node = self.nodes[node_id]
        return self._connect(node_id, node.host, node.port)

    def drop(self, node_id: int) -> None:
        with self._lock:
            conn = self._connections.pop(node_id, None)
        if conn is not None:
            conn.close()

    def refresh_metadata(
        self, topics: list[str] | None = None, allow_auto_topic_creation: bool = True
    ) -> dict:
        body = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": allow_auto_topic_creation,
        }
        response = self.any_connection().request(ApiKeys.METADATA, body)
        self.nodes = {
            b["node_id"]: Node(b["node_id"], b["host"], b["port"]) for b in response["brokers"]
        }
        for topic in response["topics"]:
            error = Errors(topic["error_code"])
            self.topic_errors[topic["name"]] = error
            if error == Errors.NONE:
                self.partitions[topic["name"]] = {
                    p["partition_index"]: p["leader_id"] for p in topic["partitions"]
                }
        return response

    def partitions_for(self, topic: str) -> dict[int, int]:
        if topic not in self.partitions:
            self.refresh_metadata([topic])
        if topic not in self.partitions:
            raise KafkaError(
                self.topic_errors.get(topic, Errors.UNKNOWN_TOPIC_OR_PARTITION), f"topic {topic!r}"
            )
        return self.partitions[topic]

    def leader_for(self, topic: str, partition: int) -> int:
        leader = self.partitions_for(topic).get(partition, -1)
        if leader < 0:
            raise KafkaError(Errors.LEADER_NOT_AVAILABLE, f"{topic}-{partition}")
        return leader

    def close(self) -> None:
        with self._lock:
            for conn in self._connections.values():
                conn.close()
            self._connections.clear()
