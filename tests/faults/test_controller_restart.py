"""The single controller restarted under an acks=all load: as a KRaft quorum of one it
leads again at once and, as Kafka's activate() does, restarts every broker's session
timer before it judges anyone, so no broker is fenced and no leadership moves.

(Before the single controller ran as a quorum of one it replayed its log, saw no
heartbeat from anyone and fenced every broker on its first tick.)"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import wait_until

from kafkalab.cluster import LocalCluster
from kafkalab.controller.metadata_image import MetadataImage
from kafkalab.controller.metadata_record_serde import deserialize
from kafkalab.records import iter_batches
from kafkalab.server.events import read_events
from kafkalab.server.quorum_meta_log_listener import metadata_image_log_dir

PARTITIONS = 6
SESSION_MS = 3000
#: Brokers heartbeat every second (Kafka's default is 2 s of a 9 s session): a restarted
#: controller that judged sessions before every broker had heartbeated again would
#: fence some of them.
HEARTBEAT_MS = 1000


def controller_records(cluster: LocalCluster) -> list[dict]:
    """The committed metadata records, from the controller's files."""
    return [
        deserialize(r.value)
        for path in sorted(metadata_image_log_dir(cluster.base_dir / "controller").glob("*.log"))
        for batch in iter_batches(path.read_bytes())
        for r in batch.records
    ]


def leaders(records: list[dict]) -> dict[int, tuple[int, int]]:
    """Each partition of "busy": (leader, leader epoch), the records replayed."""
    image = MetadataImage()
    for record in records:
        image.replay(record)
    return {p: (r.leader, r.leader_epoch) for p, r in image.topics["busy"].partitions.items()}


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_restarted_controller_fences_nobody_and_moves_no_leadership(tmp_path, how):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=SESSION_MS,
        broker_props={"broker.heartbeat.interval.ms": str(HEARTBEAT_MS)},
    ) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic("busy", PARTITIONS, 3)]).values():
            f.result(30)
        wait_until(
            lambda: all(
                len(p.isrs) == 3
                for p in admin.list_topics("busy", timeout=10).topics["busy"].partitions.values()
            ),
            timeout=60,
        )
        acked: list[float] = []
        failed: list[str] = []
        stop = threading.Event()

        def produce() -> None:
            producer = Producer(
                {"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
            )

            def done(err, _msg) -> None:
                if err is None:
                    acked.append(time.monotonic())
                else:
                    failed.append(str(err))

            n = 0
            while not stop.is_set():
                producer.produce("busy", b"v%d" % n, partition=n % PARTITIONS, on_delivery=done)
                n += 1
                producer.poll(0.005)
            producer.flush(30)

        load = threading.Thread(target=produce, daemon=True)
        load.start()
        try:
            assert wait_until(lambda: len(acked) > 100, timeout=30)
            before = controller_records(cluster)
            assert not any(r["type"] == "FenceBrokerRecord" for r in before)

            controller = cluster.controller
            address = controller.bootstrap_servers
            controller.stop() if how == "stop" else controller.kill()
            controller.props["listeners"] = f"CONTROLLER://{address}"  # the address brokers know
            controller.start()
            restarted = time.monotonic()
            # two session timeouts with the controller back: any fence would be made
            time.sleep(2 * SESSION_MS / 1000)
            assert any(t > restarted for t in acked), "the load went on"
        finally:
            stop.set()
            load.join(60)
        after = controller_records(cluster)
        assert after[: len(before)] == before  # the log was replayed, not rewritten
        new = after[len(before) :]
        assert [r for r in new if r["type"] == "FenceBrokerRecord"] == []
        assert leaders(after) == leaders(before)  # no leader changed, no epoch bumped
        assert [
            e for e in read_events(cluster.base_dir / "controller") if e["event"] == "fenced"
        ] == []
        assert failed == []
