"""The teaching Admin client (Kafka: Admin / KafkaAdminClient): topics (created, grown
with CreatePartitions, trimmed with DeleteRecords), configs (DescribeConfigs,
IncrementalAlterConfigs, AlterConfigs: a BROKER resource with an id goes to that
broker, as Kafka's Admin sends it), and consumer groups as
kafka-consumer-groups.sh sees them.

Groups live on their coordinators: FindCoordinator names the broker that leads
the group's __consumer_offsets partition, and DescribeGroups, OffsetFetch,
OffsetCommit and DeleteGroups go there. ListGroups asks every broker, each for
the groups it coordinates. A group of the KIP-848 protocol (group.protocol=consumer)
is described with ConsumerGroupDescribe: `describe_consumer_group`.

Transactions as kafka-transactions.sh sees them: ListTransactions asks every
broker (each for the transactional ids it coordinates), DescribeTransactions goes
to the id's transaction coordinator (FindCoordinator key type 1), and
DescribeProducers to the partition's leader (its producer state: the open
transaction's first offset holds the last stable offset back).

Leadership and placement as kafka-leader-election.sh and kafka-reassign-partitions.sh
see them: ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments go
to any broker, which forwards them to the controller; `partition_replicas` reads each
partition's replicas from Metadata.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafkalab.client.network_client import BrokerConnection, NetworkClient
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.consumer_protocol import decode_assignment

RETRIABLE = (Errors.COORDINATOR_NOT_AVAILABLE, Errors.COORDINATOR_LOAD_IN_PROGRESS)
#: Config resource types (Kafka: ConfigResource.Type), by kafka-configs.sh's entity type.
RESOURCE_TYPES = {"topic": 2, "topics": 2, "broker": 4, "brokers": 4}
#: IncrementalAlterConfigs operations (Kafka: AlterConfigOp.OpType).
CONFIG_OPS = {"SET": 0, "DELETE": 1, "APPEND": 2, "SUBTRACT": 3}
#: DescribeConfigs' config sources (Kafka: ConfigEntry.ConfigSource), by id.
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}


@dataclass(frozen=True)
class ConfigEntry:
    """One config of a resource, as DescribeConfigs answers it (Kafka: ConfigEntry)."""

    name: str
    value: str | None
    source: str  # CONFIG_SOURCES' names: where the value comes from
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[tuple[str, str | None, str], ...]  # (name, value, source), first wins
    documentation: str | None = None


#: ElectLeaders' ElectionType (KIP-460), by Kafka's names.
ELECTION_TYPES = {"preferred": 0, "unclean": 1}


@dataclass(frozen=True)
class PartitionReassignment:
    """A reassignment in progress (Kafka: PartitionReassignment): `replicas` holds
    the target and the replicas still leaving."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol: str
    members: tuple[GroupMember, ...]


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


@dataclass(frozen=True)
class TransactionDescription:
    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int  # -1: no transaction open
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ProducerState:
    """One producer of a partition, as DescribeProducers gives it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1: no open transaction in this partition


@dataclass(frozen=True)
class ConsumerGroupMemberDescription:
    member_id: str
    client_id: str
    host: str
    member_epoch: int
    subscribed_topics: tuple[str, ...]
    partitions: tuple[tuple[str, int], ...]  # its current assignment
    target: tuple[tuple[str, int], ...]  # where the coordinator is moving it


@dataclass(frozen=True)
class ConsumerGroupDescription:
    """A KIP-848 group as ConsumerGroupDescribe tells it: its state (Empty,
    Assigning, Reconciling, Stable), group and assignment epochs, the server-side
    assignor, and each member's epoch, assignment and target assignment."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ConsumerGroupMemberDescription, ...]


def _named_partitions(assignment: dict) -> tuple[tuple[str, int], ...]:
    return tuple(
        sorted(
            (t["topic_name"], p) for t in assignment["topic_partitions"] for p in t["partitions"]
        )
    )


