"""Three controller servers on a KRaft quorum with snapshots (KIP-630): every
`metadata.log.max.record.bytes.between.snapshots` bytes each controller snapshots its
image and Raft drops its log below. A controller stopped meanwhile comes back, is
answered a SnapshotId, fetches the leader's snapshot, loads it and follows; the
metadata log it serves brokers keeps the same offsets from the snapshot on (the next
record, the next broker epoch) and starts with the image instead of the history. A
controller restarted with its own snapshot keeps its metadata log whole. When the
controller that loaded a snapshot is active, a broker fetching from before it is
sent back to the log start, where the image begins."""

from __future__ import annotations

import json

from test_controller_quorum import (
    call,
    create_topic,
    heartbeat,
    metadata_fetch,
    register,
    until,
    voter_configs,
)

from kafkalab.cli import main
from kafkalab.controller.metadata_image import MetadataImage
from kafkalab.controller.metadata_record_serde import deserialize
from kafkalab.errors import Errors
from kafkalab.raft.kafka_metadata_log import METADATA_LOG_DIR
from kafkalab.records import iter_batches
from kafkalab.server.controller_server import ControllerThread
from kafkalab.server.quorum_meta_log_listener import IMAGE_CHECKPOINT_FILE, METADATA_IMAGE_DIR


def delete_topic(port: int, name: str) -> dict:
    body = {"topic_names": [name], "timeout_ms": 5000}
    return call(port, 20, 3, body)["responses"][0]


def test_a_controller_back_after_snapshots_loads_the_leaders_and_serves_the_same_offsets(
    tmp_path, capsys
):
    ports, _, configs = voter_configs(
        tmp_path,
        {
            "broker.session.timeout.ms": "60000",
            # Kafka's binary records: about 75 bytes a topic created, 20 deleted
            "metadata.log.max.record.bytes.between.snapshots": "1000",
            "metadata.log.segment.bytes": "1024",
        },
    )
    controllers = {i: ControllerThread(configs[i]).__enter__() for i in ports}

    def server(i: int):
        return controllers[i].server

    def active() -> int | None:
        found = [i for i in controllers if server(i).quorum.active]
        return found[0] if len(found) == 1 else None

    try:
        first = until(active)
        reg = register(ports[first], 1)
        assert reg["error_code"] == 0
        assert heartbeat(ports[first], 1, reg["broker_epoch"])["error_code"] == 0
        assert create_topic(ports[first], "early")["error_code"] == 0
        down = next(i for i in ports if i != first)
        until(lambda: "early" in server(down).controller.topics)
        controllers.pop(down).__exit__(None, None, None)

        for n in range(60):  # enough records for several snapshots, some to compact
            assert create_topic(ports[first], f"t{n}")["error_code"] == 0
            if n % 2:
                assert delete_topic(ports[first], f"t{n}")["error_code"] == 0
        leader = server(first)
        until(lambda: leader.quorum.snapshots_taken >= 2)
        raft = leader.quorum.manager.log
        assert raft.log_start_offset > 0  # Raft dropped its log below the snapshot
        segments = sorted((tmp_path / f"controller-{first}" / METADATA_LOG_DIR).glob("*.log"))
        assert int(segments[0].stem) > 0
        checkpoint = tmp_path / f"controller-{first}" / METADATA_IMAGE_DIR / IMAGE_CHECKPOINT_FILE
        assert checkpoint.exists()
        # a snapshot file read as kafka-dump-log --cluster-metadata-decoder reads it
        snapshot = sorted(
            (tmp_path / f"controller-{first}" / METADATA_LOG_DIR).glob("*.checkpoint")
        )
        assert main(["dump-log", "--cluster-metadata-decoder", str(snapshot[-1])]) == 0
        dumped = capsys.readouterr().out.splitlines()
        kinds = [
            json.loads(line.split(" payload: ")[1])["type"] for line in dumped if "payload" in line
        ]
        assert kinds[0] == "KAFKALAB_METADATA_SNAPSHOT_RECORD"  # then the image
        assert {"REGISTER_BROKER_RECORD", "TOPIC_RECORD", "PARTITION_RECORD"} <= set(kinds)
        assert "SNAPSHOT_HEADER" in dumped[3] and "SNAPSHOT_FOOTER" in dumped[-1]
        history = leader.controller.records_since(0)
        assert history[0][0] == 0  # the active controller's metadata log stays whole

        # the stopped controller comes back beyond what its metadata log holds
        controllers[down] = ControllerThread(configs[down]).__enter__()
        back = server(down)
        until(lambda: back.quorum.snapshots_loaded >= 1 and "t58" in back.controller.topics)
        assert back.quorum.manager.client.snapshots_installed >= 1
        # (the controllers run in threads of their own: compare once both are still)
        until(
            lambda: (
                back.controller.metadata_offset == leader.controller.metadata_offset
                and set(back.controller.topics) == set(leader.controller.topics)
            )
        )
        start = back.controller.log.log_start_offset
        topics_before = set(leader.controller.topics)
        assert start > 0 and back.controller.snapshot_end_offset > start
        end = back.controller.snapshot_end_offset
        assert back.controller.records_since(end) == leader.controller.records_since(end)
        # a new broker gets the same epoch everywhere
        reg2 = register(ports[first], 2)
        until(lambda: 2 in back.controller.brokers)
        assert back.controller.brokers[2].broker_epoch == reg2["broker_epoch"]
        assert back.controller.brokers[1].broker_epoch == reg["broker_epoch"]

        # make the controller that loaded the snapshot the active one: stop the others'
        # active controller until it is (a majority always stays up)
        stopped: list[int] = []
        for _ in range(10):  # each election picks one of two: rarely 10 times the other
            now = until(active)
            if now == down:
                break
            controllers.pop(now).__exit__(None, None, None)
            stopped.append(now)
            until(lambda: active() is not None)
            for i in stopped:  # bring it back as a standby, with its own snapshot
                controllers[i] = ControllerThread(configs[i]).__enter__()
                restarted = server(i)
                # its metadata log was kept whole across the restart (cut to its
                # checkpoint, the rest applied again from Raft)
                assert restarted.controller.log.log_start_offset == 0
                until(lambda r=restarted: r.controller.records_since(0)[: len(history)] == history)
            stopped.clear()
        assert until(active) == down

        # a broker that read history up to somewhere before the snapshot's end
        out_of_range = metadata_fetch(ports[down], 1)
        assert out_of_range["error_code"] == Errors.OFFSET_OUT_OF_RANGE
        assert out_of_range["log_start_offset"] == start
        part = metadata_fetch(ports[down], start)
        assert part["error_code"] == 0
        records = [
            deserialize(r.value) for b in iter_batches(bytes(part["records"])) for r in b.records
        ]
        assert records[0] == {"type": "MetadataSnapshotRecord", "end_offset": end}
        image = MetadataImage()  # a broker's, which read history before: emptied first
        image.replay({"type": "TopicRecord", "name": "stale"})
        for r in records:
            image.replay(r)
        assert set(image.topics) == set(back.controller.topics) == set(topics_before)
        assert heartbeat(ports[down], 2, reg2["broker_epoch"])["error_code"] == 0
        assert create_topic(ports[down], "after")["error_code"] == 0
    finally:
        for c in controllers.values():
            c.__exit__(None, None, None)
