"""Exactly once, judged by the history checker: a confluent-kafka
consume-transform-produce job (read_committed consumer, transactional producer,
send_offsets_to_transaction) on the three-broker cluster crashes mid-transaction
(its producer and consumer abandoned, as a killed process leaves them), the
transaction coordinator's broker is SIGKILLed, and a second instance with the same
transactional.id finishes the input. Every send names its transaction and its input
record; a read_committed and a read_uncommitted watcher read the output while it
runs. The checker finds nothing lost, no aborted read and no duplicate under
read_committed, and does find both in what the read_uncommitted watcher saw; the
Jepsen-grade checker (kafkalab.cluster.checker) finds no anomaly at all, and G1a
(aborted reads) of exactly the crashed transaction's outputs in the misjudged
history."""

from __future__ import annotations

import threading
from dataclasses import replace

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import assert_nothing_found, judged

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import current_leader
from kafkalab.cluster.history import READ_COMMITTED, History, check
from kafkalab.cluster.workload import read_final_log
from kafkalab.coordinator.transaction.transaction_log import TRANSACTION_STATE_TOPIC, partition_for

SOURCE, SINK, TID = "eosh-in", "eosh-out", "eosh-job"
INPUTS, BATCH, TXN_PARTITIONS = 160, 20, 3


class Watcher(threading.Thread):
    def __init__(self, bs: str, history: History, isolation: str) -> None:
        super().__init__(daemon=True)
        self.history, self.isolation, self.stop = history, isolation, threading.Event()
        self.consumer = Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": f"eosh-watch-{isolation}",
                "isolation.level": isolation,
                "enable.auto.commit": False,
            }
        )
        self.consumer.assign([TopicPartition(SINK, p, 0) for p in (0, 1)])

    def run(self) -> None:
        while not self.stop.is_set():
            m = self.consumer.poll(0.1)
            if m is not None and m.error() is None:
                self.history.read(
                    SINK, m.partition(), m.offset(), m.value(), self.isolation, self.isolation
                )
        self.consumer.close()


