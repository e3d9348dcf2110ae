"""Exactly once through broker deaths: a confluent-kafka consume-transform-produce
job (read_committed consumer, transactional producer, send_offsets_to_transaction)
on the three-broker cluster, with brokers SIGKILLed mid-run:

    group coordinator        the leader of the group's __consumer_offsets partition
    transaction coordinator  the leader of the job's __transaction_state partition
    output leader            the leader of an output (sink) partition

each killed right after a commit was answered (its markers may still be on their
way), in the middle of a transaction (its records written, its offsets and EndTxn
not yet sent), or with the transaction's records in flight. A killed broker is
started again 5 s after its death (the job goes on meanwhile), and the cluster is
fully replicated again before the next fault, as the soak does.

The verdict, Jepsen-style: every input record's output is read exactly once by a
read_committed reader (nothing lost, nothing duplicated, no record of an aborted
transaction visible, every committed transaction whole); the group's committed
offsets are the ends of the input; the three replicas of every partition hold the
same bytes below the high watermark. The Jepsen-grade checker
(kafkalab.cluster.checker), given every attempt as a transactional op with its
outcome and the read_committed read, finds no anomaly at all. Each output names the transaction attempt that
wrote it (`out-7@3`), so an aborted attempt's records are told from its retry's."""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster, checker
from kafkalab.cluster.failover import current_leader
from kafkalab.cluster.history import History, check
from kafkalab.cluster.workload import record_replicas, wait_for_replicas_in_sync
from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC
from kafkalab.coordinator.group.coordinator_records import partition_for as group_partition
from kafkalab.coordinator.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from kafkalab.coordinator.transaction.transaction_log import partition_for as txn_partition

SOURCE, SINK, GROUP, TID = "eos-in", "eos-out", "eos-group", "eos-job"
PARTITIONS, RECORDS, BATCH = 2, 200, 20
OFFSETS_PARTITIONS, TXN_PARTITIONS = 6, 3
FIRST_FAULT, FAULT_EVERY = 2, 3  # fault i comes after FIRST_FAULT + i * FAULT_EVERY commits
OP_TIMEOUT_S = 30  # each transactional call; a retriable failure is retried twice
RESTART_AFTER_S = 5  # a killed broker comes back this long after its death
ABORT_EVERY = 4  # every 4th attempt fails its transform: written, offsets sent, then aborted

#: the partition whose leader each victim is; the output leader's is the output
#: partition the transaction at hand writes to
VICTIMS = {
    "group coordinator": (OFFSETS_TOPIC, group_partition(GROUP, OFFSETS_PARTITIONS)),
    "transaction coordinator": (TRANSACTION_STATE_TOPIC, txn_partition(TID, TXN_PARTITIONS)),
    "output leader": (SINK, None),
}
AFTER_COMMIT, MID_TRANSACTION, IN_FLIGHT = "after commit", "mid-transaction", "in flight"


@dataclass
class Run:
    """What the job did: each attempt's outcome and records, the faults it went through."""

    outcomes: dict[int, str] = field(default_factory=dict)  # attempt -> commit|abort|unknown
    sent: dict[int, int] = field(default_factory=dict)  # attempt -> records produced
    #: attempt -> (output partition, value) of each record it produced, in order
    values: dict[int, list[tuple[int, bytes]]] = field(default_factory=dict)
    committed: dict[int, int] = field(default_factory=dict)  # input partition -> next offset
    errors: list[str] = field(default_factory=list)
    killed: list[tuple[str, str, int]] = field(default_factory=list)  # (victim, when, broker)

    @property
    def commits(self) -> int:
        return sum(1 for o in self.outcomes.values() if o == "commit")

    def summary(self) -> str:
        counts = defaultdict(int)
        for o in self.outcomes.values():
            counts[o] += 1
        return f"attempts {dict(counts)}; killed {self.killed}; errors {self.errors}"


