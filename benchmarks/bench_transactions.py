"""Transactions benchmark on a local three-broker cluster (RF=3,
min.insync.replicas=2), with librdkafka (confluent-kafka).

1. Produce. N records of 100 bytes to one partition, acks=all: transactional
   (1,000 records per transaction, each committed) against idempotent, runs
   alternating on fresh topics, median of 3; records/s, MB/s, and the
   transactional runs' commit_transaction() latency.
2. Consume. One topic written transactionally with every 10th transaction
   aborted, read from offset 0 to its end by a read_committed and a
   read_uncommitted consumer (alternating, median of 3): records delivered per
   second, and log offsets covered per second (the same log either way).
3. LSO lag. While a producer runs transactions of 1,000 records back to back,
   ListOffsets latest is sent to the partition leader with isolation_level 0
   (the high watermark), 1 (the last stable offset), 0 again, on one connection;
   a sample counts only when both HW answers agree (the HW did not move in
   between). HW - LSO is how many offsets a read_committed consumer is behind a
   read_uncommitted one at that instant: the open transaction's records.

    make bench                                         # or:
    .venv/bin/python benchmarks/bench_transactions.py  # 200,000 records, 10 s of samples
    .venv/bin/python benchmarks/bench_transactions.py --records 1000000 --lag-seconds 30
    .venv/bin/python benchmarks/bench_transactions.py --quick   # a minute's smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.client.admin import Admin
from kafkalab.cluster import LocalCluster
from kafkalab.cluster.soak import percentile
from kafkalab.protocol.api_keys import ApiKeys

VALUE = b"x" * 100
PER_TXN = 1_000
ABORT_EVERY = 10
RUNS = 3
BROKER_PROPS = {
    "min.insync.replicas": "2",
    # Fewer __transaction_state / __consumer_offsets partitions than Kafka's 50
    # so the cluster starts quickly; one transactional id uses one of them.
    "transaction.state.log.num.partitions": "4",
    "offsets.topic.num.partitions": "4",
}
PRODUCER = {
    "acks": "all",
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 2_000_000,
    "compression.type": "none",
}


def create(bs: str, topic: str) -> None:
    """One partition, RF=3, every replica in the ISR."""
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, 1, 3)]).values():
        f.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        p = admin.list_topics(topic, timeout=10).topics[topic].partitions.get(0)
        if p is not None and p.leader >= 0 and len(p.isrs) == 3:
            return
        time.sleep(0.2)
    raise TimeoutError(f"{topic}: ISR never reached 3")


def _produce(p: Producer, topic: str, n: int) -> None:
    for _ in range(n):
        while True:
            try:
                p.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                p.poll(0.01)


def produce_idempotent(bs: str, topic: str, n: int) -> float:
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, **PRODUCER})
    start = time.perf_counter()
    _produce(p, topic, n)
    if p.flush(300):
        raise RuntimeError(f"{topic}: records not acknowledged in 300 s")
    return time.perf_counter() - start


def produce_transactional(
    p: Producer, topic: str, n: int, abort_every: int = 0
) -> tuple[float, list[tuple[float, float, float]]]:
    """n records in transactions of PER_TXN; every `abort_every`-th aborted.
    Returns the wall time and, per committed transaction, the seconds spent in
    produce() calls, in flush() (AddPartitionsToTxn, then Produce acks=all), and
    in commit_transaction() after the flush (EndTxn, answered once PrepareCommit
    is replicated in __transaction_state)."""
    phases = []
    start = time.perf_counter()
    for i in range(0, n, PER_TXN):
        t0 = time.perf_counter()
        p.begin_transaction()
        _produce(p, topic, min(PER_TXN, n - i))
        t1 = time.perf_counter()
        if p.flush(60):  # commit_transaction() would flush first anyway
            raise RuntimeError(f"{topic}: records not acknowledged in 60 s")
        t2 = time.perf_counter()
        if abort_every and (i // PER_TXN) % abort_every == abort_every - 1:
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
            phases.append((t1 - t0, t2 - t1, time.perf_counter() - t2))
    return time.perf_counter() - start, phases


def txn_producer(bs: str, tid: str) -> Producer:
    p = Producer(
        {"bootstrap.servers": bs, "transactional.id": tid, "transaction.timeout.ms": 60_000}
        | PRODUCER
    )
    p.init_transactions(60)
    return p


def consume(bs: str, topic: str, isolation: str) -> tuple[float, int, int]:
    """Read the partition from 0 to its end (the LSO under read_committed):
    (seconds, records delivered, end offset)."""
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "bench-txn",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 50_000_000,
            "max.partition.fetch.bytes": 10_000_000,
        }
    )
    try:
        start = time.perf_counter()
        c.assign([TopicPartition(topic, 0, 0)])
        seen = 0
        while True:
            for m in c.consume(10_000, 1.0):
                err = m.error()
                if err is None:
                    seen += 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    return time.perf_counter() - start, seen, m.offset()
                else:
                    raise RuntimeError(f"{topic}: {err}")
    finally:
        c.close()


def list_offsets(conn, topic: str, isolation_level: int) -> int:
    r = conn.request(
        ApiKeys.LIST_OFFSETS,
        {
            "replica_id": -1,
            "isolation_level": isolation_level,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
    )
    p = r["topics"][0]["partitions"][0]
    if p["error_code"]:
        raise RuntimeError(f"ListOffsets {topic}-0: error {p['error_code']}")
    return p["offset"]


def lso_lag(bs: str, topic: str, seconds: float) -> dict:
    """HW - LSO sampled every 10 ms under a back-to-back transactional load."""
    stop = threading.Event()
    done = {"txns": 0, "records": 0}
    errors: list[BaseException] = []

    def load() -> None:
        try:
            p = txn_producer(bs, "bench-lag")
            while not stop.is_set():
                produce_transactional(p, topic, PER_TXN)
                done["txns"] += 1
                done["records"] += PER_TXN
            p.flush(30)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    lags, skipped = [], 0
    with Admin(bs) as admin:
        conn = admin.client.connection(admin.client.leader_for(topic, 0))
        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        while done["txns"] < 2 and not errors:  # the load is running
            time.sleep(0.05)
        start, txns0 = time.perf_counter(), done["txns"]
        while time.perf_counter() - start < seconds and not errors:
            hw1 = list_offsets(conn, topic, 0)
            lso = list_offsets(conn, topic, 1)
            hw2 = list_offsets(conn, topic, 0)
            if hw1 == hw2:
                if lso > hw1:
                    raise AssertionError(f"LSO {lso} above the HW {hw1}")
                lags.append(hw1 - lso)
            else:
                skipped += 1
            time.sleep(0.01)
        elapsed, txns = time.perf_counter() - start, done["txns"] - txns0
        stop.set()
        loader.join(120)
    if errors:
        raise errors[0]
    if not lags or not txns:
        raise RuntimeError(f"{len(lags)} consistent HW/LSO samples, {txns} transactions: too few")
    return {
        "samples": len(lags),
        "skipped_hw_moved": skipped,
        "p50": percentile(lags, 50),
        "p99": percentile(lags, 99),
        "max": max(lags),
        "zero_fraction": sum(1 for x in lags if x == 0) / len(lags),
        # The share of time the LSO trails the HW, spread over the transactions run:
        # about how long each transaction's records wait visible to read_uncommitted
        # consumers only.
        "held_ms_per_txn": sum(1 for x in lags if x > 0) / len(lags) / (txns / elapsed) * 1000,
        "txns_per_s": txns / elapsed,
        "records_per_s": txns * PER_TXN / elapsed,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000, help="records per produce run")
    ap.add_argument("--lag-seconds", type=float, default=10.0, help="how long to sample HW - LSO")
    ap.add_argument("--runs", type=int, default=RUNS)
    ap.add_argument("--quick", action="store_true", help="20,000 records, 1 run, 2 s of samples")
    args = ap.parse_args(argv)
    if args.quick:
        args.records, args.runs, args.lag_seconds = 20_000, 1, 2.0
    n, runs = args.records, args.runs
    load_before = os.getloadavg()
    result: dict = {"records": n, "runs": runs, "per_txn": PER_TXN}
    with LocalCluster(brokers=3, broker_props=BROKER_PROPS) as cluster:
        bs = cluster.bootstrap_servers
        txn = None
        idem_s, txn_s, commits = [], [], []
        for run in range(runs):
            create(bs, f"idem-{run}")
            idem_s.append(produce_idempotent(bs, f"idem-{run}", n))
            create(bs, f"txn-{run}")
            txn = txn or txn_producer(bs, "bench-txn")
            wall, c = produce_transactional(txn, f"txn-{run}", n)
            txn_s.append(wall)
            commits += c
            print(
                f"produce run {run}: idempotent {n / idem_s[-1]:,.0f} records/s, "
                f"transactional {n / wall:,.0f} records/s",
                file=sys.stderr,
                flush=True,
            )
        result["produce"] = {
            name: {
                "records_s": n / statistics.median(s),
                "mb_s": n * 100 / statistics.median(s) / 1e6,
            }
            for name, s in (("idempotent", idem_s), ("transactional", txn_s))
        }
        result["txn_phase_ms"] = {
            phase: {
                "p50": percentile([c[k] for c in commits], 50) * 1000,
                "p99": percentile([c[k] for c in commits], 99) * 1000,
            }
            for k, phase in enumerate(("produce", "flush", "commit"))
        }

        create(bs, "mixed")
        produce_transactional(txn, "mixed", n, abort_every=ABORT_EVERY)
        txn.flush(30)
        reads: dict[str, list] = {"read_committed": [], "read_uncommitted": []}
        for run in range(runs):
            for isolation in reads:
                reads[isolation].append(consume(bs, "mixed", isolation))
                secs, seen, end = reads[isolation][-1]
                print(
                    f"consume run {run} {isolation}: {seen:,} records to offset {end:,} "
                    f"in {secs:.2f} s",
                    file=sys.stderr,
                    flush=True,
                )
        result["consume"] = {}
        for isolation, rs in reads.items():
            secs = statistics.median(r[0] for r in rs)
            result["consume"][isolation] = {
                "records": rs[0][1],
                "end_offset": rs[0][2],
                "records_s": rs[0][1] / secs,
                "offsets_s": rs[0][2] / secs,
            }

        txn = None  # closes the producer while the brokers are still up
        create(bs, "lag")
        result["lso_lag"] = lso_lag(bs, "lag", args.lag_seconds)
    result["loadavg_before"] = load_before
    result["loadavg_after"] = os.getloadavg()
    print(report(result))
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "transactions.json").write_text(json.dumps(result, indent=2))
    return 0


def report(r: dict) -> str:
    p, c, lag = r["produce"], r["consume"], r["lso_lag"]
    la = " / ".join(f"{x:.2f}" for x in r["loadavg_before"])
    lb = " / ".join(f"{x:.2f}" for x in r["loadavg_after"])
    lines = [
        f"Transactions, {os.cpu_count()} cores, load average {la} before, {lb} after;",
        f"{r['records']:,} records of 100 B per run, median of {r['runs']}:",
        "",
        "| measurement | records/s | MB/s |",
        "|---|---:|---:|",
        f"| idempotent produce | {p['idempotent']['records_s']:,.0f} | "
        f"{p['idempotent']['mb_s']:.1f} |",
        f"| transactional produce ({PER_TXN:,} records per transaction) | "
        f"{p['transactional']['records_s']:,.0f} | {p['transactional']['mb_s']:.1f} |",
        "",
        "per transaction, p50 / p99 ms: "
        + ", ".join(
            f"{phase} {x['p50']:.1f} / {x['p99']:.1f}" for phase, x in r["txn_phase_ms"].items()
        )
        + f"; transactional / idempotent "
        f"{p['transactional']['records_s'] / p['idempotent']['records_s']:.2f}",
        "",
        "| consumer (1 in 10 transactions aborted) | records | records/s | offsets/s |",
        "|---|---:|---:|---:|",
    ]
    for isolation, x in c.items():
        lines.append(
            f"| {isolation} | {x['records']:,} | {x['records_s']:,.0f} | {x['offsets_s']:,.0f} |"
        )
    lines += [
        "",
        f"HW - LSO under {lag['txns_per_s']:.1f} transactions/s ({lag['records_per_s']:,.0f} "
        f"records/s): p50 {lag['p50']:,}, p99 {lag['p99']:,}, max {lag['max']:,} offsets; "
        f"0 in {lag['zero_fraction']:.0%} of {lag['samples']:,} samples "
        f"({lag['skipped_hw_moved']:,} skipped: the HW moved between the two HW requests); "
        f"about {lag['held_ms_per_txn']:.0f} ms per transaction with HW > LSO",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
