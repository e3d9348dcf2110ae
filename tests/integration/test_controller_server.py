"""The controller on real sockets: brokers register, heartbeat, get fenced when
silent, change ISRs, and read the metadata log with Fetch."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time
import uuid

import pytest

from kafkalab.cli import main
from kafkalab.controller.metadata_record_serde import (
    JsonMetadataRecordError,
    deserialize,
    kafka_uuid_string,
)
from kafkalab.controller.quorum_controller import METADATA_TOPIC
from kafkalab.errors import Errors
from kafkalab.protocol import RequestHeader, decode_response, encode_request
from kafkalab.protocol.messages import CONTROLLER_APIS
from kafkalab.records import iter_batches
from kafkalab.server.controller_server import ControllerThread
from kafkalab.server.events import read_events
from kafkalab.server.quorum_meta_log_listener import metadata_image_log_dir


def read_frame(sock):
    def exactly(n):
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            assert chunk, "connection closed"
            out += chunk
        return out

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


class Client:
    def __init__(self, address):
        host, port = address.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.ids = 0

    def call(self, api_key, version, body):
        self.ids += 1
        self.sock.sendall(
            encode_request(RequestHeader(api_key, version, self.ids, "t"), body, CONTROLLER_APIS)
        )
        cid, response = decode_response(CONTROLLER_APIS[api_key], version, read_frame(self.sock))
        assert cid == self.ids
        return response

    def register(self, broker_id):
        return self.call(
            62,
            0,
            {
                "broker_id": broker_id,
                "cluster_id": "c",
                "incarnation_id": uuid.uuid4(),
                "listeners": [
                    {
                        "name": "PLAINTEXT",
                        "host": "127.0.0.1",
                        "port": 9000 + broker_id,
                        "security_protocol": 0,
                    }
                ],
                "features": [],
                "rack": None,
            },
        )["broker_epoch"]

    def heartbeat(self, broker_id, epoch, offset=0):
        return self.call(
            63,
            0,
            {
                "broker_id": broker_id,
                "broker_epoch": epoch,
                "current_metadata_offset": offset,
                "want_fence": False,
                "want_shut_down": False,
            },
        )

    def metadata_records(self, offset=0):
        body = {
            "replica_id": 1,
            "max_wait_ms": 0,
            "min_bytes": 0,
            "max_bytes": 10**6,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": METADATA_TOPIC,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "log_start_offset": -1,
                            "partition_max_bytes": 10**6,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        part = self.call(1, 11, body)["responses"][0]["partitions"][0]
        assert part["error_code"] == 0
        # A fetch returns whole batches: records before the fetch offset are skipped,
        # as every Kafka client does.
        return [
            deserialize(r.value)
            for b in iter_batches(bytes(part["records"]))
            for r in b.records
            if r.offset >= offset
        ]


@pytest.fixture
def controller(tmp_path):
    with ControllerThread(
        {
            "log.dirs": str(tmp_path),
            "broker.session.timeout.ms": "800",
            "listeners": "CONTROLLER://127.0.0.1:0",
        }
    ) as c:
        yield c


def test_brokers_register_heartbeat_and_read_the_metadata_log(controller):
    client = Client(controller.server.address)
    versions = {k["api_key"] for k in client.call(18, 0, {})["api_keys"]}
    assert versions == {
        1,
        18,
        19,
        20,
        33,
        37,
        43,
        44,
        45,
        46,
        56,
        62,
        63,
        67,
    }  # 33/44: (Incremental)AlterConfigs, 37: CreatePartitions, 43/45/46: ElectLeaders and the
    # reassignments, 67: AllocateProducerIds
    epochs = {b: client.register(b) for b in (1, 2, 3)}
    assert sorted(epochs.values()) == list(epochs.values())  # epochs are log offsets
    for b, e in epochs.items():
        assert client.heartbeat(b, e)["is_fenced"] is False
    stale = client.heartbeat(1, epochs[1] - 1)
    assert stale["error_code"] == Errors.STALE_BROKER_EPOCH
    created = client.call(
        19,
        4,
        {
            "topics": [
                {
                    "name": "orders",
                    "num_partitions": 2,
                    "replication_factor": 3,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 1000,
            "validate_only": False,
        },
    )
    assert created["topics"][0]["error_code"] == 0
    records = client.metadata_records()
    kinds = [r["type"] for r in records]
    assert kinds.count("RegisterBrokerRecord") == 3 and kinds.count("PartitionRecord") == 2
    assert len(client.metadata_records(len(records) - 1)) == 1  # resumable from any offset


def test_a_silent_broker_is_fenced_and_its_leaderships_move(controller, tmp_path):
    client = Client(controller.server.address)
    epochs = {b: client.register(b) for b in (1, 2, 3)}
    for b, e in epochs.items():
        client.heartbeat(b, e)
    client.call(
        19,
        4,
        {
            "topics": [
                {
                    "name": "t",
                    "num_partitions": 1,
                    "replication_factor": 3,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 1000,
            "validate_only": False,
        },
    )
    leader = controller.call(lambda c: c.topics["t"].partitions[0].leader)
    deadline = time.time() + 10
    while time.time() < deadline:
        for b, e in epochs.items():
            if b != leader:
                client.heartbeat(b, e)
        if controller.call(lambda c: c.topics["t"].partitions[0].leader) != leader:
            break
        time.sleep(0.1)
    part = controller.call(lambda c: c.topics["t"].partitions[0])
    assert part.leader != leader and leader not in part.isr and part.leader_epoch == 1
    changes = [r for r in client.metadata_records() if r["type"] == "PartitionChangeRecord"]
    assert (changes[-1]["leader"], changes[-1]["isr"]) == (part.leader, part.isr)
    # why is not in Kafka's record: the controller's events log has it
    events = [e for e in read_events(tmp_path) if e["event"] == "partition_change"]
    assert events[-1]["reason"] == f"broker {leader} fenced"
    assert (events[-1]["leader"], events[-1]["leader_epoch"]) == (part.leader, 1)


def test_alter_partition_over_the_wire(controller):
    client = Client(controller.server.address)
    epochs = {b: client.register(b) for b in (1, 2)}
    for b, e in epochs.items():
        client.heartbeat(b, e)
    client.call(
        19,
        4,
        {
            "topics": [
                {
                    "name": "t",
                    "num_partitions": 1,
                    "replication_factor": 2,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 1000,
            "validate_only": False,
        },
    )
    part = controller.call(lambda c: c.topics["t"].partitions[0])

    def alter(broker, isr, partition_epoch):
        body = {
            "broker_id": broker,
            "broker_epoch": epochs[broker],
            "topics": [
                {
                    "topic_name": "t",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "leader_epoch": part.leader_epoch,
                            "new_isr": isr,
                            "partition_epoch": partition_epoch,
                        }
                    ],
                }
            ],
        }
        return client.call(56, 0, body)["topics"][0]["partitions"][0]

    follower = next(b for b in (1, 2) if b != part.leader)
    assert alter(follower, [follower], 0)["error_code"] == Errors.NOT_LEADER_OR_FOLLOWER
    ok = alter(part.leader, [part.leader], 0)
    assert (ok["error_code"], ok["isr"], ok["partition_epoch"]) == (0, [part.leader], 1)
    assert alter(part.leader, [1, 2], 0)["error_code"] == Errors.INVALID_UPDATE_VERSION


def test_a_busy_controller_does_not_fence_brokers_whose_heartbeats_wait(controller):
    """The controller's event loop is busy for three session timeouts (a long queue
    of AlterPartition batches, fsyncs on a loaded disk) while a broker keeps
    heartbeating: the heartbeat waiting in the socket counts as contact when it
    is read, before it waits for the handler (Kafka's BrokerHeartbeatTracker),
    so the controller's next session check does not fence that broker."""
    import threading

    client = Client(controller.server.address)
    epoch = client.register(1)
    assert client.heartbeat(1, epoch)["is_fenced"] is False
    stop = threading.Event()

    def heartbeats() -> None:
        beat = Client(controller.server.address)
        while not stop.is_set():
            beat.heartbeat(1, epoch)
            time.sleep(0.1)

    beating = threading.Thread(target=heartbeats, daemon=True)
    beating.start()
    try:
        time.sleep(0.3)
        controller._loop.call_soon_threadsafe(time.sleep, 2.4)  # session: 800 ms
        time.sleep(2.4 + 1.0)
        assert controller.call(lambda c: c.brokers[1].fenced) is False
    finally:
        stop.set()
        beating.join(10)
    kinds = [r["type"] for r in client.metadata_records()]
    assert "FenceBrokerRecord" not in kinds


@pytest.mark.parametrize("version", [1, 3])  # v3: flexible
def test_create_partitions_over_the_wire_writes_partition_records(controller, version):
    client = Client(controller.server.address)
    epochs = {b: client.register(b) for b in (1, 2)}
    for b, e in epochs.items():
        client.heartbeat(b, e)
    topic = {
        "name": "t",
        "num_partitions": 1,
        "replication_factor": 2,
        "assignments": [],
        "configs": [],
    }
    client.call(19, 4, {"topics": [topic], "timeout_ms": 1000, "validate_only": False})
    start = len(client.metadata_records())

    def grow(topics, validate_only=False):
        body = {"topics": topics, "timeout_ms": 1000, "validate_only": validate_only}
        return {r["name"]: r for r in client.call(37, version, body)["results"]}

    dry = grow([{"name": "t", "count": 3, "assignments": None}], validate_only=True)
    assert dry["t"]["error_code"] == 0 and len(client.metadata_records()) == start
    answer = grow(
        [
            {
                "name": "t",
                "count": 3,
                "assignments": [{"broker_ids": [2, 1]}, {"broker_ids": [1, 2]}],
            },
            {"name": "missing", "count": 2, "assignments": None},
        ]
    )
    assert answer["t"]["error_code"] == 0
    assert answer["missing"]["error_code"] == Errors.UNKNOWN_TOPIC_OR_PARTITION
    new = client.metadata_records(0)[start:]
    assert [(r["type"], r["partition"], r["replicas"], r["leader"]) for r in new] == [
        ("PartitionRecord", 1, [2, 1], 2),
        ("PartitionRecord", 2, [1, 2], 1),
    ]
    fewer = grow([{"name": "t", "count": 2, "assignments": None}])["t"]
    assert fewer["error_code"] == Errors.INVALID_PARTITIONS
    assert (
        fewer["error_message"]
        == "The topic t currently has 3 partition(s); 2 would not be an increase."
    )


def test_create_topics_v7_answers_what_was_created_and_validate_only_writes_nothing(
    controller, tmp_path, capsys
):
    """CreateTopics v5+ answers each created topic's partitions, replication factor and
    configs, v7 its TopicRecord's id; validate_only checks as a creation would (the
    live brokers, partitions, configs, existence) and writes nothing; a topic that
    failed is answered with -1s and null configs (Kafka: ReplicationControlManager)."""
    client = Client(controller.server.address)
    epochs = {b: client.register(b) for b in (1, 2)}
    for b, e in epochs.items():
        client.heartbeat(b, e)

    def topic(name, partitions=2, factor=2, **configs):
        return {
            "name": name,
            "num_partitions": partitions,
            "replication_factor": factor,
            "assignments": [],
            "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()],
        }

    def create(topics, validate_only=False, version=7):
        body = {"topics": topics, "timeout_ms": 1000, "validate_only": validate_only}
        return {t["name"]: t for t in client.call(19, version, body)["topics"]}

    start = len(client.metadata_records())
    dry = create(
        [
            topic("fine", retention_ms="1000"),
            topic("wide", factor=3),
            topic("none", partitions=0),
            topic("bad", retention_ms="soon"),
        ],
        validate_only=True,
    )
    assert len(client.metadata_records()) == start  # nothing written
    assert dry["fine"]["error_code"] == 0
    assert (dry["fine"]["num_partitions"], dry["fine"]["replication_factor"]) == (2, 2)
    assert dry["wide"]["error_code"] == Errors.INVALID_REPLICATION_FACTOR
    assert dry["none"]["error_code"] == Errors.INVALID_PARTITIONS
    assert dry["bad"]["error_code"] == Errors.INVALID_CONFIG
    for failed in ("wide", "none", "bad"):
        assert (dry[failed]["num_partitions"], dry[failed]["replication_factor"]) == (-1, -1)
        assert dry[failed]["configs"] is None
    assert controller.call(lambda c: "fine" in c.topics) is False

    made = create([topic("fine", retention_ms="1000")])["fine"]
    assert made["error_code"] == 0 and made["num_partitions"] == 2
    assert made["replication_factor"] == 2
    record = next(
        r for r in client.metadata_records() if r["type"] == "TopicRecord" and r["name"] == "fine"
    )
    assert made["topic_id"] == uuid.UUID(record["topic_id"])
    configs = {c["name"]: c for c in made["configs"]}
    assert configs["retention.ms"]["value"] == "1000"
    assert configs["retention.ms"]["config_source"] == 1  # DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"]["config_source"] == 5  # DEFAULT_CONFIG
    assert [c["name"] for c in made["configs"]] == sorted(configs)

    again = create([topic("fine")], validate_only=True)["fine"]
    assert again["error_code"] == Errors.TOPIC_ALREADY_EXISTS
    assert again["topic_id"] == uuid.UUID(int=0) and again["configs"] is None

    # the KRaft logs as `kafka-dump-log --cluster-metadata-decoder` prints them (issue 25):
    # Raft's (one entry a record; a write of several a metadata transaction) and the
    # metadata-image log brokers fetch (one batch a write)
    topic_id = kafka_uuid_string(made["topic_id"])
    for log_dir, framing in (
        (tmp_path / f"{METADATA_TOPIC}-0", ["BEGIN_TRANSACTION_RECORD", "END_TRANSACTION_RECORD"]),
        (metadata_image_log_dir(tmp_path), []),
    ):
        capsys.readouterr()
        assert main(["dump-log", "--cluster-metadata-decoder", str(log_dir)]) == 0
        lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
        payloads = [
            json.loads(line.split(" payload: ", 1)[1]) for line in lines if "payload" in line
        ]
        mine = [p for p in payloads if p["data"].get("topicId") == topic_id]
        assert [p["type"] for p in mine] == ["TOPIC_RECORD", "PARTITION_RECORD", "PARTITION_RECORD"]
        assert mine[0] == {
            "type": "TOPIC_RECORD",
            "version": 0,
            "data": {"name": "fine", "topicId": topic_id},
        }
        assert [p["data"]["partitionId"] for p in mine[1:]] == [0, 1]
        assert all(len(p["data"]["replicas"]) == 2 for p in mine[1:])
        config = next(p for p in payloads if p["type"] == "CONFIG_RECORD")
        assert config["data"] == {
            "resourceType": 2,
            "resourceName": "fine",
            "name": "retention.ms",
            "value": "1000",
        }
        assert {"REGISTER_BROKER_RECORD", "UNFENCE_BROKER_RECORD", *framing} <= {
            p["type"] for p in payloads
        }


def test_a_single_controller_is_a_quorum_of_one_that_leads_at_once_and_again(tmp_path):
    """Without controller.quorum.voters the controller is a KRaft quorum of one: it
    answers DescribeQuorum as the leader of epoch 1 as soon as it serves, its Raft
    log holds each write as an entry after the LeaderChange, and restarted on the
    same directory it leads epoch 2 with the same records (replayed, none lost)."""
    from kafkalab.cluster.metadata_quorum import describe_quorum
    from kafkalab.raft.kafka_metadata_log import KafkaMetadataLog
    from kafkalab.raft.kafka_raft_client import LeaderChangeMessage
    from kafkalab.server.controller_channel import parse_bootstrap_servers
    from kafkalab.server.quorum_meta_log_listener import STANDALONE_NODE_ID

    props = {"log.dirs": str(tmp_path), "listeners": "CONTROLLER://127.0.0.1:0"}
    with ControllerThread(props) as controller:
        q = describe_quorum(parse_bootstrap_servers(controller.server.address), 10)
        assert (q.leader_id, q.leader_epoch) == (STANDALONE_NODE_ID, 1)
        assert [v.replica_id for v in q.current_voters] == [STANDALONE_NODE_ID]
        client = Client(controller.server.address)
        client.register(1)
        written = client.metadata_records()
        assert [r["type"] for r in written] == ["RegisterBrokerRecord"]
    raft = KafkaMetadataLog(tmp_path)
    assert [type(e.record) for e in raft.entries] == [LeaderChangeMessage, dict]
    assert [e.record for e in raft.entries[1:]] == written
    raft.close()
    with ControllerThread(props) as controller:
        q = describe_quorum(parse_bootstrap_servers(controller.server.address), 10)
        assert (q.leader_id, q.leader_epoch) == (STANDALONE_NODE_ID, 2)
        assert Client(controller.server.address).metadata_records() == written
        assert controller.call(lambda c: sorted(c.brokers)) == [1]


def test_a_directory_from_before_the_quorum_of_one_is_refused(tmp_path):
    """A single controller's directory from before it ran as a quorum of one holds
    JSON records in __cluster_metadata-0 and no quorum-state: read as a Raft log it
    would lose every record, so the controller refuses to start on it."""
    import asyncio

    from kafkalab.controller.quorum_controller import QuorumController
    from kafkalab.server.controller_server import ControllerServer
    from kafkalab.storage.errors import StorageError

    old = QuorumController(tmp_path)  # the layout the direct path wrote
    old.register_broker(1, "127.0.0.1", 9001, "i1", now_ms=0)
    old.close()
    server = ControllerServer({"log.dirs": str(tmp_path), "listeners": "CONTROLLER://127.0.0.1:0"})
    with pytest.raises(StorageError, match="before it ran as a KRaft quorum of one"):
        asyncio.run(server.start())
    assert (tmp_path / f"{METADATA_TOPIC}-0").is_dir()  # left as it was


def test_a_quorum_directory_with_json_metadata_records_is_refused(tmp_path):
    """A controller's directory from before metadata records were Kafka's binary
    format (issue 25) holds JSON records in its Raft log: they are not read (no
    on-disk compatibility with those logs), and the controller refuses to start with
    an error that says to re-create the cluster directory."""
    import asyncio

    from kafkalab.records import SimpleRecord, build_batch
    from kafkalab.server.controller_server import ControllerServer
    from kafkalab.storage.log_config import LogConfig
    from kafkalab.storage.unified_log import UnifiedLog

    props = {"log.dirs": str(tmp_path), "listeners": "CONTROLLER://127.0.0.1:0"}
    with ControllerThread(props) as controller:
        Client(controller.server.address).register(1)
    raft = UnifiedLog(tmp_path / f"{METADATA_TOPIC}-0", LogConfig())
    old = {"type": "FenceBrokerRecord", "broker_id": 1}  # as the JSON logs held it
    raft.append_as_follower(
        build_batch(
            [SimpleRecord(json.dumps(old).encode())],
            base_offset=raft.log_end_offset,
            partition_leader_epoch=1,
        )
    )
    raft.flush()
    raft.close()
    # `kafkalab controller CONFIG` says so and exits 1, no traceback; so does a server
    # started in this process
    config = tmp_path / "controller.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    out = subprocess.run(
        [sys.executable, "-m", "kafkalab", "controller", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1, out.stderr
    assert "Re-create the cluster directory" in out.stderr
    assert "Traceback" not in out.stderr
    server = ControllerServer(props)
    with pytest.raises(JsonMetadataRecordError, match="Re-create the cluster directory"):
        asyncio.run(server.start())
