"""KAFKA-17754 on a running broker or cluster: a delayed EndTxn ends the next transaction.

Jepsen (Bufstream 0.1.0, 2024) found that Kafka's transaction protocol assumes
requests arrive in order, though a client sends them over several connections
and retries them: an EndTxn held up in the network, retried, and delivered
after the producer's next transaction began, ends *that* transaction. Under
transaction version 1 (one producer epoch for all the transactions of a
producer) the coordinator cannot tell: the request names the producer id and
epoch, and they are the same. Under version 2 (KIP-890 part 2) the coordinator
bumps the epoch at every EndTxn, so the late request names an epoch that is
over.

`delayed_end_txn` plays it with requests built by hand (every request visible,
the order under our control: the held request is held by the broker, kafkalab's
held-request fault in kafkalab.server.link_faults), on a topic with two
partitions p0 and p1:

    T1  add p0, write a1 to p0, EndTxn(abort): held by the coordinator's broker
        the client times out and retries EndTxn(abort) on another connection: T1 aborted
    T2  add p0, write b1 to p0
        the held EndTxn(abort) of T1 is released: under version 1 it aborts T2
        add p1, write b2 to p1, EndTxn(commit): the client is told T2 committed

and reads both partitions back with read_committed. The history checker
(kafkalab.cluster.history) then judges what the client was told against what a
read_committed reader sees: under version 1, b1 of the committed T2 is lost
(and T2 torn: b2 visible, b1 not); under version 2 nothing is.

Version 2's requests (EndTxn v5 returning the bumped epoch, Produce adding the
partition itself) are used when the broker's ApiVersions advertises the
finalized feature `transaction.version` at level 2 or more.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafkalab.client.network_client import BrokerConnection, NetworkClient
from kafkalab.cluster.history import READ_COMMITTED, History, Verdict, check
from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.server.link_faults import hold_requests, release_requests

#: the feature ApiVersions finalizes for transactions (Kafka's TransactionVersion)
TRANSACTION_VERSION_FEATURE = "transaction.version"
RETRIABLE = {
    Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.COORDINATOR_LOAD_IN_PROGRESS,
    Errors.NOT_COORDINATOR,
    Errors.CONCURRENT_TRANSACTIONS,
}
#: a Produce right after an EndTxn may find the partition still writing the markers
PRODUCE_RETRIABLE = RETRIABLE | {Errors.NOT_ENOUGH_REPLICAS}


def served_transaction_version(bootstrap_servers: str) -> int:
    """The finalized `transaction.version` the broker advertises in ApiVersions
    (v3's finalized features), 0 when it advertises none."""
    host, port = bootstrap_servers.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(host, int(port))
    try:
        version = min(conn.version(ApiKeys.API_VERSIONS), 3)
        body = conn._call(ApiKeys.API_VERSIONS, version, {})[1]
    finally:
        conn.close()
    try:  # the features are tagged fields of ApiVersions v3+ (KIP-584)
        from kafkalab.protocol.messages.api_versions import read_features
    except ImportError:  # a broker package from before it advertised features
        return 0
    _, _, finalized = read_features(body)
    return int(finalized.get(TRANSACTION_VERSION_FEATURE, 0))


@dataclass
class DelayedEndTxnRun:
    """What happened: every request and its answer, the epoch of each transaction,
    the history and the checker's verdict."""

    version: int  # the transaction version the client spoke
    requests: list[dict] = field(default_factory=list)
    epochs: dict[str, int] = field(default_factory=dict)  # transaction -> its epoch
    history: History = field(default_factory=History)
    verdict: Verdict | None = None
    held_answer: str = ""  # what the coordinator answered the held EndTxn

    def table(self):
        """The requests as a DataFrame (the labs show it)."""
        import pandas as pd

        return pd.DataFrame(self.requests)


class HandBuiltProducer:
    """A transactional producer whose every request is built here and recorded in
    `run.requests` (a table the labs show): `begin(name)`, `add_partition(p)`
    (nothing under version 2: Produce adds it), `write(p, value)` (the error's
    name; NONE when written; recorded in the run's history), `produce(p, value,
    epoch=, sequence=)` (the raw answer; a late or zombie write with an old epoch
    or sequence), `end(commit)` (the EndTxn answer, once the markers are written),
    `describe()`. The broker tests of transaction verification and version 2 drive
    it too."""

    def __init__(
        self,
        client: NetworkClient,
        topic: str,
        version: int = 1,
        run: DelayedEndTxnRun | None = None,
    ):
        self.client, self.topic, self.version = client, topic, version
        self.run = run if run is not None else DelayedEndTxnRun(version)
        self.tid = f"kafka-17754-{uuid.uuid4().hex[:8]}"
        self.txn, self.epoch = "", -1
        self.sequences: dict[int, int] = {}
        self.added: set[int] = set()
        found = self._until_done(
            lambda: self.client.any_connection()._call(
                ApiKeys.FIND_COORDINATOR, 1, {"key": self.tid, "key_type": 1}
            )[1]
        )
        if found["error_code"] != 0:
            raise AssertionError(f"FindCoordinator: {Errors(found['error_code']).name}")
        self.coordinator = found["node_id"]
        init_version = 4 if version >= 2 else 1
        init = self._until_done(
            lambda: self.coordinator_conn()._call(
                ApiKeys.INIT_PRODUCER_ID,
                init_version,
                {"transactional_id": self.tid, "transaction_timeout_ms": 60_000},
            )[1]
        )
        if init["error_code"] != 0:
            raise AssertionError(f"InitProducerId: {Errors(init['error_code']).name}")
        self.pid, self.epoch = init["producer_id"], init["producer_epoch"]
        self._note("InitProducerId", init_version, "", init)

    def coordinator_conn(self) -> BrokerConnection:
        return self.client.connection(self.coordinator)

    @staticmethod
    def _until_done(call, retriable=RETRIABLE):
        deadline = time.monotonic() + 60
        while True:
            answer = call()
            if Errors(answer["error_code"]) not in retriable or time.monotonic() > deadline:
                return answer
            time.sleep(0.1)

    def _note(self, request: str, version: int, what: str, answer: dict, conn: str = "") -> None:
        self.run.requests.append(
            {
                "transaction": self.txn,
                "request": f"{request} v{version}",
                "what": what,
                "epoch sent": self.epoch if request != "InitProducerId" else -1,
                "connection": conn or "to the coordinator",
                "answer": Errors(answer.get("error_code", 0)).name,
                "epoch back": answer.get("producer_epoch", ""),
            }
        )

    def begin(self, txn: str) -> None:
        self.txn, self.added = txn, set()
        self.run.epochs[txn] = self.epoch

    def add_partition(self, partition: int) -> None:
        if self.version >= 2:
            return  # version 2: the partition leader adds it on the first Produce
        body = {
            "v3_and_below_transactional_id": self.tid,
            "v3_and_below_producer_id": self.pid,
            "v3_and_below_producer_epoch": self.epoch,
            "v3_and_below_topics": [{"name": self.topic, "partitions": [partition]}],
        }

        def call():
            answer = self.coordinator_conn()._call(ApiKeys.ADD_PARTITIONS_TO_TXN, 3, body)[1]
            (r,) = answer["results_by_topic_v3_and_below"][0]["results_by_partition"]
            return {"error_code": r["partition_error_code"]}

        answer = self._until_done(call)
        self._note("AddPartitionsToTxn", 3, f"p{partition}", answer)
        if answer["error_code"] != 0:
            raise AssertionError(f"AddPartitionsToTxn p{partition}: {answer}")
        self.added.add(partition)

    def produce(
        self, partition: int, value: bytes, epoch: int | None = None, sequence: int | None = None
    ) -> dict:
        """One Produce of `value` to `partition` in the open transaction, to the leader,
        retried while the coordinator or the last markers are busy; the partition's
        answer. `epoch` and `sequence` override the producer's own: a late or zombie
        write (its success does not move the producer's sequence)."""
        batch = build_batch(
            [SimpleRecord(value)],
            producer_id=self.pid,
            producer_epoch=self.epoch if epoch is None else epoch,
            base_sequence=self.sequences.get(partition, 0) if sequence is None else sequence,
            is_transactional=True,
        )
        body = {
            "transactional_id": self.tid,
            "acks": -1,
            "timeout_ms": 10_000,
            "topics": [
                {
                    "name": self.topic,
                    "partitions": [{"partition_index": partition, "records": batch}],
                }
            ],
        }
        # version 2 adds the partition to the transaction with the Produce (v12+)
        version = 12 if self.version >= 2 else 8
        leader = self.client.connection(self.client.leader_for(self.topic, partition))
        answer = self._until_done(
            lambda: leader._call(ApiKeys.PRODUCE, version, body)[1]["responses"][0]["partitions"][
                0
            ],
            PRODUCE_RETRIABLE,
        )
        self._note("Produce", version, f"{value.decode()} to p{partition}", answer, "to the leader")
        if answer["error_code"] == 0 and sequence is None and epoch is None:
            self.sequences[partition] = self.sequences.get(partition, 0) + 1
        return answer

    def write(self, partition: int, value: bytes) -> str:
        """produce(), recorded in the run's history; the error's name (NONE when written)."""
        self.run.history.send(self.topic, partition, value, txn=self.txn)
        answer = self.produce(partition, value)
        error = Errors(answer["error_code"]).name
        if answer["error_code"] != 0:
            self.run.history.fail(self.topic, partition, value, error)
            return error
        self.run.history.ack(self.topic, partition, value, answer["base_offset"])
        return error

    def end_txn_body(self, commit: bool) -> dict:
        return {
            "transactional_id": self.tid,
            "producer_id": self.pid,
            "producer_epoch": self.epoch,
            "committed": commit,
        }

    @property
    def end_txn_version(self) -> int:
        return 5 if self.version >= 2 else 1

    def end(self, commit: bool, body: dict | None = None) -> dict:
        """EndTxn (retried while the coordinator is busy), then wait for the markers."""
        body = body or self.end_txn_body(commit)
        answer = self._until_done(
            lambda: self.coordinator_conn()._call(ApiKeys.END_TXN, self.end_txn_version, body)[1]
        )
        self._note("EndTxn", self.end_txn_version, "commit" if commit else "abort", answer)
        if answer["error_code"] == 0 and self.version >= 2:
            # version 2: the coordinator bumped the epoch (or, at the last epoch, gave a
            # new producer id) and says which; sequences restart
            self.pid, self.epoch = answer["producer_id"], answer["producer_epoch"]
            self.sequences = {}
        self.wait_complete()
        return answer

    def describe(self) -> dict:
        """DescribeTransactions: the coordinator's view (state, partitions, epoch)."""
        (d,) = self.coordinator_conn()._call(
            ApiKeys.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [self.tid]}
        )[1]["transaction_states"]
        return d

    def state(self) -> str:
        return self.describe()["transaction_state"]

    def wait_complete(self) -> None:
        deadline = time.monotonic() + 60
        while self.state().startswith("Prepare"):
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.tid}: markers not written in 60 s")
            time.sleep(0.05)


