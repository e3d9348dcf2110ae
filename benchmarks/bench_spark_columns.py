"""The Python per-record cost inside kafkalab.spark's source and sink, without Spark.

Source: N records of 100 B (keys of 1,000 customers) are consumed from one
partition into librdkafka Messages (`consume()`, the executors' consumer
settings), then turned into Arrow record batches of the source's schema by the
column builder the executors use; the builder's CPU time per record is measured
on the same messages, apart from the fetch. Sink: the per-record cost of
`produce_batch`, the sink's work on one Arrow batch (columns to Python, one
`produce()` a row), on batches of 10,000 distinct 100 B values as Spark's Arrow
writer hands them over, into a producer whose broker does not answer (nothing
is sent; the queue only fills and is purged after each pass); beside it
`produce()` alone, one bytes object produced N times from a plain loop as
bench_spark.py's "librdkafka alone" does. Their difference is the sink's own
Python per record. Best of three passes each.

The sink's own produce (kafkalab.spark.sender, the default writer): the
encoder alone (kafkalab.spark.batch_encoder: the same Arrow batches into v2
RecordBatches, partitioned, sequenced and CRC'd, nothing sent), without keys and
with the source's 1,000 customer keys over 4 partitions, beside the decoder;
and the whole own produce into the in-process broker (CPU of encode, Produce
requests and the broker's append, as `consume()` above includes the broker's).

The source's own fetch (kafkalab.spark.fetcher, the default reader): the same
records read by `read_range` with kafkalab's Fetch requests (CPU of fetch and
decode, the in-process broker's included, as for `consume()`), and the decode
alone: the fetched responses' record bytes into Arrow columns
(kafkalab.spark.batch_columns), best of three. And numba's start: the first
decode in a fresh Python, with an empty compile cache (the JIT compiling) and
with the cache the first pass left (what a Spark worker pays once).

    KAFKALAB_BENCH_RECORDS=200000 .venv/bin/python benchmarks/bench_spark_columns.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

N = int(os.environ.get("KAFKALAB_BENCH_RECORDS", "200000"))
CHUNK = 20_000


def main() -> int:
    import numpy as np
    import pyarrow as pa
    from confluent_kafka import Consumer, Message, Producer
    from confluent_kafka import TopicPartition as TP
    from confluent_kafka.admin import AdminClient, NewTopic

    from kafkalab.protocol.api_keys import ApiKeys
    from kafkalab.server.broker import BrokerThread
    from kafkalab.spark import fetcher, sender
    from kafkalab.spark.batch_columns import BatchColumns
    from kafkalab.spark.batch_encoder import BatchEncoder
    from kafkalab.spark.kafka_io import _Columns, _gc_paused, produce_batch
    from kafkalab.spark.offsets import OffsetRange
    from kafkalab.spark.options import EXECUTOR_FETCH, parse_read_options, parse_write_options
    from kafkalab.spark.schema import arrow_schema, read_schema

    load_before = os.getloadavg()
    with BrokerThread({"log.dirs": tempfile.mkdtemp(prefix="bench-columns-")}) as broker:
        bs = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic("columns", 1, 1)]).values():
            f.result(30)
        time.sleep(1)
        p = Producer({"bootstrap.servers": bs, "linger.ms": 20, "batch.size": 1_000_000})
        for i in range(N):
            while True:
                try:
                    p.produce("columns", b"x" * 100, f"customer-{i % 1000}".encode())
                    break
                except BufferError:
                    p.poll(0.05)
        assert p.flush(120) == 0
        c = Consumer({**EXECUTOR_FETCH, "bootstrap.servers": bs, "group.id": "bench"})
        c.assign([TP("columns", 0, 0)])
        msgs: list = []
        t0 = time.process_time()
        while len(msgs) < N:
            msgs += [m for m in c.consume(CHUNK, timeout=0.5) if m.error() is None]
        consume_cpu = time.process_time() - t0  # includes the in-process broker's fetch work
        c.close()
        opts = parse_read_options(
            {"kafka.bootstrap.servers": bs, "subscribe": "columns"}, streaming=False
        )
        client = fetcher.new_client(opts)
        read = OffsetRange("columns", 0, 0, N)
        own_fetch_cpu = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            rows = sum(
                b.num_rows for b in fetcher.read_range(opts, read, read_schema(False), client)
            )
            own_fetch_cpu = min(own_fetch_cpu, time.process_time() - t0)
            assert rows == N
        fetched, at = [], 0  # the raw record bytes of each Fetch response
        while at < N:
            leader = client.client.connection(client.client.leader_for("columns", 0))
            part = leader.request(
                ApiKeys.FETCH, fetcher.fetch_request("columns", 0, at, 8 << 20, False)
            )["responses"][0]["partitions"][0]
            fetched.append((at, part["records"]))
            at = BatchColumns("columns", 0, arrow_schema(read_schema(False))).decode(
                part["records"], at, N
            )[1]
        client.close()
        for f in admin.create_topics([NewTopic("own-produce", 4, 1)]).values():
            f.result(30)
        time.sleep(1)
        value = pa.array([f"{i}".rjust(100, "x").encode() for i in range(10_000)], pa.binary())
        batch = pa.RecordBatch.from_arrays([value], names=["value"])
        write = parse_write_options(
            {"kafka.bootstrap.servers": bs, "topic": "own-produce", "kafkalab.producer": "kafkalab"}
        )
        own_produce_cpu = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            rows = sender.produce_batches(write, (batch for _ in range(N // batch.num_rows)))
            own_produce_cpu = min(own_produce_cpu, time.process_time() - t0)
            assert rows == N // batch.num_rows * batch.num_rows
    keys = pa.array([f"customer-{i % 1000}".encode() for i in range(10_000)], pa.binary())
    keyed = pa.RecordBatch.from_arrays([value, keys], names=["value", "key"])
    encode_cpu, encode_keyed_cpu = float("inf"), float("inf")
    for _ in range(3):
        for b, was in ((batch, "plain"), (keyed, "keyed")):
            encoder = BatchEncoder(1, 0, batch_size=1_000_000)
            t0 = time.process_time()
            for _ in range(N // b.num_rows):
                encoder.encode(b, "columns", lambda _: 4)
            took = time.process_time() - t0
            if was == "plain":
                encode_cpu = min(encode_cpu, took)
            else:
                encode_keyed_cpu = min(encode_keyed_cpu, took)
    columns = _Columns("columns", 0, read_schema(False))
    chunks = [msgs[i : i + CHUNK] for i in range(0, N, CHUNK)]
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        rows = 0
        for chunk in chunks:
            offsets = np.fromiter(map(Message.offset, chunk), np.int64, len(chunk))
            with _gc_paused():
                rows += columns.batch(chunk, offsets).num_rows
        best = min(best, time.process_time() - t0)
        assert rows == N
    decoder = BatchColumns("columns", 0, arrow_schema(read_schema(False)))
    decode_cpu = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        rows = sum(decoder.decode(data, at, N)[0].num_rows for at, data in fetched)
        decode_cpu = min(decode_cpu, time.process_time() - t0)
        assert rows == N
    producer = Producer(
        {
            "bootstrap.servers": "127.0.0.1:9",  # discard: nothing listens, nothing is sent
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            "message.timeout.ms": 600_000,
            "partitioner": "murmur2_random",
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "delivery.report.only.error": True,
            "log_level": 0,
        }
    )

    def sink_pass() -> None:
        for _ in range(N // batch.num_rows):
            produce_batch(producer, "columns", batch)
            producer.poll(0)

    def produce_alone_pass() -> None:
        one, produce = b"x" * 100, producer.produce
        for _ in range(N // batch.num_rows * batch.num_rows):
            produce("columns", one)

    produce_cpu = produce_alone_cpu = float("inf")
    for _ in range(3):
        for fn, was in ((sink_pass, "sink"), (produce_alone_pass, "alone")):
            t0 = time.process_time()
            fn()
            took = time.process_time() - t0
            producer.purge()
            producer.poll(0)
            if was == "sink":
                produce_cpu = min(produce_cpu, took)
            else:
                produce_alone_cpu = min(produce_alone_cpu, took)
    load_after = os.getloadavg()
    result = {
        "records": N,
        "source_consume_us_per_record_incl_broker": consume_cpu / N * 1e6,
        "source_columns_us_per_record": best / N * 1e6,
        "source_own_fetch_us_per_record_incl_broker": own_fetch_cpu / N * 1e6,
        "source_fetched_decode_us_per_record": decode_cpu / N * 1e6,
        "fetch_responses": len(fetched),
        "numba_first_decode_s_empty_cache": first_decode_s(cache=False),
        "numba_first_decode_s_cached": first_decode_s(cache=True),
        "sink_produce_us_per_record": produce_cpu / N * 1e6,
        "produce_alone_us_per_record": produce_alone_cpu / N * 1e6,
        "sink_encode_us_per_record": encode_cpu / N * 1e6,
        "sink_encode_keyed_us_per_record": encode_keyed_cpu / N * 1e6,
        "sink_own_produce_us_per_record_incl_broker": own_produce_cpu / N * 1e6,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
        ).stdout.strip(),
    }
    for k, v in result.items():
        print(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}")
    out = Path(__file__).parent / "results" / f"spark-columns-{result['commit'] or 'nogit'}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    return 0


_FIRST_DECODE = """
import time
t0 = time.perf_counter()
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.spark.batch_columns import BatchColumns
from kafkalab.spark.schema import arrow_schema, read_schema
data = build_batch([SimpleRecord(b"v", key=b"k")])
BatchColumns("t", 0, arrow_schema(read_schema(True))).decode(data, 0, 1)
print(time.perf_counter() - t0)
"""


def first_decode_s(cache: bool) -> float:
    """Wall seconds of a fresh Python's imports and first decode (numba's start)."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as empty:
        if not cache:
            env["NUMBA_CACHE_DIR"] = empty
        out = subprocess.run(
            [sys.executable, "-c", _FIRST_DECODE], env=env, capture_output=True, text=True
        )
    return float(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