def create_topics(bs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    new = [NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"}) for t in (SOURCE, SINK)]
    for future in admin.create_topics(new).values():
        future.result(30)


def feed(bs: str) -> None:
    feeder = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in range(RECORDS):
        feeder.produce(SOURCE, b"%d" % i, partition=i % PARTITIONS)
    assert feeder.flush(60) == 0


def transactional_producer(bs: str) -> Producer:
    p = Producer(
        {"bootstrap.servers": bs, "transactional.id": TID, "transaction.timeout.ms": 20_000}
    )
    p.init_transactions(60)
    return p


def retrying(call, *args, attempts: int = 3, **kwargs):
    """librdkafka's rule: an operation that failed with a retriable error may be
    called again (a commit whose outcome is unknown included)."""
    for n in range(attempts):
        try:
            return call(*args, **kwargs)
        except KafkaException as e:
            if not e.args[0].retriable() or n == attempts - 1:
                raise


class ClientHung(Exception):
    """A librdkafka call did not return within its own timeout."""


def bounded(call, *args, timeout_s: float):
    """`call(*args)` in a thread, given up after `timeout_s`: librdkafka 2.16's
    send_offsets_to_transaction can wait forever, past its timeout, when the cached
    group coordinator's broker is decommissioned (dropped from Metadata once
    fenced): confluentinc/librdkafka#5511 and #5456, open. The job then treats its
    producer as crashed; the thread stays blocked in the abandoned client."""
    result: list = []

    def run() -> None:
        try:
            result.append((True, call(*args)))
        except BaseException as e:
            result.append((False, e))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not result:
        raise ClientHung(f"{getattr(call, '__name__', call)} still blocked after {timeout_s} s")
    ok, value = result[0]
    if not ok:
        raise value
    return value


def offsets(consumer: Consumer, tps: list[TopicPartition]) -> dict[int, int]:
    """The group's committed offsets; a read_committed consumer's OffsetFetch waits
    out pending transactional offsets (require_stable)."""
    return {tp.partition: tp.offset for tp in consumer.committed(tps, 60) if tp.offset >= 0}


def run_job(cluster: LocalCluster, schedule: list[tuple[str, str]]) -> Run:
    """Consume SOURCE, produce `out-<value>@<attempt>` to SINK (same partition) and
    commit the input offsets in the same transaction, until the input is done;
    apply the faults of `schedule` on the way."""
    bs = cluster.bootstrap_servers
    run = Run()
    consumer = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    tps = [TopicPartition(SOURCE, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    producer = transactional_producer(bs)
    restart: list = []  # the thread bringing a killed broker back, and its error if any

    def kill(victim: str, when: str, output_partition: int) -> None:
        topic, partition = VICTIMS[victim]
        target = current_leader(
            cluster, topic, output_partition if partition is None else partition
        )
        cluster.kill(target)  # SIGKILL: no flush, no controlled shutdown
        run.killed.append((victim, when, target))

        def back() -> None:  # a crashed broker's supervisor starts it again
            try:
                time.sleep(RESTART_AFTER_S)
                cluster.start_broker(target)
            except BaseException as e:
                restart.append(e)

        restart.append(threading.Thread(target=back, daemon=True))
        restart[0].start()

    def healed() -> None:
        """The killed broker back and every partition fully replicated again."""
        if restart:
            restart.pop(0).join()
            if restart:
                raise restart.pop()
        cluster.wait_fully_replicated(120)

    def recover(producer: Producer, error: KafkaError, attempt: int) -> Producer:
        """End the failed attempt: abort it, or, after a fatal error, fence this
        producer with a new instance (which ends its transaction either way)."""
        if not error.fatal():
            if not (error.txn_requires_abort() or error.retriable()):
                raise KafkaException(error)
            try:
                retrying(producer.abort_transaction, OP_TIMEOUT_S)
                run.outcomes[attempt] = "abort"
                return producer
            except KafkaException as e:
                if not e.args[0].fatal():
                    raise
                run.errors.append(f"attempt {attempt} abort: {e.args[0].str()}")
        run.outcomes[attempt] = "unknown"
        return transactional_producer(bs)

    def rewind() -> None:
        """Back to what the last committed transaction committed."""
        committed = offsets(consumer, tps)
        for p in range(PARTITIONS):
            consumer.seek(TopicPartition(SOURCE, p, committed.get(p, 0)))

    attempt = 0
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            messages = [m for m in consumer.consume(BATCH, 1.0) if m.error() is None]
            if not messages:
                done = offsets(consumer, tps)
                if all(done.get(p, -1) >= RECORDS // PARTITIONS for p in range(PARTITIONS)):
                    break
                continue
            attempt += 1
            positions = {m.partition(): m.offset() + 1 for m in messages}
            fault = None
            if not restart and len(run.killed) < len(schedule):
                if run.commits >= FIRST_FAULT + len(run.killed) * FAULT_EVERY:
                    fault = schedule[len(run.killed)]
            try:
                producer.begin_transaction()
                run.values[attempt] = []
                for m in messages:
                    value = b"out-%s@%d" % (m.value(), attempt)
                    run.values[attempt].append((m.partition(), value))
                    producer.produce(SINK, value, partition=m.partition())
                run.sent[attempt] = len(messages)
                if fault and fault[1] == MID_TRANSACTION:
                    assert producer.flush(60) == 0  # the records are in the log
                    kill(*fault, messages[0].partition())
                elif fault and fault[1] == IN_FLIGHT:
                    producer.poll(0)  # the records on their way, some maybe appended
                    kill(*fault, messages[0].partition())
                offsets_out = [TopicPartition(SOURCE, p, o) for p, o in positions.items()]
                metadata = consumer.consumer_group_metadata()
                retrying(
                    bounded,
                    producer.send_offsets_to_transaction,
                    offsets_out,
                    metadata,
                    OP_TIMEOUT_S,
                    timeout_s=OP_TIMEOUT_S + 15,
                )
                if attempt % ABORT_EVERY == 0:
                    assert producer.flush(60) == 0  # in the log, to be hidden by the marker
                    retrying(producer.abort_transaction, OP_TIMEOUT_S)
                    run.outcomes[attempt] = "abort"
                    rewind()
                    continue
                retrying(producer.commit_transaction, OP_TIMEOUT_S)
                run.outcomes[attempt] = "commit"
                run.committed.update(positions)
            except KafkaException as e:
                run.errors.append(f"attempt {attempt}: {e.args[0].str()}")
                producer = recover(producer, e.args[0], attempt)
                rewind()
                continue
            except ClientHung as e:  # a crashed producer: a new instance fences it
                run.errors.append(f"attempt {attempt}: {e} (librdkafka#5511)")
                run.outcomes[attempt] = "unknown"
                producer = transactional_producer(bs)
                rewind()
                continue
            if fault and fault[1] == AFTER_COMMIT:
                # Once OffsetFetch answers, the commit's markers are in the log: what
                # a new coordinator knows comes from loading it.
                assert offsets(consumer, tps) == run.committed
                kill(*fault, messages[0].partition())
                assert offsets(consumer, tps) == run.committed, "after the kill"
            elif restart and not fault:
                healed()  # before the next fault, as the soak does
        else:
            raise AssertionError(f"the job did not finish: {run.summary()}")
        final = offsets(consumer, tps)
        assert final == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}, run.summary()
    finally:
        consumer.close()
    healed()
    return run


def wait_until_stable(bs: str, timeout_s: float = 60) -> None:
    """Until no transaction is open on SINK: the LSO (latest offset under
    read_committed) is the high watermark on every partition. commit_transaction
    is answered at PrepareCommit; the markers follow."""
    consumers = {
        level: Consumer({"bootstrap.servers": bs, "group.id": "eos-lso", "isolation.level": level})
        for level in ("read_committed", "read_uncommitted")
    }
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            ends = {
                level: [
                    c.get_watermark_offsets(TopicPartition(SINK, p), 10)[1]
                    for p in range(PARTITIONS)
                ]
                for level, c in consumers.items()
            }
            if ends["read_committed"] == ends["read_uncommitted"]:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"a transaction stays open on {SINK}: {ends}")
            time.sleep(0.2)
    finally:
        for c in consumers.values():
            c.close()


def read_committed(bs: str, timeout_s: float = 60) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of everything a read_committed consumer reads of
    SINK from the start to the end (the LSO)."""
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"eos-checker-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(SINK, p, 0) for p in range(PARTITIONS)])
    out, at_end = [], set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(at_end) < PARTITIONS:
            if time.monotonic() > deadline:
                raise AssertionError(f"{SINK} not read to its end: {len(out)} records")
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is None:
                out.append((m.partition(), m.offset(), m.value()))
            elif m.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(m.partition())
    finally:
        c.close()
    return out


def exactly_once_anomalies(run: Run, read: list[tuple[int, int, bytes]]) -> dict[str, list]:
    """Jepsen's transactional anomalies in what a read_committed reader read."""
    outputs: dict[int, list] = defaultdict(list)  # input record -> where its outputs are
    per_attempt: dict[int, int] = defaultdict(int)
    aborted_read = []
    for partition, offset, value in read:
        source, attempt = (int(x) for x in value.removeprefix(b"out-").split(b"@"))
        outputs[source].append((partition, offset, attempt))
        per_attempt[attempt] += 1
        if run.outcomes.get(attempt) not in ("commit", "unknown"):
            aborted_read.append((partition, offset, value, run.outcomes.get(attempt)))
    # all of a transaction or nothing: all of a committed one; all or nothing of one
    # whose outcome the job does not know
    torn = [
        (attempt, outcome, per_attempt[attempt], run.sent.get(attempt, 0))
        for attempt, outcome in run.outcomes.items()
        if (outcome == "commit" and per_attempt[attempt] != run.sent.get(attempt, 0))
        or (outcome == "unknown" and per_attempt[attempt] not in (0, run.sent.get(attempt, 0)))
    ]
    return {
        "lost": [i for i in range(RECORDS) if i not in outputs],
        "duplicated": [(i, where) for i, where in sorted(outputs.items()) if len(where) > 1],
        "aborted read": aborted_read,
        "torn transaction": torn,
    }


def checked_history(run: Run, read: list[tuple[int, int, bytes]]) -> checker.History:
    """The run as ops for the Jepsen-grade checker: each attempt one transactional
    op of process `job` (ok if it committed, fail if it aborted, info if the job
    does not know), its sends' offsets unknown (no delivery reports); the
    read_committed read of SINK one ok poll per partition."""
    history = checker.History()
    types = {"commit": checker.OK, "abort": checker.FAIL}
    for attempt, produced in sorted(run.values.items()):
        sends = [checker.Send((SINK, p), value) for p, value in produced]
        kind = types.get(run.outcomes.get(attempt), checker.INFO)
        history.add(checker.Op("job", kind, sends, transactional=True))
    for p in range(PARTITIONS):
        pairs = [(offset, value) for partition, offset, value in read if partition == p]
        history.add(
            checker.Op(
                "final read (read_committed)", checker.OK, [checker.Poll({(SINK, p): pairs})]
            )
        )
    return history


def diverged_replicas(cluster: LocalCluster) -> list[dict]:
    """Every partition of the cluster (internal topics too), its replicas in sync
    and compared batch by batch below the high watermark (the history checker's
    `diverged`)."""
    history = History()
    df = cluster.describe()
    partitions = sorted(set(zip(df.topic, df.partition, strict=True)))
    for topic, partition in partitions:
        wait_for_replicas_in_sync(cluster, topic, int(partition))
        record_replicas(cluster, topic, int(partition), history)
    assert len(history.replicas) == len(partitions)
    assert all(len(by_broker) == 3 for by_broker in history.replicas.values())
    return check(history).diverged


SCHEDULES = {
    "group coordinator": [("group coordinator", AFTER_COMMIT)],
    "transaction coordinator": [("transaction coordinator", MID_TRANSACTION)],
    "output leader": [("output leader", MID_TRANSACTION)],
    "all three": [
        ("transaction coordinator", AFTER_COMMIT),
        ("output leader", IN_FLIGHT),
        ("group coordinator", MID_TRANSACTION),
    ],
}


@pytest.mark.parametrize("schedule", list(SCHEDULES.values()), ids=list(SCHEDULES))
def test_consume_transform_produce_runs_exactly_once_through_kills(tmp_path, schedule):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
            "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
            "replica.lag.time.max.ms": "2000",
            "request.timeout.ms": "5000",  # the marker channel gives up on a dead leader sooner
        },
    ) as cluster:
        bs = cluster.bootstrap_servers
        create_topics(bs)
        feed(bs)
        run = run_job(cluster, schedule)
        print(run.summary())
        assert [(v, w) for v, w, _ in run.killed] == schedule
        bs = cluster.bootstrap_servers
        wait_until_stable(bs)
        read = read_committed(bs)
        anomalies = exactly_once_anomalies(run, read)
        assert not any(anomalies.values()), "\n".join(
            [run.summary()] + [f"{len(v)} {k}: {v[:5]}" for k, v in anomalies.items() if v]
        )
        # The Jepsen-grade checker: no aborted read (G1a), no committed output
        # unread (unseen, lost-write), no duplicate or inconsistent offset; nothing.
        verdict = checker.check(checked_history(run, read))
        assert not verdict.anomalies and verdict.valid, verdict.summary()
        assert not any(verdict.unseen_series[-1][1].values())
        assert diverged_replicas(cluster) == []
