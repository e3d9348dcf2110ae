"""InterBrokerConnection: one connection from this broker to another node, one request at a time.

Kafka's classes: the NetworkClient under NodeToControllerChannelManager (a
broker's requests to the controller) and ReplicaFetcherBlockingSend (a
follower's requests to its leader). Enough for these control paths: a request
is written, its response awaited, and the next one waits its turn. A broken
connection raises KafkaError(NETWORK_EXCEPTION) and is opened again on the
next request. With a request timeout, a request not answered in time raises
KafkaError(REQUEST_TIMED_OUT) and closes the connection, as Kafka's
NetworkClient disconnects on a request timeout (a silently dropped request,
kafkalab's link faults, is only ever ended this way).

`replica_fetch_request` builds the Fetch body a follower sends, the same for
a broker reading the controller's metadata log (`__cluster_metadata-0`) and
for a replica fetcher reading its leader's partitions.

A broker's requests to another broker carry its identity in the client id,
`broker-<node id>-epoch-<broker epoch>` (`broker_client_id`): KIP-903 puts the
broker epoch in a follower's Fetch (ReplicaState, Fetch v15+); on the Fetch
v11 we speak, the header's client id carries it, and the leader accepts a
follower fetch only from a broker registered in that epoch.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import struct
from collections.abc import Callable

from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import RequestHeader, decode_response, encode_request
from kafkalab.protocol.messages import Api

_SIZE = struct.Struct(">i")

#: The Fetch version brokers send each other (the newest non-flexible one).
REPLICA_FETCH_VERSION = 11
_BROKER_CLIENT_ID = re.compile(r"broker-(\d+)-epoch-(-?\d+)")


def broker_client_id(broker_id: int, broker_epoch: int) -> str:
    """The client id of a broker's requests to another broker: who it is, in which
    broker epoch (what KIP-903's ReplicaState says in Fetch v15+)."""
    return f"broker-{broker_id}-epoch-{broker_epoch}"


def parse_broker_client_id(client_id: str | None) -> tuple[int, int] | None:
    """(node id, broker epoch) from `broker_client_id`'s form; None for any other."""
    m = _BROKER_CLIENT_ID.fullmatch(client_id or "")
    return (int(m[1]), int(m[2])) if m else None


class InterBrokerConnection:
    def __init__(
        self,
        host: str,
        port: int,
        schemas: dict[ApiKeys, Api],
        client_id: Callable[[], str] | None = None,
        request_timeout_ms: int | None = None,
    ) -> None:
        """`client_id`: asked before each request (a broker epoch changes when the
        broker registers again); "kafkalab-broker" when not given.
        `request_timeout_ms`: how long to wait for an answer (None: as long as the
        connection lives)."""
        self.host, self.port, self.schemas = host, port, schemas
        self.request_timeout_ms = request_timeout_ms
        self.client_id = client_id or (lambda: "kafkalab-broker")
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def request(self, api_key: ApiKeys, version: int, body: dict) -> dict:
        async with self._lock:
            try:
                if self._streams is None:
                    self._streams = await asyncio.open_connection(self.host, self.port)
                reader, writer = self._streams
                cid = next(self._ids)
                writer.write(
                    encode_request(
                        RequestHeader(api_key, version, cid, self.client_id()), body, self.schemas
                    )
                )
                await writer.drain()
                if self.request_timeout_ms is None:
                    frame = await _read_frame(reader)
                else:
                    # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the
                    # answer when it arrives just as the caller is cancelled, and the
                    # caller's loop never learns it was stopped (a broker's stop hung).
                    async with asyncio.timeout(self.request_timeout_ms / 1000):
                        frame = await _read_frame(reader)
            except TimeoutError as e:
                self.close()
                raise KafkaError(
                    Errors.REQUEST_TIMED_OUT,
                    f"{self.host}:{self.port}: no answer in {self.request_timeout_ms} ms",
                ) from e
            except (OSError, asyncio.IncompleteReadError) as e:
                self.close()
                raise KafkaError(Errors.NETWORK_EXCEPTION, f"{self.host}:{self.port}: {e}") from e
        _, response = decode_response(self.schemas[api_key], version, frame)
        return response

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    return await reader.readexactly(size)


def _by_topic(tps: list[tuple[str, int]]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for topic, partition in tps:
        topics.setdefault(topic, []).append(partition)
    return topics


def replica_fetch_request(
    replica_id: int,
    partitions: list[tuple[str, int, int, int]] | list[tuple[str, int, int, int, int]],
    max_wait_ms: int,
    min_bytes: int,
    partition_max_bytes: int = 1 << 20,
    session_id: int = 0,
    session_epoch: int = -1,
    forgotten: list[tuple[str, int]] = (),  # type: ignore[assignment]
) -> dict:
    """A Fetch v11 body from a replica: `partitions` as (topic, partition, fetch
    offset, current leader epoch or -1[, log start offset]). A follower's fetch
    offset is its log end offset, and its log start offset is where its log
    begins, which is how its leader learns both (the latter for DeleteRecords).
    Sessionless unless `session_id`/`session_epoch` say otherwise (KIP-227:
    `forgotten` are the partitions an incremental fetch drops from its session)."""
    topics: dict[str, list[dict]] = {}
    for topic, partition, fetch_offset, leader_epoch, *start in partitions:
        topics.setdefault(topic, []).append(
            {
                "partition": partition,
                "current_leader_epoch": leader_epoch,
                "fetch_offset": fetch_offset,
                "log_start_offset": start[0] if start else -1,
                "partition_max_bytes": partition_max_bytes,
            }
        )
    return {
        "replica_id": replica_id,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": 10 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": session_epoch,
        "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
        "forgotten_topics_data": [
            {"topic": t, "partitions": ps} for t, ps in _by_topic(forgotten).items()
        ],
        "rack_id": "",
    }