def delayed_end_txn(
    bootstrap_servers: str,
    log_dir_of: Callable[[int], Path],
    topic: str,
    version: int = 1,
) -> DelayedEndTxnRun:
    """Play KAFKA-17754 (module docstring) on `topic` (two partitions, 0 and 1);
    `log_dir_of(broker id)` is where that broker reads its link faults
    (LocalCluster.broker_dir; a BrokerThread's log dir). `version=2` needs a broker
    that serves transaction.version 2."""
    run = DelayedEndTxnRun(version)
    client = NetworkClient(bootstrap_servers)
    try:
        producer = HandBuiltProducer(client, topic, version, run)
        coordinator_dir = log_dir_of(producer.coordinator)
        addr = client.nodes[producer.coordinator]

        producer.begin("T1")
        producer.add_partition(0)
        _written(producer.write(0, b"a1"))
        # The first attempt of EndTxn(abort): the coordinator's broker holds it.
        hold_requests(coordinator_dir, ApiKeys.END_TXN, count=1, ms=120_000)
        held_body = producer.end_txn_body(commit=False)
        held: dict = {}

        def first_attempt() -> None:
            conn = BrokerConnection(addr.host, addr.port, timeout_s=180)
            try:
                held.update(conn._call(ApiKeys.END_TXN, producer.end_txn_version, held_body)[1])
            finally:
                conn.close()

        run.requests.append(
            {
                "transaction": "T1",
                "request": f"EndTxn v{producer.end_txn_version}",
                "what": "abort (first attempt)",
                "epoch sent": held_body["producer_epoch"],
                "connection": "a new one",
                "answer": "(held in the network)",
                "epoch back": "",
            }
        )
        thread = threading.Thread(target=first_attempt, name="held-end-txn", daemon=True)
        thread.start()
        thread.join(0.5)
        if not thread.is_alive():
            raise AssertionError(f"the first EndTxn was not held: answered {held}")
        if producer.state() != "Ongoing":
            raise AssertionError("the held EndTxn reached the coordinator")
        # The client gave up on it and retries on another connection: T1 aborts.
        producer.txn = "T1 (retry)"
        producer.end(commit=False)
        run.history.abort("T1")

        producer.begin("T2")
        producer.add_partition(0)
        _written(producer.write(0, b"b1"))
        # The network delivers the first attempt at last.
        release_requests(coordinator_dir)
        thread.join(60)
        run.held_answer = Errors(held.get("error_code", -1)).name if held else "no answer"
        run.requests.append(
            {
                "transaction": "T2",
                "request": f"EndTxn v{producer.end_txn_version}",
                "what": "abort (T1's first attempt, delivered now)",
                "epoch sent": held_body["producer_epoch"],
                "connection": "the held one",
                "answer": run.held_answer,
                "epoch back": held.get("producer_epoch", ""),
            }
        )
        producer.wait_complete()
        producer.add_partition(1)
        _written(producer.write(1, b"b2"))
        answer = producer.end(commit=True)
        if answer["error_code"] == 0:
            run.history.commit("T2")
        else:
            run.history.txn_fail("T2", Errors(answer["error_code"]).name)
        _read_back(run.history, bootstrap_servers, topic)
    finally:
        client.close()
    run.verdict = check(run.history)
    return run


