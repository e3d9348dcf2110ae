"""ControllerChannel: a broker's connection to whichever controller is active (Kafka:
NodeToControllerChannelManager with RaftControllerNodeProvider), and KnownLeader, the
controller the broker believes leads the quorum.

A broker whose config names one controller by its address only talks to it over one
InterBrokerConnection. Otherwise (a quorum, or one controller named by its id in
`controller.quorum.voters`, as LocalCluster names its single controller 3001) it
talks through ControllerChannels, which also heed cut links to a controller by its
id (link_faults.py: a broker deaf to a controller throws its answers away). With a
quorum only the active controller answers; the others say NOT_CONTROLLER (and, to a metadata
Fetch, NOT_LEADER_OR_FOLLOWER with the leader they know). Where the controllers are:

    controller.quorum.voters             `id@host:port,...`, as Kafka's brokers in a
                                         static quorum have it: ids and endpoints
    controller.quorum.bootstrap.servers  `host:port,...` (KIP-853's form), used when
                                         there are no voters: endpoints, no ids

How a broker finds the leader, as Kafka's does: its RaftManager (an observer on a
broker) learns the leader from its metadata Fetch, whose answer carries CurrentLeader
(leader id and epoch, a tagged field of Fetch v12+) whether it succeeded or was refused
with NOT_LEADER_OR_FOLLOWER; RaftControllerNodeProvider maps that id to the voter's
endpoint, and NodeToControllerChannelManager sends every request there. On
NOT_CONTROLLER or a broken connection it forgets the controller and asks the node
provider again: the Raft client's leader, until the Raft client learns another. Here:

    KnownLeader          one per broker, shared by all its channels (heartbeats on
                         their own thread, AlterPartition, forwarding, the metadata
                         fetch): the controller it believes active and the epoch it
                         was named in. A hint of an older epoch than the one known is
                         ignored (a standby that has not heard of the election yet).
    ControllerChannel    sends each request to the known leader; an answer that names
                         a leader (a metadata Fetch's CurrentLeader, refused or not)
                         moves every channel of the broker there, a controller that
                         answers as the active one becomes the known leader, and a
                         broken connection forgets it. NOT_CONTROLLER from a leader a
                         hint named (elected, not active until it has replayed the
                         log of its epoch) leaves it the known leader, asked again
                         at the caller's next try; from one known only because it
                         answered, it forgets it. Only while no leader is known does
                         it try the controllers in turn. Each controller is asked at most once
                         per request; if none answers as the active one (an election
                         is under way), the caller gets the last answer (or error) and
                         retries as it would with one controller: the heartbeat and
                         the metadata fetch loops do.

With bootstrap servers only, a hint names an id the broker cannot place: its epoch
is kept (a newer one forgets the leader known), and the active controller is found by
asking in turn. Fetch v16's NodeEndpoints (KIP-853: the leader's endpoint in the
answer) is not spoken: brokers fetch the metadata at v12, and the static voters give
the endpoint.

Every change of the known leader, and every request a controller did not answer (a
broken connection, or an answer thrown away by a cut link), is an event in the
broker's events.jsonl (`controller_leader`, `controller_unreachable`): a failover's
timeline shows when each broker found the new leader, and that it asked the dead one
no more after that.

A controller that accepts a connection and never answers (SIGSTOPped, hung) counts as
unreachable after `request_timeout_ms` (REQUEST_TIMEOUT_MS, Kafka's default for
controller.quorum.request.timeout.ms; a Fetch's MaxWaitMs on top): the connection is
closed and the leader forgotten, as for a broken connection. Without it every broker
waited on a paused active controller until it woke up, never learning of the
successor the other voters had elected (the soak's controller-pause with a leader
kill inside it: the partition had no leader for as long as the pause lasted).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import Api
from kafkalab.server.events import EventLog
from kafkalab.server.inter_broker_connection import InterBrokerConnection

log = logging.getLogger(__name__)

#: The Fetch version a broker reads a quorum's metadata with: the first flexible one,
#: whose answer carries CurrentLeader (tagged). A single controller is fetched at v11.
QUORUM_METADATA_FETCH_VERSION = 12
#: A controller whose id the broker does not know (bootstrap servers only).
UNKNOWN_ID = -1
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


@dataclass(frozen=True)
class ControllerEndpoint:
    node_id: int  # UNKNOWN_ID when only its address is configured
    host: str
    port: int

    def __str__(self) -> str:
        who = f"controller {self.node_id}" if self.node_id != UNKNOWN_ID else "controller"
        return f"{who} at {self.host}:{self.port}"


def controller_endpoints(props: dict[str, str]) -> list[ControllerEndpoint]:
    """The controllers a broker's config names: `controller.quorum.voters` (ids and
    endpoints) when it is set, else `controller.quorum.bootstrap.servers`."""
    voters = props.get("controller.quorum.voters", "").strip()
    if voters:
        from kafkalab.server.kafka_raft_manager import parse_quorum_voters

        return [
            ControllerEndpoint(i, h, p) for i, (h, p) in sorted(parse_quorum_voters(voters).items())
        ]
    servers = parse_bootstrap_servers(props.get("controller.quorum.bootstrap.servers", ""))
    return [ControllerEndpoint(UNKNOWN_ID, h, p) for h, p in servers]


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


def leader_hint(api_key: ApiKeys, response: dict) -> tuple[int, int] | None:
    """(leader id, leader epoch) an answer names, or None: a metadata Fetch's
    CurrentLeader (-1 as the id when the answering controller knows no leader)."""
    if api_key != ApiKeys.FETCH:
        return None
    for t in response.get("responses") or []:
        for p in t["partitions"]:
            current = p.get("current_leader") or {}
            epoch = current.get("leader_epoch", -1)
            if epoch >= 0:
                return current.get("leader_id", -1), epoch
    return None


class KnownLeader:
    """The controller a broker believes active (an index into its controllers) and the
    epoch it was named in; shared by the broker's channels, on two threads."""

    def __init__(self, endpoints: Sequence[ControllerEndpoint], events: EventLog | None = None):
        self.endpoints = list(endpoints)
        self.events = events
        self.index: int | None = None
        self.epoch = -1
        self._lock = threading.Lock()
        self._next = 0  # where trying in turn goes on
        #: requests sent to each controller (by index), by all the broker's channels
        self.sent = [0] * len(self.endpoints)
        self._down: set[int] = set()  # failed since they last answered
        self._named = False  # the known leader was named by a hint (the quorum's leader)

    @property
    def node_id(self) -> int | None:
        """The known leader's id (UNKNOWN_ID if only its address is known; None: no
        leader known)."""
        index = self.index
        return None if index is None else self.endpoints[index].node_id

    def index_of(self, node_id: int) -> int | None:
        for i, e in enumerate(self.endpoints):
            if e.node_id == node_id and node_id != UNKNOWN_ID:
                return i
        return None

    def next_to_try(self, tried: set[int]) -> int | None:
        """The known leader, if it was not tried for this request yet (None if it
        was); with no leader known, the next controller in turn not tried yet (None
        when every one was)."""
        with self._lock:
            if self.index is not None:
                if self.index in tried:
                    return None
                self.sent[self.index] += 1
                return self.index
            n = len(self.endpoints)
            for step in range(n):
                i = (self._next + step) % n
                if i not in tried:
                    self._next = (i + 1) % n
                    self.sent[i] += 1
                    return i
            return None

    def hint(self, leader_id: int, epoch: int, source: int) -> None:
        """Controller `source` named `leader_id` the leader in `epoch` (-1: it knows
        none). Older epochs than the one known are ignored."""
        with self._lock:
            if epoch < self.epoch:
                return
            index = self.index_of(leader_id)
            if index is None:
                if epoch > self.epoch or self.index == source:
                    # a newer epoch whose leader we cannot place (none yet, or one of
                    # bootstrap servers only): whoever we believed is not it any more
                    self._set(None, epoch, "hint", source)
                return
            self._set(index, epoch, "hint", source)
            self._named = True

    def reached(self, index: int) -> None:
        """Controller `index` answered (as the active one or not)."""
        with self._lock:
            self._down.discard(index)

    def answered(self, index: int) -> None:
        """Controller `index` answered as the active one."""
        with self._lock:
            if index != self.index:
                self._set(index, self.epoch, "answered", index)
                self._named = False

    def refused(self, index: int, reason: str) -> None:
        """Controller `index` did not answer as the active one (`reason`:
        "not_controller", or "unreachable" for a broken connection or an answer a cut
        link threw away): forget it if it was the known leader."""
        with self._lock:
            if reason != "not_controller" and index not in self._down:
                self._down.add(index)
                self._record("controller_unreachable", index, sent=self._sent_by_id())
            if self.index != index:
                return
            if reason == "not_controller" and self._named:
                # The quorum's leader that is not active yet (it has not replayed the
                # log up to its epoch): Kafka's channel asks the Raft leader again.
                return
            self._set(None, self.epoch, reason, index)

    def _sent_by_id(self) -> dict[str, int]:
        return {self._name(i): n for i, n in enumerate(self.sent)}

    def _name(self, index: int) -> str:
        e = self.endpoints[index]
        return str(e.node_id) if e.node_id != UNKNOWN_ID else f"{e.host}:{e.port}"

    def state(self) -> dict:
        """What `kafkalab cluster status` shows of a broker's controller channel: the
        controller it talks to, in which epoch, requests sent to each controller."""
        with self._lock:
            return {
                "leader": None if self.index is None else self._name(self.index),
                "epoch": self.epoch,
                "sent": self._sent_by_id(),
                "unreachable": sorted(self._name(i) for i in self._down),
            }

    def _set(self, index: int | None, epoch: int, how: str, source: int) -> None:
        changed = index != self.index
        self.index, self.epoch = index, max(epoch, self.epoch)
        if changed:
            if index is not None:
                self._next = (index + 1) % len(self.endpoints)
            log.info(
                "controller leader now %s (epoch %d, %s from %s)",
                "unknown" if index is None else self.endpoints[index],
                self.epoch,
                how,
                self.endpoints[source],
            )
            self._record(
                "controller_leader",
                index,
                epoch=self.epoch,
                how=how,
                named_by=self._name(source),
                sent=self._sent_by_id(),
            )

    def _record(self, event: str, index: int | None, **fields) -> None:
        if self.events is None:
            return
        if index is None:
            fields = {"controller": None, **fields}
        else:
            e = self.endpoints[index]
            fields = {"controller": self._name(index), "address": f"{e.host}:{e.port}", **fields}
        self.events.record(event, **fields)


