"""ControllerChannel: a broker's connection to whichever controller is active (Kafka:
NodeToControllerChannelManager with RaftControllerNodeProvider).

With one controller a broker talks to it over one InterBrokerConnection. With a quorum
(`controller.quorum.bootstrap.servers` naming several, as Kafka's brokers are given
them) only the active controller answers; the others say NOT_CONTROLLER (and, to a
metadata Fetch, NOT_LEADER_OR_FOLLOWER). This channel keeps one connection per
controller and sends to the one that answered last; a NOT_CONTROLLER answer or a
broken connection moves it to the next controller, which is asked at once, each
controller at most once per request. If none answers as the active one (an election
is under way), the caller gets the last answer (or error) and retries as it would
with one controller: the heartbeat and the metadata fetch loops do.

(Kafka's brokers go straight to the leader a response names, through its endpoint; the
voters' ids and endpoints are not in a broker's config here, so it tries them in turn.)

A controller that accepts a connection and never answers (SIGSTOPped, hung) counts as a
broken connection after `request_timeout_ms` (REQUEST_TIMEOUT_MS, Kafka's default for
controller.quorum.request.timeout.ms): the connection is closed and the next
controller asked. Without it every broker waited on a paused active controller until
it woke up, never learning of the successor the other voters had elected (the soak's
controller-pause with a leader kill inside it: the partition had no leader for as
long as the pause lasted).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import Api
from kafkalab.server.inter_broker_connection import InterBrokerConnection

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_MS = 2000


def parse_bootstrap_servers(value: str) -> list[tuple[str, int]]:
    """`controller.quorum.bootstrap.servers`: `host:port,host:port`."""
    out = []
    for item in (v.strip() for v in value.split(",")):
        if item:
            host, port = item.rsplit(":", 1)
            out.append((host, int(port)))
    if not out:
        raise ValueError("controller.quorum.bootstrap.servers names no controller")
    return out


def answered_by_standby(api_key: ApiKeys, response: dict) -> bool:
    """Did a controller that is not the active one answer this?"""
    if response.get("error_code") == Errors.NOT_CONTROLLER:
        return True
    if api_key == ApiKeys.DESCRIBE_QUORUM:
        return any(
            p["error_code"] == Errors.NOT_LEADER_OR_FOLLOWER
            for t in response.get("topics") or []
            for p in t["partitions"]
        )
    if api_key == ApiKeys.FETCH:
        return any(
            p["error_code"] == Errors.NOT_LEADER_OR_FOLLOWER
            for t in response.get("responses") or []
            for p in t["partitions"]
        )
    for value in response.values():  # CreateTopics, DeleteTopics, CreatePartitions
        if isinstance(value, list) and value and isinstance(value[0], dict):
            if all(item.get("error_code") == Errors.NOT_CONTROLLER for item in value):
                return True
    return False


class ControllerChannel:
    """InterBrokerConnection's interface (`request`, `close`) over several controllers."""

    def __init__(
        self,
        addresses: Sequence[tuple[str, int]],
        schemas: dict[ApiKeys, Api],
        client_id: Callable[[], str] | None = None,
        request_timeout_ms: int = REQUEST_TIMEOUT_MS,
    ) -> None:
        self.addresses = list(addresses)
        self.request_timeout_s = request_timeout_ms / 1000
        self._connections = [InterBrokerConnection(h, p, schemas, client_id) for h, p in addresses]
        self.current = 0  # the controller that answered last

    async def request(self, api_key: ApiKeys, version: int, body: dict) -> dict:
        last: dict | KafkaError | None = None
        for _ in range(len(self._connections)):
            conn = self._connections[self.current]
            try:
                response = await asyncio.wait_for(
                    conn.request(api_key, version, body), self.request_timeout_s
                )
            except TimeoutError:
                conn.close()  # a late answer must not be read as the next one's
                last = KafkaError(
                    Errors.REQUEST_TIMED_OUT,
                    f"controller {self.addresses[self.current]} did not answer "
                    f"{api_key.name} within {self.request_timeout_s:g} s",
                )
            except KafkaError as e:
                last = e
            else:
                if not answered_by_standby(api_key, response):
                    return response
                last = response
            self.current = (self.current + 1) % len(self._connections)
        if isinstance(last, KafkaError):
            raise last
        assert last is not None
        return last

    def close(self) -> None:
        for conn in self._connections:
            conn.close()