def watermarks(bootstrap_servers: str, topic: str, partition: int) -> dict[str, int]:
    """The partition's high watermark and last stable offset, as ListOffsets
    answers a read_uncommitted and a read_committed consumer."""
    from kafkalab.client.consumer import KafkaConsumer

    out = {}
    for isolation, name in (("read_uncommitted", "HW"), ("read_committed", "LSO")):
        with KafkaConsumer(
            {"bootstrap.servers": bootstrap_servers, "isolation.level": isolation}
        ) as consumer:
            (out[name],) = consumer.end_offsets([(topic, partition)]).values()
    return out


def _written(error: str) -> None:
    if error != "NONE":
        raise AssertionError(f"a write of the scenario was refused: {error}")


def _read_back(history: History, bootstrap_servers: str, topic: str) -> None:
    """Both partitions as a read_committed consumer reads them, to the LSO."""
    from kafkalab.client.consumer import KafkaConsumer

    partitions = [(topic, 0), (topic, 1)]
    records: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
    with KafkaConsumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    ) as consumer:
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in ends):
            if time.monotonic() > deadline:
                raise AssertionError("read_committed did not reach the LSO in 60 s")
            for r in consumer.poll(500):
                records[r.partition].append((r.offset, r.value))
                history.read(topic, r.partition, r.offset, r.value, "reader", READ_COMMITTED)
    for p, got in records.items():
        history.final_log(topic, p, got, isolation=READ_COMMITTED)