class Instance:
    def __init__(self, bs: str, history: History, n: int) -> None:
        self.history, self.n, self.transactions, self.txn = history, n, 0, ""
        self.rewinds = 0  # a rewound consumer reads again: a new reader for the checker
        self.producer = Producer(
            {"bootstrap.servers": bs, "transactional.id": TID, "transaction.timeout.ms": 30_000}
        )
        self.producer.init_transactions(60)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": TID,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.tps = [TopicPartition(SOURCE, p) for p in (0, 1)]
        self.consumer.assign(self.tps)

    def transform(self) -> dict[int, int]:
        """Read a batch, begin a transaction, send one output per input."""
        messages = []
        while not messages:
            messages = [m for m in self.consumer.consume(BATCH, 1.0) if m.error() is None]
        self.transactions += 1
        self.txn = f"{self.n}.{self.transactions}"
        self.producer.begin_transaction()
        positions = {}
        for m in messages:
            p, value = m.partition(), m.value() + b"@" + self.txn.encode()
            reader = f"job {self.n}.{self.rewinds}"
            self.history.read(SOURCE, p, m.offset(), m.value(), reader, READ_COMMITTED)
            self.history.send(SINK, p, value, txn=self.txn, source=(SOURCE, p, m.value()))
            self.producer.produce(SINK, value, partition=p, on_delivery=self.delivered)
            positions[p] = m.offset() + 1
        return positions

    def delivered(self, err, m) -> None:
        if err is None:
            self.history.ack(SINK, m.partition(), m.value(), m.offset())

    def commit(self, positions: dict[int, int]) -> None:
        self.producer.send_offsets_to_transaction(
            [TopicPartition(SOURCE, p, o) for p, o in positions.items()],
            self.consumer.consumer_group_metadata(),
            60,
        )
        self.producer.commit_transaction(60)
        self.history.commit(self.txn)

    def step(self) -> None:
        """One transaction; aborted when it cannot commit (the coordinators move after
        the kill), and the consumer rewound to the last committed offsets."""
        try:
            self.commit(self.transform())
        except KafkaException as e:
            if not (e.args[0].txn_requires_abort() or e.args[0].retriable()):
                raise
            self.producer.abort_transaction(60)
            self.history.abort(self.txn)
            self.rewinds += 1
            for tp in self.consumer.committed(self.tps, 30):
                self.consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))

    def finished(self) -> bool:
        try:
            committed = self.consumer.committed(self.tps, 30)
        except KafkaException as e:  # the group coordinator moving: ask again
            if not e.args[0].retriable():
                raise
            return False
        return all(tp.offset >= INPUTS // 2 for tp in committed)


def test_a_crashed_job_restarted_after_a_coordinator_kill_is_exactly_once(tmp_path):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={
            "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
            "offsets.topic.num.partitions": "3",
            "group.initial.rebalance.delay.ms": "0",
            "min.insync.replicas": "2",
            "request.timeout.ms": "3000",
        },
    ) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic(t, 2, 3) for t in (SOURCE, SINK)]).values():
            f.result(30)
        history = History()
        feeder = Producer({"bootstrap.servers": bs, "acks": "all"})
        for i in range(INPUTS):
            history.send(SOURCE, i % 2, b"in-%d" % i)
            feeder.produce(
                SOURCE,
                b"in-%d" % i,
                partition=i % 2,
                on_delivery=lambda err, m: history.ack(
                    SOURCE, m.partition(), m.value(), m.offset()
                ),
            )
        assert feeder.flush(30) == 0
        watchers = [Watcher(bs, history, i) for i in ("read_uncommitted", READ_COMMITTED)]
        for w in watchers:
            w.start()
        try:
            first = Instance(bs, history, 1)
            while first.transactions < INPUTS // BATCH // 2:
                first.commit(first.transform())
            crashed = first.transform()  # sent, never committed: the crash
            assert first.producer.flush(30) == 0
            coordinator = current_leader(
                cluster, TRANSACTION_STATE_TOPIC, partition_for(TID, TXN_PARTITIONS)
            )
            cluster.kill(coordinator)
            second = Instance(cluster.bootstrap_servers, history, 2)
            while not second.finished():
                second.step()
            try:
                first.commit(crashed)  # the abandoned instance wakes up: fenced
                raise AssertionError("the zombie instance committed")
            except KafkaException as e:
                assert e.args[0].fatal(), e
                history.abort(first.txn)
            second.consumer.close()
            first.consumer.close()
        finally:
            for w in watchers:
                w.stop.set()
                w.join()
        live = cluster.bootstrap_servers
        for p in (0, 1):
            read_final_log(live, SINK, p, history)
            read_final_log(live, SINK, p, history, isolation=READ_COMMITTED)
            read_final_log(live, SOURCE, p, history)
    verdict = check(history)
    assert verdict.valid, verdict.summary()
    # The Jepsen-grade checker: nothing at all, not even an allowed poll-skip (each
    # job instance and each rewind is a reader of its own; a read_committed watcher
    # skips only aborted records), and every committed output polled by the end.
    assert_nothing_found(judged(history))
    crashed_outputs = [
        v for _, v in history.finals[(SINK, 1)] if v.endswith(b"@" + first.txn.encode())
    ]
    crashed_outputs += [
        v for _, v in history.finals[(SINK, 0)] if v.endswith(b"@" + first.txn.encode())
    ]
    assert crashed_outputs, "the crashed transaction's outputs are in the log (read_uncommitted)"
    committed = [v for p in (0, 1) for _, v in history.committed_finals[(SINK, p)]]
    assert sorted(v.split(b"@")[0] for v in committed) == sorted(
        b"in-%d" % i for i in range(INPUTS)
    )
    # The same history, the read_uncommitted watcher judged as read_committed: caught.
    misjudged = History()
    misjudged.ops = [replace(op, isolation=READ_COMMITTED) for op in history.ops]
    misjudged.finals, misjudged.committed_finals = history.finals, history.committed_finals
    wrong = check(misjudged)
    assert {a["value"] for a in wrong.aborted_read} == set(crashed_outputs)
    assert len(wrong.duplicated_committed) == len(crashed_outputs)
    wrong_new = judged(misjudged)
    assert not wrong_new.valid, wrong_new.summary()
    assert {c["value"] for c in wrong_new.anomalies["G1a"]} == set(crashed_outputs)
    assert {c["writer"][1] for c in wrong_new.anomalies["G1a"]} == {f"txn {first.txn}"}
