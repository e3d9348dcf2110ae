"""A large compaction on the labs' settings (broker.session.timeout.ms=500, a
heartbeat every 100 ms) neither fences the broker nor stops its answers.

When the LogCleaner ran on the broker's event loop, a pass over tens of MB held
the loop for seconds: no heartbeat went out, the controller fenced the broker
after 500 ms, and produce and fetch waited for the whole pass. The pass now runs
in a cleaner process; this test writes ~30 MB of a compacted topic with the
cleaner off, restarts the broker with it on, and, while the pass runs, produces
and fetches one record at a time.

"While the pass runs" is proven by order, not by time: the broker logs
"cleaning compacted-0" when it hands the log to its cleaner and writes
`cleaner-offset-checkpoint` only after swapping the cleaned segments in. A
produce acknowledged and fetched after the first was seen and before the
second was written was answered during the pass.
"""

from __future__ import annotations

import random
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster.failover import LABS_FAILOVER
from kafkalab.cluster.local_cluster import LocalCluster
from kafkalab.controller.metadata_record_serde import deserialize
from kafkalab.records import iter_batches
from kafkalab.server.quorum_meta_log_listener import metadata_image_log_dir
from kafkalab.storage.checkpoint_file import OffsetCheckpointFile
from kafkalab.storage.log_cleaner import CLEANER_OFFSET_CHECKPOINT

TOPIC = "compacted"
MB = 1_000_000
TOTAL_BYTES = 30 * MB
KEYS = 50_000
VALUE = 200


def fence_records(cluster: LocalCluster) -> list[dict]:
    """Every FenceBrokerRecord in the controller's metadata log."""
    out = []
    for path in sorted(metadata_image_log_dir(cluster.base_dir / "controller").glob("*.log")):
        for batch in iter_batches(path.read_bytes()):
            for r in batch.records:
                record = deserialize(r.value)
                if record["type"] == "FenceBrokerRecord":
                    out.append(record)
    return out


def produce_compacted(bootstrap: str) -> int:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "acks": "all"}
    )
    rng = random.Random(7)
    value = bytes(rng.randrange(256) for _ in range(VALUE))
    records = TOTAL_BYTES // (VALUE + 30)
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, key=b"key-%06d" % rng.randrange(KEYS), partition=0)
                break
            except BufferError:
                producer.poll(0.1)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return records


def test_a_large_compaction_neither_fences_the_broker_nor_stops_its_answers(tmp_path):
    broker_props = {
        **LABS_FAILOVER["broker_props"],
        "log.cleaner.enable": "false",  # first the data, then the pass
        "log.cleaner.backoff.ms": "3000",  # the first pass starts 3 s after the restart
    }
    with LocalCluster(
        brokers=1,
        base_dir=tmp_path,
        broker_props=broker_props,
        session_timeout_ms=LABS_FAILOVER["session_timeout_ms"],
    ) as cluster:
        assert cluster.session_timeout_ms == 500, "KAFKALAB_MIN_SESSION_TIMEOUT_MS raised it"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        config = {"cleanup.policy": "compact", "segment.bytes": str(8 * 1024 * 1024)}
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1, config=config)]).values():
            future.result(30)
        produce_compacted(cluster.bootstrap_servers)

        cluster.props_by_broker[1] = {"log.cleaner.enable": "true"}
        broker = cluster.restart(1)  # its controlled shutdown writes one FenceBrokerRecord
        fences_before = len(fence_records(cluster))
        checkpoint = OffsetCheckpointFile(broker.dir / CLEANER_OFFSET_CHECKPOINT)
        bootstrap = cluster.bootstrap_servers
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "reader", "fetch.wait.max.ms": 50}
        )
        acked: list[int] = []

        def on_delivery(err, msg) -> None:
            assert err is None, err
            acked.append(msg.offset())

        def started() -> bool:
            return any(f"cleaning {TOPIC}-0 " in line for line in broker.output)

        during = []  # offsets produced and fetched back while the pass ran
        before_pass = after_pass = 0
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            was_started = started()  # read before the request is sent
            producer.produce(
                TOPIC, b"during", key=b"probe-%d" % len(acked), partition=0, on_delivery=on_delivery
            )
            assert producer.flush(30) == 0
            offset = acked[-1]
            consumer.assign([TopicPartition(TOPIC, 0, offset)])
            message = consumer.poll(30)
            assert message is not None and not message.error(), message and message.error()
            assert message.offset() == offset and message.value() == b"during"
            ended = (TOPIC, 0) in checkpoint.read()  # read after the answers came
            if ended:
                after_pass += 1
                if after_pass >= 3:
                    break
            elif was_started:
                during.append(offset)
            else:
                before_pass += 1
        consumer.close()

        cleaned = [line for line in broker.output if f"cleaned {TOPIC}-0 " in line]
        assert cleaned, "the pass never finished:\n" + "".join(broker.output[-30:])
        bytes_read = int(cleaned[0].split("): ")[1].split(" -> ")[0])
        assert bytes_read > 20 * MB, cleaned[0]  # a large pass: most of the ~30 MB
        assert before_pass > 0  # the probe ran before the hand-out, too
        assert len(during) >= 10, (
            f"only {len(during)} produce+fetch answered during the pass: {cleaned[0]}"
        )
        print(f"{len(during)} produce+fetch round trips answered during the pass; {cleaned[0]}")
        fenced = [line for line in cluster.controller.output if "fenced brokers" in line]
        assert fenced == [], "".join(fenced)
        assert len(fence_records(cluster)) == fences_before