class ControllerChannel:
    """InterBrokerConnection's interface (`request`, `close`) over several controllers,
    following the broker's KnownLeader."""

    def __init__(
        self,
        addresses: Sequence[tuple[str, int]] | Sequence[ControllerEndpoint],
        schemas: dict[ApiKeys, Api],
        client_id: Callable[[], str] | None = None,
        leader: KnownLeader | None = None,
        hears: Callable[[int], bool] | None = None,
        request_timeout_ms: int = REQUEST_TIMEOUT_MS,
    ) -> None:
        """`leader`: the broker's KnownLeader (a channel of its own when not given).
        `hears(node_id)`: False while a cut link makes the broker deaf to that
        controller (its answers are thrown away; see link_faults.py).
        `request_timeout_ms`: how long a controller may stay silent on a request."""
        endpoints = [
            a if isinstance(a, ControllerEndpoint) else ControllerEndpoint(UNKNOWN_ID, *a)
            for a in addresses
        ]
        self.leader = leader if leader is not None else KnownLeader(endpoints)
        if [(e.host, e.port) for e in self.leader.endpoints] != [
            (e.host, e.port) for e in endpoints
        ]:
            raise ValueError("a channel and its KnownLeader must name the same controllers")
        self.endpoints = endpoints
        self.addresses = [(e.host, e.port) for e in endpoints]
        self.hears = hears or (lambda node_id: True)
        self.request_timeout_s = request_timeout_ms / 1000
        self._connections = [
            InterBrokerConnection(e.host, e.port, schemas, client_id) for e in endpoints
        ]

    @property
    def current(self) -> int | None:
        """The index of the controller requests go to now (None: none known)."""
        return self.leader.index

    async def request(self, api_key: ApiKeys, version: int, body: dict) -> dict:
        last: dict | KafkaError | None = None
        tried: set[int] = set()
        while (index := self.leader.next_to_try(tried)) is not None:
            tried.add(index)
            endpoint = self.endpoints[index]
            try:
                # asyncio.timeout, not wait_for (see InterBrokerConnection.request)
                async with asyncio.timeout(
                    self.request_timeout_s + body.get("max_wait_ms", 0) / 1000
                ):
                    response = await self._connections[index].request(api_key, version, body)
                if endpoint.node_id != UNKNOWN_ID and not self.hears(endpoint.node_id):
                    raise KafkaError(
                        Errors.NETWORK_EXCEPTION,
                        f"{endpoint}: its answer is thrown away (a cut link)",
                    )
            except TimeoutError:
                self._connections[index].close()  # a late answer must not be read as the next one's
                last = KafkaError(
                    Errors.REQUEST_TIMED_OUT,
                    f"controller {endpoint} did not answer {api_key.name} "
                    f"within {self.request_timeout_s:g} s",
                )
                self.leader.refused(index, "unreachable")
                continue
            except KafkaError as e:
                last = e
                self.leader.refused(index, "unreachable")
                continue
            self.leader.reached(index)
            hint = leader_hint(api_key, response)
            if hint is not None:
                leader_id, epoch = hint
                self.leader.hint(leader_id, epoch, index)
            if not answered_by_standby(api_key, response):
                self.leader.answered(index)
                return response
            last = response
            if hint is None:
                self.leader.refused(index, "not_controller")
        if isinstance(last, KafkaError):
            raise last
        assert last is not None
        return last

    def close(self) -> None:
        for conn in self._connections:
            conn.close()


#: Where a broker writes its KnownLeader's state (`kafkalab cluster status` reads it).
CONTROLLER_STATE_FILE = "controller-channel.json"


def write_controller_state(log_dir: str | Path, state: dict) -> None:
    """Atomically (a reader may look at any moment)."""
    path = Path(log_dir) / CONTROLLER_STATE_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


def read_controller_state(log_dir: str | Path) -> dict | None:
    """A broker's last written KnownLeader state; None if it wrote none (a single
    controller, or not started)."""
    try:
        return json.loads((Path(log_dir) / CONTROLLER_STATE_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