class Admin:
    def __init__(self, bootstrap_servers: str) -> None:
        self.client = NetworkClient(bootstrap_servers)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        configs: dict[str, str] | None = None,
        validate_only: bool = False,
    ) -> None:
        """CreateTopics; raises KafkaError with the broker's code and message."""
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": str(v)} for k, v in (configs or {}).items()],
                }
            ],
            "timeout_ms": 30_000,
            "validate_only": validate_only,
        }
        (result,) = self.client.any_connection().request(ApiKeys.CREATE_TOPICS, body)["topics"]
        if result["error_code"]:
            raise KafkaError(result["error_code"], result.get("error_message") or name)

    def delete_topic(self, name: str) -> None:
        response = self.client.any_connection().request(
            ApiKeys.DELETE_TOPICS, {"topic_names": [name], "timeout_ms": 30_000}
        )
        (result,) = response["responses"]
        if result["error_code"]:
            raise KafkaError(result["error_code"], name)

    def create_partitions(
        self,
        name: str,
        count: int,
        assignments: list[list[int]] | None = None,
        validate_only: bool = False,
    ) -> None:
        """CreatePartitions: grow `name` to `count` partitions (`assignments`: the
        replicas of each new partition, else the controller places them); raises
        KafkaError with the broker's code and message."""
        body = {
            "topics": [
                {
                    "name": name,
                    "count": count,
                    "assignments": None
                    if assignments is None
                    else [{"broker_ids": list(a)} for a in assignments],
                }
            ],
            "timeout_ms": 30_000,
            "validate_only": validate_only,
        }
        response = self.client.any_connection().request(ApiKeys.CREATE_PARTITIONS, body)
        (result,) = response["results"]
        if result["error_code"]:
            raise KafkaError(result["error_code"], result.get("error_message") or name)

    def delete_records(
        self, offsets: dict[tuple[str, int], int], timeout_ms: int = 30_000
    ) -> dict[tuple[str, int], int | KafkaError]:
        """DeleteRecords: move each partition's log start offset to the offset given
        (-1: its high watermark), one request to each leader. Answers each
        partition's new low watermark, or the KafkaError the broker answered."""
        by_leader: dict[int | None, dict[str, list[dict]]] = {}
        for (topic, partition), offset in offsets.items():
            self.client.refresh_metadata([topic], allow_auto_topic_creation=False)
            leader = self.client.partitions.get(topic, {}).get(partition)
            # a partition nobody leads (or no such topic): any broker answers for it
            key = leader if leader is not None and leader >= 0 else None
            by_leader.setdefault(key, {}).setdefault(topic, []).append(
                {"partition_index": partition, "offset": offset}
            )
        out: dict[tuple[str, int], int | KafkaError] = {}
        for leader, topics in by_leader.items():
            connection = (
                self.client.any_connection() if leader is None else self.client.connection(leader)
            )
            body = {
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "timeout_ms": timeout_ms,
            }
            for t in connection.request(ApiKeys.DELETE_RECORDS, body)["topics"]:
                for p in t["partitions"]:
                    tp = (t["name"], p["partition_index"])
                    out[tp] = (
                        KafkaError(p["error_code"], f"DeleteRecords {tp[0]}-{tp[1]}")
                        if p["error_code"]
                        else p["low_watermark"]
                    )
        return out

    # -- configs -------------------------------------------------------------------------------

    def _config_connection(self, resource_type: int, name: str) -> BrokerConnection:
        """A broker's own configs are asked of that broker; the rest of any broker."""
        if resource_type == RESOURCE_TYPES["broker"] and name:
            try:
                return self.client.connection(int(name))
            except KeyError:
                raise KafkaError(
                    Errors.BROKER_NOT_AVAILABLE, f"broker {name} is not in the cluster's metadata"
                ) from None
        return self.client.any_connection()

    def describe_configs(
        self,
        resource_type: int | str,
        name: str,
        keys: list[str] | None = None,
        include_documentation: bool = False,
    ) -> dict[str, ConfigEntry]:
        """DescribeConfigs of one resource (a topic; a broker by id, or "" for the
        cluster-wide broker default), with synonyms; raises KafkaError."""
        kind = RESOURCE_TYPES.get(resource_type, resource_type)
        body = {
            "resources": [
                {"resource_type": kind, "resource_name": name, "configuration_keys": keys}
            ],
            "include_synonyms": True,
            "include_documentation": include_documentation,
        }
        response = self._config_connection(kind, name).request(ApiKeys.DESCRIBE_CONFIGS, body)
        (result,) = response["results"]
        if result["error_code"]:
            raise KafkaError(result["error_code"], result.get("error_message") or name)
        return {
            c["name"]: ConfigEntry(
                c["name"],
                c["value"],
                CONFIG_SOURCES.get(c["config_source"], str(c["config_source"])),
                c["read_only"],
                c["is_sensitive"],
                tuple(
                    (s["name"], s["value"], CONFIG_SOURCES.get(s["source"], str(s["source"])))
                    for s in c["synonyms"]
                ),
                c.get("documentation"),
            )
            for c in result["configs"]
        }

    def incremental_alter_configs(
        self,
        resource_type: int | str,
        name: str,
        ops: list[tuple[str, int | str, str | None]],
        validate_only: bool = False,
    ) -> None:
        """IncrementalAlterConfigs of one resource: (key, SET|DELETE|APPEND|SUBTRACT,
        value) each, as kafka-configs.sh --alter sends them; raises KafkaError."""
        kind = RESOURCE_TYPES.get(resource_type, resource_type)
        configs = [
            {
                "name": key,
                "config_operation": CONFIG_OPS.get(op, op),
                "value": None if CONFIG_OPS.get(op, op) == CONFIG_OPS["DELETE"] else value,
            }
            for key, op, value in ops
        ]
        self._alter(ApiKeys.INCREMENTAL_ALTER_CONFIGS, kind, name, configs, validate_only)

    def alter_configs(
        self,
        resource_type: int | str,
        name: str,
        configs: dict[str, str],
        validate_only: bool = False,
    ) -> None:
        """The legacy AlterConfigs: `configs` become the resource's whole set (keys
        not named go back to their defaults); raises KafkaError."""
        kind = RESOURCE_TYPES.get(resource_type, resource_type)
        entries = [{"name": k, "value": str(v)} for k, v in configs.items()]
        self._alter(ApiKeys.ALTER_CONFIGS, kind, name, entries, validate_only)

    def _alter(
        self, api: ApiKeys, kind: int, name: str, configs: list[dict], validate_only: bool
    ) -> None:
        body = {
            "resources": [{"resource_type": kind, "resource_name": name, "configs": configs}],
            "validate_only": validate_only,
        }
        (result,) = self._config_connection(kind, name).request(api, body)["responses"]
        if result["error_code"]:
            raise KafkaError(result["error_code"], result.get("error_message") or name)

    def list_topics(self) -> dict[str, int]:
        """topic -> number of partitions."""
        response = self.client.refresh_metadata(None, allow_auto_topic_creation=False)
        return {
            t["name"]: len(t["partitions"])
            for t in response["topics"]
            if t["error_code"] == Errors.NONE
        }

    # -- consumer groups ------------------------------------------------------------------------

    def coordinator(self, group_id: str, timeout_s: float = 30) -> BrokerConnection:
        """The connection to the group's coordinator (FindCoordinator, retried while
        the coordinator is not there yet)."""
        deadline = time.monotonic() + timeout_s
        while True:
            r = self.client.any_connection().request(
                ApiKeys.FIND_COORDINATOR, {"key": group_id, "key_type": 0}
            )
            error = Errors(r["error_code"])
            if error == Errors.NONE:
                self.client.refresh_metadata([])
                return self.client.connection(r["node_id"])
            if error not in RETRIABLE or time.monotonic() > deadline:
                raise KafkaError(error, f"FindCoordinator for group {group_id!r}")
            time.sleep(0.2)

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, protocol type) of every group, from every broker."""
        self.client.refresh_metadata([])
        out = []
        for node in sorted(self.client.nodes):
            r = self.client.connection(node).request(ApiKeys.LIST_GROUPS, {})
            if r["error_code"]:
                raise KafkaError(r["error_code"], f"ListGroups on broker {node}")
            out += [(g["group_id"], g["protocol_type"]) for g in r["groups"]]
        return sorted(out)

    def describe_group(self, group_id: str) -> GroupDescription:
        r = self.coordinator(group_id).request(ApiKeys.DESCRIBE_GROUPS, {"groups": [group_id]})
        (g,) = r["groups"]
        if g["error_code"]:
            raise KafkaError(g["error_code"], f"DescribeGroups {group_id!r}")
        members = []
        for m in g["members"]:
            assigned = ()
            if g["protocol_type"] == "consumer" and m["member_assignment"]:
                assigned = tuple(decode_assignment(m["member_assignment"]).partitions)
            members.append(GroupMember(m["member_id"], m["client_id"], m["client_host"], assigned))
        return GroupDescription(group_id, g["group_state"], g["protocol_data"], tuple(members))

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        """ConsumerGroupDescribe (KIP-848) of one group, from its coordinator."""
        r = self.coordinator(group_id).request(
            ApiKeys.CONSUMER_GROUP_DESCRIBE,
            {"group_ids": [group_id], "include_authorized_operations": False},
        )
        (g,) = r["groups"]
        if g["error_code"]:
            raise KafkaError(
                g["error_code"], g["error_message"] or f"ConsumerGroupDescribe {group_id!r}"
            )
        members = tuple(
            ConsumerGroupMemberDescription(
                m["member_id"],
                m["client_id"],
                m["client_host"],
                m["member_epoch"],
                tuple(m["subscribed_topic_names"]),
                _named_partitions(m["assignment"]),
                _named_partitions(m["target_assignment"]),
            )
            for m in g["members"]
        )
        return ConsumerGroupDescription(
            group_id,
            g["group_state"],
            g["group_epoch"],
            g["assignment_epoch"],
            g["assignor_name"],
            members,
        )

    def group_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets (OffsetFetch of all its partitions)."""
        r = self.coordinator(group_id).request(
            ApiKeys.OFFSET_FETCH, {"group_id": group_id, "topics": None}
        )
        if r.get("error_code"):
            raise KafkaError(r["error_code"], f"OffsetFetch {group_id!r}")
        return {
            (t["name"], p["partition_index"]): p["committed_offset"]
            for t in r["topics"]
            for p in t["partitions"]
            if p["committed_offset"] >= 0
        }

    def alter_group_offsets(self, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
        """Commit these offsets for a group with no members (the coordinator refuses
        a live group: UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS, as Kafka does)."""
        topics: dict[str, list[dict]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            topics.setdefault(topic, []).append(
                {"partition_index": partition, "committed_offset": offset, "committed_metadata": ""}
            )
        r = self.coordinator(group_id).request(
            ApiKeys.OFFSET_COMMIT,
            {
                "group_id": group_id,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            },
        )
        for t in r["topics"]:
            for p in t["partitions"]:
                if p["error_code"]:
                    raise KafkaError(p["error_code"], f"{t['name']}-{p['partition_index']}")

    # -- transactions ----------------------------------------------------------------------

    def list_transactions(
        self, states: list[str] | None = None, producer_ids: list[int] | None = None
    ) -> list[TransactionListing]:
        """Every transactional id of the cluster, from every broker (ListTransactions)."""
        self.client.refresh_metadata([])
        out = []
        for node in sorted(self.client.nodes):
            r = self.client.connection(node).request(
                ApiKeys.LIST_TRANSACTIONS,
                {"state_filters": states or [], "producer_id_filters": producer_ids or []},
            )
            if r["error_code"]:
                raise KafkaError(r["error_code"], f"ListTransactions on broker {node}")
            out += [
                TransactionListing(
                    t["transactional_id"], t["producer_id"], t["transaction_state"], node
                )
                for t in r["transaction_states"]
            ]
        return sorted(out, key=lambda t: t.transactional_id)

    def transaction_coordinator(self, transactional_id: str, timeout_s: float = 30) -> int:
        """The node id of the id's transaction coordinator (FindCoordinator key type 1)."""
        deadline = time.monotonic() + timeout_s
        while True:
            r = self.client.any_connection().request(
                ApiKeys.FIND_COORDINATOR, {"key": transactional_id, "key_type": 1}
            )
            error = Errors(r["error_code"])
            if error == Errors.NONE:
                self.client.refresh_metadata([])
                return r["node_id"]
            if error not in RETRIABLE or time.monotonic() > deadline:
                raise KafkaError(
                    error, f"FindCoordinator for transactional.id {transactional_id!r}"
                )
            time.sleep(0.2)

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        node = self.transaction_coordinator(transactional_id)
        r = self.client.connection(node).request(
            ApiKeys.DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]}
        )
        (t,) = r["transaction_states"]
        if t["error_code"]:
            raise KafkaError(t["error_code"], f"DescribeTransactions {transactional_id!r}")
        return TransactionDescription(
            node,
            t["transactional_id"],
            t["producer_id"],
            t["producer_epoch"],
            t["transaction_state"],
            t["transaction_timeout_ms"],
            t["transaction_start_time_ms"],
            tuple(
                sorted(
                    (p["name"], i) for p in t["topic_partitions"] for i in p["partition_indexes"]
                )
            ),
        )

    def describe_producers(self, topic: str, partition: int) -> list[ProducerState]:
        """The producers the partition's leader knows of (DescribeProducers)."""
        leader = self.client.leader_for(topic, partition)
        r = self.client.connection(leader).request(
            ApiKeys.DESCRIBE_PRODUCERS,
            {"topics": [{"name": topic, "partition_indexes": [partition]}]},
        )
        (p,) = (p for t in r["topics"] for p in t["partitions"])
        if p["error_code"]:
            raise KafkaError(p["error_code"], p.get("error_message") or f"{topic}-{partition}")
        return [
            ProducerState(
                a["producer_id"],
                a["producer_epoch"],
                a["last_sequence"],
                a["last_timestamp"],
                a["coordinator_epoch"],
                a["current_txn_start_offset"],
            )
            for a in p["active_producers"]
        ]

    def delete_group(self, group_id: str) -> None:
        r = self.coordinator(group_id).request(ApiKeys.DELETE_GROUPS, {"groups_names": [group_id]})
        (result,) = r["results"]
        if result["error_code"]:
            raise KafkaError(result["error_code"], f"DeleteGroups {group_id!r}")

    def end_offsets(self, partitions: list[tuple[str, int]], earliest: bool = False) -> dict:
        """Each partition's log end offset (its HW: what a consumer can reach), or
        its log start offset with `earliest` (ListOffsets to each leader)."""
        out = {}
        for topic, partition in partitions:
            leader = self.client.leader_for(topic, partition)
            r = self.client.connection(leader).request(
                ApiKeys.LIST_OFFSETS,
                {
                    "replica_id": -1,
                    "isolation_level": 0,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [
                                {"partition_index": partition, "timestamp": -2 if earliest else -1}
                            ],
                        }
                    ],
                },
            )
            p = r["topics"][0]["partitions"][0]
            if p["error_code"]:
                raise KafkaError(p["error_code"], f"ListOffsets {topic}-{partition}")
            out[(topic, partition)] = p["offset"]
        return out

    # -- leader elections and reassignments ----------------------------------------------------

    def elect_leaders(
        self, election_type: str | int, partitions: list[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], KafkaError | None]:
        """ElectLeaders: "preferred" (0) or "unclean" (1), for these partitions (None:
        every partition; those already led as asked are left out of the answer).
        Answers None for an election done, else the KafkaError (ELECTION_NOT_NEEDED,
        PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, ...)."""
        kind = ELECTION_TYPES.get(election_type, election_type)
        if kind not in ELECTION_TYPES.values():
            raise ValueError(f"election type {election_type!r}: use preferred or unclean")
        named: dict[str, list[int]] = {}
        for topic, partition in partitions or ():
            named.setdefault(topic, []).append(partition)
        body = {
            "election_type": kind,
            "topic_partitions": None
            if partitions is None
            else [{"topic": t, "partitions": ps} for t, ps in named.items()],
            "timeout_ms": 30_000,
        }
        response = self.client.any_connection().request(ApiKeys.ELECT_LEADERS, body)
        if response["error_code"]:
            raise KafkaError(response["error_code"], "ElectLeaders")
        return {
            (t["topic"], p["partition_id"]): KafkaError(
                p["error_code"], p["error_message"] or f"{t['topic']}-{p['partition_id']}"
            )
            if p["error_code"]
            else None
            for t in response["replica_election_results"]
            for p in t["partition_result"]
        }

    def alter_partition_reassignments(
        self, targets: dict[tuple[str, int], list[int] | None]
    ) -> dict[tuple[str, int], KafkaError | None]:
        """AlterPartitionReassignments: move each partition to its target replicas (None:
        cancel its reassignment in progress). Answers None where it started (or
        finished at once), else the KafkaError."""
        by_topic: dict[str, list[dict]] = {}
        for (topic, partition), replicas in targets.items():
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "replicas": None if replicas is None else list(replicas),
                }
            )
        body = {
            "timeout_ms": 30_000,
            "allow_replication_factor_change": True,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        response = self.client.any_connection().request(ApiKeys.ALTER_PARTITION_REASSIGNMENTS, body)
        if response["error_code"]:
            raise KafkaError(response["error_code"], response["error_message"] or "")
        return {
            (t["name"], p["partition_index"]): KafkaError(
                p["error_code"], p["error_message"] or f"{t['name']}-{p['partition_index']}"
            )
            if p["error_code"]
            else None
            for t in response["responses"]
            for p in t["partitions"]
        }

    def list_partition_reassignments(
        self, partitions: list[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], PartitionReassignment]:
        """ListPartitionReassignments: the reassignments in progress (of these
        partitions; None: all of them)."""
        named: dict[str, list[int]] = {}
        for topic, partition in partitions or ():
            named.setdefault(topic, []).append(partition)
        body = {
            "timeout_ms": 30_000,
            "topics": None
            if partitions is None
            else [{"name": t, "partition_indexes": ps} for t, ps in named.items()],
        }
        response = self.client.any_connection().request(ApiKeys.LIST_PARTITION_REASSIGNMENTS, body)
        if response["error_code"]:
            raise KafkaError(response["error_code"], response["error_message"] or "")
        return {
            (t["name"], p["partition_index"]): PartitionReassignment(
                p["replicas"], p["adding_replicas"], p["removing_replicas"]
            )
            for t in response["topics"]
            for p in t["partitions"]
        }

    def partition_replicas(
        self, topics: list[str] | None = None
    ) -> dict[tuple[str, int], list[int]]:
        """Each partition's replicas, as Metadata says (a reassignment in progress:
        target and leaving ones). Unknown topics raise UNKNOWN_TOPIC_OR_PARTITION."""
        response = self.client.refresh_metadata(topics, allow_auto_topic_creation=False)
        out = {}
        for t in response["topics"]:
            if t["error_code"]:
                raise KafkaError(t["error_code"], f"topic {t['name']!r}")
            for p in t["partitions"]:
                out[(t["name"], p["partition_index"])] = list(p["replica_nodes"])
        return out

    def broker_ids(self) -> list[int]:
        """The live brokers' ids (Metadata's brokers)."""
        self.client.refresh_metadata([], allow_auto_topic_creation=False)
        return sorted(self.client.nodes)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
