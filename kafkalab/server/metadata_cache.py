"""MetadataCache: what a broker knows of the cluster, the one thing handlers ask about it.

Kafka's trait: kafka.server.MetadataCache (with KRaftMetadataCache behind it).
Handlers ask it who leads what, which brokers are alive, and to create or
delete topics; they never know whether a controller stands behind it:

    KRaftMetadataCache       a broker in a cluster: the image replayed from the
                             controller's metadata log; topic changes are forwarded
                             to the controller (Kafka's ForwardingManager), and
                             answered once this broker has applied them
    StandaloneMetadataCache  a broker on its own (no controller.quorum.bootstrap.servers):
                             it is the whole cluster, leads every partition it holds
                             in epoch 0 with an ISR of itself, and creates topics
                             itself (a topic is just its directories here, so its
                             topic id is derived from its name: name_based_topic_id);
                             it keeps topic overrides and dynamic broker configs in
                             a file of its log dir (DYNAMIC_CONFIGS_FILE)

Both describe topics with the controller's own types (TopicInfo,
PartitionRegistration, BrokerRegistration), so the Metadata handler builds one
response from either. The group and transaction coordinators will find their
coordinator here too: the leader of a partition of `__consumer_offsets` or
`__transaction_state`, created on first use with `create_topics`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Protocol

from kafkalab.controller import configuration_control_manager as config_control
from kafkalab.controller.configuration_control_manager import ResourceType
from kafkalab.controller.metadata_image import (
    BrokerRegistration,
    PartitionRegistration,
    TopicInfo,
    name_based_topic_id,
)
from kafkalab.controller.quorum_controller import MAX_PARTITIONS_PER_BATCH
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.config import KafkaConfig
from kafkalab.server.dynamic_broker_config import DynamicBrokerConfig
from kafkalab.server.inter_broker_connection import InterBrokerConnection
from kafkalab.server.metadata_listener import BrokerMetadataListener
from kafkalab.storage import durability_ledger
from kafkalab.storage.checkpoint_file import fsync_dir
from kafkalab.storage.log_config import InvalidConfigError
from kafkalab.storage.log_manager import check_topic_name

TopicPartition = tuple[str, int]
#: Where a standalone broker keeps topic overrides and dynamic broker configs.
DYNAMIC_CONFIGS_FILE = "kafkalab-dynamic-configs.json"

#: A standalone broker leads every partition in this epoch (Metadata says so,
#: appends stamp it).
STANDALONE_LEADER_EPOCH = 0


class MetadataCache(Protocol):
    def topics(self) -> dict[str, TopicInfo]: ...

    def alive_brokers(self) -> list[BrokerRegistration]: ...

    def registered_brokers(self) -> list[BrokerRegistration]:
        """Every broker registered with the controller, fenced ones too (each says
        whether it is: DescribeCluster v2 lists them when asked, KIP-1073)."""
        ...

    def broker_epoch(self, broker_id: int) -> int | None:
        """The epoch of the broker's current registration with the controller (fenced
        or not); None when no such broker is registered (a standalone broker has none)."""
        ...

    def controller_id(self) -> int:
        """The broker clients are told is the controller (Metadata's controller_id):
        a live broker they can reach, as clients require."""
        ...

    def contains_partition(self, tp: TopicPartition) -> bool: ...

    async def create_topics(self, body: dict) -> dict:
        """A CreateTopics request body in, its response body out."""
        ...

    async def delete_topics(self, body: dict) -> dict:
        """A DeleteTopics request body in, its response body out."""
        ...

    async def create_partitions(self, body: dict) -> dict:
        """A CreatePartitions request body in, its response body out."""
        ...

    async def elect_leaders(self, body: dict) -> dict:
        """An ElectLeaders request body in, its response body out."""
        ...

    async def alter_partition_reassignments(self, body: dict) -> dict:
        """An AlterPartitionReassignments request body in, its response body out."""
        ...

    async def list_partition_reassignments(self, body: dict) -> dict:
        """A ListPartitionReassignments request body in, its response body out."""
        ...

    async def alter_configs(self, incremental: bool, version: int, body: dict) -> dict:
        """An (Incremental)AlterConfigs body the broker has checked in, its response
        body out, once the changes are applied here."""
        ...

    def broker_configs(self) -> dict[str, dict[str, str]]:
        """The dynamic broker configs, by resource name ("" cluster-wide, "1" ...)."""
        ...


class KRaftMetadataCache:
    def __init__(self, listener: BrokerMetadataListener, controller: InterBrokerConnection) -> None:
        self.listener = listener
        self.controller = controller

    def topics(self) -> dict[str, TopicInfo]:
        return self.listener.image.topics

    def alive_brokers(self) -> list[BrokerRegistration]:
        return [b for b in self.listener.image.brokers.values() if not b.fenced]

    def registered_brokers(self) -> list[BrokerRegistration]:
        return list(self.listener.image.brokers.values())

    def broker_epoch(self, broker_id: int) -> int | None:
        reg = self.listener.image.brokers.get(broker_id)
        return None if reg is None else reg.broker_epoch

    def controller_id(self) -> int:
        alive = self.alive_brokers()
        return alive[0].broker_id if alive else -1

    def contains_partition(self, tp: TopicPartition) -> bool:
        topic = self.listener.image.topics.get(tp[0])
        return topic is not None and tp[1] in topic.partitions

    async def create_topics(self, body: dict) -> dict:
        # v7: the controller answers each topic's id, partitions, factor and configs
        response = await self.controller.request(ApiKeys.CREATE_TOPICS, 7, body)
        created = {t["name"] for t in response["topics"] if t["error_code"] == 0}
        if created and not body["validate_only"]:
            # Answer once the topics are in our image (a client may ask us next).
            await self.listener.wait_until(lambda image: created <= image.topics.keys(), 10)
        return response

    async def delete_topics(self, body: dict) -> dict:
        response = await self.controller.request(ApiKeys.DELETE_TOPICS, 3, body)
        deleted = {t["name"] for t in response["responses"] if t["error_code"] == 0}
        await self.listener.wait_until(lambda image: not deleted & image.topics.keys(), 10)
        return response

    async def create_partitions(self, body: dict) -> dict:
        response = await self.controller.request(ApiKeys.CREATE_PARTITIONS, 1, body)
        wanted = {t["name"]: t["count"] for t in body["topics"]}
        grown = {r["name"] for r in response["results"] if r["error_code"] == 0}
        if grown and not body["validate_only"]:
            # Answer once the new partitions are in our image (a client may ask us next).
            def applied(image) -> bool:
                return all(
                    name in image.topics and len(image.topics[name].partitions) >= wanted[name]
                    for name in grown
                )

            await self.listener.wait_until(applied, 10)
        return response

    # -- elections and reassignments: the controller decides -----------------------------------

    async def _forward(self, api_key: ApiKeys, version: int, body: dict) -> dict:
        """Forward to the controller; once more on a new connection if the first one
        broke (the controller restarted since it was opened). A controller still
        unreachable is answered with REQUEST_TIMED_OUT (as Kafka's forwarding does
        when the controller does not answer), not a dropped connection."""
        for attempt in (1, 2):
            try:
                return await self.controller.request(api_key, version, body)
            except KafkaError as e:
                if e.code != Errors.NETWORK_EXCEPTION or attempt == 2:
                    return {
                        "throttle_time_ms": 0,
                        "error_code": int(Errors.REQUEST_TIMED_OUT),
                        "error_message": f"the controller did not answer: {e.message}",
                        "replica_election_results": [],
                        "responses": [],
                        "topics": [],
                    }
        raise AssertionError("unreachable")

    async def _forward_then_catch_up(self, api_key: ApiKeys, version: int, body: dict) -> dict:
        """Forward to the controller, then apply what it wrote before it answered, so
        a client that asks this broker next (Metadata) sees the new leaders."""
        response = await self._forward(api_key, version, body)
        if not response["error_code"]:
            try:
                await self.listener.catch_up(0)
            except KafkaError:
                pass  # the listener's own loop catches up once the controller answers
        return response

    async def elect_leaders(self, body: dict) -> dict:
        return await self._forward_then_catch_up(ApiKeys.ELECT_LEADERS, 2, body)

    async def alter_partition_reassignments(self, body: dict) -> dict:
        return await self._forward_then_catch_up(ApiKeys.ALTER_PARTITION_REASSIGNMENTS, 1, body)

    async def list_partition_reassignments(self, body: dict) -> dict:
        return await self._forward(ApiKeys.LIST_PARTITION_REASSIGNMENTS, 0, body)

    async def alter_configs(self, incremental: bool, version: int, body: dict) -> dict:
        api = ApiKeys.INCREMENTAL_ALTER_CONFIGS if incremental else ApiKeys.ALTER_CONFIGS
        response = await self.controller.request(api, version, body)
        if not body["validate_only"] and any(r["error_code"] == 0 for r in response["responses"]):
            # The records are in the log before the controller answers: read up to
            # its end, so a client that describes next sees its change.
            try:
                await self.listener.catch_up()
            except KafkaError:
                pass  # the listener's own loop catches up once the controller answers
        return response

    def broker_configs(self) -> dict[str, dict[str, str]]:
        return self.listener.image.broker_configs


class StandaloneMetadataCache:
    def __init__(
        self,
        config: KafkaConfig,
        replica_manager: ReplicaManager,
        advertised_address: Callable[[], tuple[str, int]],
        endpoints: Callable[[], dict[str, tuple[str, int]]] = dict,
        dynamic_config: DynamicBrokerConfig | None = None,
    ) -> None:
        """`endpoints`: every listener's advertised address, by name.
        `dynamic_config`: the broker's config layers, which its dynamic broker
        configs change."""
        self.config = config
        self.replica_manager = replica_manager
        self.advertised_address = advertised_address
        self.endpoints = endpoints
        self._dynamic_config = dynamic_config
        # With no controller, this broker keeps the configs: topics' overrides and its
        # dynamic configs, in a file of its first log dir, so a restart keeps them.
        self._configs_file = replica_manager.log_manager.log_dirs[0] / DYNAMIC_CONFIGS_FILE
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._load_configs()
        for tp in replica_manager.log_manager.all_logs():
            self._lead(tp)

    @property
    def dynamic_config(self) -> DynamicBrokerConfig:
        """The broker's config layers (the broker's own, else its static config alone)."""
        if self._dynamic_config is None:
            self._dynamic_config = DynamicBrokerConfig(self.config.node_id, self.config.extra)
        return self._dynamic_config

    def _load_configs(self) -> None:
        if not self._configs_file.exists():
            return
        saved = json.loads(self._configs_file.read_text(encoding="utf-8"))
        log_manager = self.replica_manager.log_manager
        self._broker_configs = saved.get("brokers", {})
        log_manager.update_default_config(self.dynamic_config.update(self._broker_configs))
        for topic, overrides in saved.get("topics", {}).items():
            log_manager.update_topic_config(topic, overrides)

    def _save_configs(self) -> None:
        log_manager = self.replica_manager.log_manager
        existing = {topic for topic, _ in log_manager.all_logs()}
        saved = {
            "topics": {t: c for t, c in log_manager.topic_configs.items() if c and t in existing},
            "brokers": self._broker_configs,
        }
        temporary = self._configs_file.with_suffix(".tmp")
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump(saved, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
            durability_ledger.file_synced(temporary, f.fileno())
        os.replace(temporary, self._configs_file)
        fsync_dir(self._configs_file.parent)

    def broker_configs(self) -> dict[str, dict[str, str]]:
        return self._broker_configs

    async def alter_configs(self, incremental: bool, version: int, body: dict) -> dict:
        """The controller's part, here: check each resource (configuration_control_manager)
        and apply what passes, then keep it in the configs file."""
        log_manager = self.replica_manager.log_manager
        existing = self.topics()
        responses = []
        changed = False
        for r in body["resources"]:
            kind, name = r["resource_type"], r["resource_name"]
            error: KafkaError | None = None
            if kind == ResourceType.TOPIC:
                current = dict(log_manager.topic_configs.get(name, {}))
            else:
                current = dict(self._broker_configs.get(name, {}))
            try:
                if incremental:
                    ops = [(c["name"], c["config_operation"], c["value"]) for c in r["configs"]]
                    changes = config_control.incremental_changes(kind, name, current, ops)
                else:
                    configs = {c["name"]: c["value"] for c in r["configs"]}
                    changes = config_control.legacy_changes(kind, name, current, configs)
                after = config_control.validate(kind, name, current, changes, name in existing)
            except KafkaError as e:
                error = e
            if error is None and not body["validate_only"]:
                changed = True
                if kind == ResourceType.TOPIC:
                    log_manager.update_topic_config(name, after)
                else:
                    self._broker_configs[name] = after
                    log_manager.update_default_config(
                        self.dynamic_config.update(self._broker_configs)
                    )
            responses.append(
                {
                    "error_code": 0 if error is None else int(error.code),
                    "error_message": None if error is None else error.message,
                    "resource_type": kind,
                    "resource_name": name,
                }
            )
        if changed:
            self._save_configs()
        return {"throttle_time_ms": 0, "responses": responses}

    def _lead(self, tp: TopicPartition, configs: dict[str, str] | None = None) -> None:
        me = self.config.node_id
        self.replica_manager.make_leader(tp, STANDALONE_LEADER_EPOCH, [me], [me], 0, configs)

    def topics(self) -> dict[str, TopicInfo]:
        me = self.config.node_id
        out: dict[str, TopicInfo] = {}
        overrides = self.replica_manager.log_manager.topic_configs
        for topic, index in sorted(self.replica_manager.log_manager.all_logs()):
            info = out.setdefault(topic, TopicInfo(topic, configs=dict(overrides.get(topic, {}))))
            info.partitions[index] = PartitionRegistration(
                [me], [me], me, STANDALONE_LEADER_EPOCH, 0
            )
        return out

    def alive_brokers(self) -> list[BrokerRegistration]:
        host, port = self.advertised_address()
        return [
            BrokerRegistration(
                self.config.node_id, host, port, "", 0, fenced=False, endpoints=self.endpoints()
            )
        ]

    def registered_brokers(self) -> list[BrokerRegistration]:
        return self.alive_brokers()  # itself, never fenced

    def broker_epoch(self, broker_id: int) -> int | None:
        return None  # no controller: no broker is registered, so none follows us

    def controller_id(self) -> int:
        return self.config.node_id

    def contains_partition(self, tp: TopicPartition) -> bool:
        return self.replica_manager.log_manager.get_log(*tp) is not None

    async def create_topics(self, body: dict) -> dict:
        existing = self.topics()
        out = []
        # Kafka refuses a request for more than MAX_PARTITIONS_PER_BATCH partitions in
        # all, every topic of it, before creating anything (KAFKA-17870).
        total = sum(
            max(
                len(t["assignments"]),
                self.config.num_partitions if t["num_partitions"] == -1 else t["num_partitions"],
                0,
            )
            for t in body["topics"]
        )
        for topic in body["topics"]:
            if total > MAX_PARTITIONS_PER_BATCH:
                message = (
                    f"Excessively large number of partitions per request ({total}; at most "
                    f"{MAX_PARTITIONS_PER_BATCH}): create them in several requests"
                )
                out.append(
                    {
                        "name": topic["name"],
                        "error_code": int(Errors.POLICY_VIOLATION),
                        "error_message": message,
                    }
                )
                continue
            name = topic["name"]
            error, message = Errors.NONE, None
            partitions = topic["num_partitions"]
            if topic["assignments"]:
                partitions = len(topic["assignments"])
            if partitions == -1:
                partitions = self.config.num_partitions
            factor = topic["replication_factor"]
            configs = {c["name"]: c["value"] for c in topic["configs"] if c["value"] is not None}
            try:
                check_topic_name(name)
            except ValueError as e:
                error, message = Errors.INVALID_TOPIC_EXCEPTION, str(e)
            if error == Errors.NONE and name in existing:
                error, message = Errors.TOPIC_ALREADY_EXISTS, f"topic '{name}' already exists"
            elif error == Errors.NONE and partitions <= 0:
                error, message = Errors.INVALID_PARTITIONS, "number of partitions must be > 0"
            elif error == Errors.NONE and factor not in (-1, 1):
                error, message = (
                    Errors.INVALID_REPLICATION_FACTOR,
                    f"replication factor {factor} is larger than the 1 broker available",
                )
            if error == Errors.NONE:
                try:
                    # validate every config before creating anything
                    self.replica_manager.log_manager.default_config.with_overrides(configs)
                    if not body["validate_only"]:
                        for p in range(partitions):
                            self._lead((name, p), configs or None)
                        if configs:
                            self._save_configs()
                except InvalidConfigError as e:
                    error, message = Errors.INVALID_CONFIG, e.message
            result: dict = {"name": name, "error_code": int(error), "error_message": message}
            if error == Errors.NONE:
                # v5+/v7+: what was created (the configs: the broker handler adds them)
                result.update(
                    topic_id=name_based_topic_id(name),
                    num_partitions=partitions,
                    replication_factor=1,
                    configs=[],
                )
            out.append(result)
        return {"throttle_time_ms": 0, "topics": out}

    async def create_partitions(self, body: dict) -> dict:
        """Grow topics of this broker, the only one there is: new partitions it leads,
        with the topic's configs; an assignment may name this broker only."""
        existing = self.topics()
        me = self.config.node_id
        overrides = self.replica_manager.log_manager.topic_configs
        out = []
        for t in body["topics"]:
            name, count, assignments = t["name"], t["count"], t["assignments"]
            error, message = Errors.NONE, None
            current = len(existing[name].partitions) if name in existing else 0
            if name not in existing:
                error, message = Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no topic named '{name}'"
            elif count < current:
                error, message = (
                    Errors.INVALID_PARTITIONS,
                    f"The topic {name} currently has {current} partition(s); {count} would "
                    "not be an increase.",
                )
            elif count == current:
                error, message = (
                    Errors.INVALID_PARTITIONS,
                    (f"Topic already has {current} partition(s)."),
                )
            elif count - current > MAX_PARTITIONS_PER_BATCH:
                error, message = (
                    Errors.POLICY_VIOLATION,
                    (
                        f"Excessively large number of partitions per request ({count - current}; "
                        f"at most {MAX_PARTITIONS_PER_BATCH}): create them in several requests"
                    ),
                )
            elif assignments is not None and len(assignments) != count - current:
                error, message = (
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    (
                        f"Attempted to add {count - current} additional partition(s), but only "
                        f"{len(assignments)} assignment(s) were specified."
                    ),
                )
            elif assignments is not None and any(a["broker_ids"] != [me] for a in assignments):
                bad = next(a["broker_ids"] for a in assignments if a["broker_ids"] != [me])
                error, message = (
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    (
                        f"The manual partition assignment {bad} is not [{me}]: broker {me} is the "
                        "only broker, and the topic's replication factor is 1."
                    ),
                )
            if error == Errors.NONE and not body["validate_only"]:
                configs = dict(overrides.get(name, {}))
                for p in range(current, count):
                    self._lead((name, p), configs or None)
            out.append({"name": name, "error_code": int(error), "error_message": message})
        return {"throttle_time_ms": 0, "results": out}

    # -- elections and reassignments: one broker leads everything, nothing moves -------------

    async def elect_leaders(self, body: dict) -> dict:
        """This broker leads every partition it has: ELECTION_NOT_NEEDED for each
        (left out when the request names none), UNKNOWN_TOPIC_OR_PARTITION for others."""
        existing = self.topics()
        results = []
        for t in body["topic_partitions"] or ():
            out = []
            for p in t["partitions"]:
                known = t["topic"] in existing and p in existing[t["topic"]].partitions
                error = Errors.ELECTION_NOT_NEEDED if known else Errors.UNKNOWN_TOPIC_OR_PARTITION
                out.append({"partition_id": p, "error_code": int(error), "error_message": None})
            results.append({"topic": t["topic"], "partition_result": out})
        return {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": results}

    async def alter_partition_reassignments(self, body: dict) -> dict:
        """The only assignment there is, [this broker], is accepted (nothing moves);
        any other is INVALID_REPLICA_ASSIGNMENT and a cancel NO_REASSIGNMENT_IN_PROGRESS."""
        existing, me = self.topics(), self.config.node_id
        responses = []
        for t in body["topics"]:
            out = []
            for p in t["partitions"]:
                error, message = Errors.NONE, None
                if t["name"] not in existing or p["partition_index"] not in (
                    existing[t["name"]].partitions
                ):
                    error = Errors.UNKNOWN_TOPIC_OR_PARTITION
                    message = f"Unable to find partition {t['name']}:{p['partition_index']}."
                elif p["replicas"] is None:
                    error = Errors.NO_REASSIGNMENT_IN_PROGRESS
                elif p["replicas"] != [me]:
                    error = Errors.INVALID_REPLICA_ASSIGNMENT
                    message = f"broker {me} is the only broker: the only assignment is [{me}]"
                out.append(
                    {
                        "partition_index": p["partition_index"],
                        "error_code": int(error),
                        "error_message": message,
                    }
                )
            responses.append({"name": t["name"], "partitions": out})
        return {
            "throttle_time_ms": 0,
            "allow_replication_factor_change": body.get("allow_replication_factor_change", True),
            "error_code": 0,
            "error_message": None,
            "responses": responses,
        }

    async def list_partition_reassignments(self, body: dict) -> dict:
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": []}

    async def delete_topics(self, body: dict) -> dict:
        existing = self.topics()
        out = []
        for name in body["topic_names"]:
            info = existing.get(name)
            for index in info.partitions if info else ():
                self.replica_manager.remove_partition((name, index))
            error = Errors.NONE if info else Errors.UNKNOWN_TOPIC_OR_PARTITION
            if info:  # a topic created again under the name starts from the defaults
                self.replica_manager.log_manager.topic_configs.pop(name, None)
                self._save_configs()
            out.append({"name": name, "error_code": int(error)})
        return {"throttle_time_ms": 0, "responses": out}
