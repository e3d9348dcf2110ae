"""Cleaner benchmark: one LogCleaner pass over a compacted log of 100 MB of records
whose keys are 10% unique (each key written ten times on average, in random order).

    make bench                       # or: .venv/bin/python benchmarks/bench_cleaner.py
    KAFKALAB_BENCH_MB=20 ...         # MB of records (default 100)
    KAFKALAB_BENCH_CODEC=lz4 ...     # batch codec: none (default), gzip, snappy, lz4, zstd
    KAFKALAB_BENCH_DIR=/path ...     # where to write (default: a temp dir under /tmp)

Records have a 12-byte key and a 100-byte value, in batches of about 16 KiB as a
producer sends them, in segments of 100 MiB (`offsets.topic.segment.bytes`, the
segment size of __consumer_offsets). The whole log is dirty, as at a first pass.
Reports MB/s as Kafka's cleaner logs it (log bytes read / seconds of the pass),
and the two phases apart: building the offset map (every record decoded) and
rewriting the segments (decode, keep the latest per key, re-encode the batches
that lost records, fsync, swap). Writes benchmarks/results/cleaner.json.
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from kafkalab.records.memory_records import SimpleRecord, build_batch
from kafkalab.records.record_batch import CompressionType
from kafkalab.storage.log_cleaner import clean
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.unified_log import UnifiedLog

MB = 1_000_000
TOTAL = int(float(os.environ.get("KAFKALAB_BENCH_MB", "100")) * MB)
CODEC = CompressionType[os.environ.get("KAFKALAB_BENCH_CODEC", "none").upper()]
VALUE_SIZE = 100
BATCH_BYTES = 16 * 1024
UNIQUE = 0.10


def build_log(directory: Path) -> tuple[UnifiedLog, int]:
    config = LogConfig(cleanup_policy="compact", segment_bytes=100 * 1024 * 1024)
    log = UnifiedLog(directory, config)
    per_record = VALUE_SIZE + 12 + 8  # value, key, record framing (about)
    n = TOTAL // per_record
    keys = max(1, int(n * UNIQUE))
    rng = random.Random(42)
    value = bytes(rng.randrange(256) for _ in range(VALUE_SIZE))
    per_batch = max(1, BATCH_BYTES // per_record)
    ts = int(time.time() * 1000)
    written = 0
    while written < n:
        count = min(per_batch, n - written)
        records = [
            SimpleRecord(value, key=b"key-%08d" % rng.randrange(keys), timestamp=ts)
            for _ in range(count)
        ]
        log.append_as_leader(build_batch(records, compression=CODEC))
        written += count
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    return log, n


def main() -> None:
    base = Path(os.environ.get("KAFKALAB_BENCH_DIR") or tempfile.mkdtemp(prefix="kafkalab-clean-"))
    try:
        log, n = build_log(base / "bench-0")
        size = log.size
        result = clean(log)
        assert result is not None
        stats = result.stats
        map_s = (stats.map_done_ns - stats.start_ns) / 1e9
        rewrite_s = (stats.end_ns - stats.map_done_ns) / 1e9
        out = {
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}",
            "codec": CODEC.name.lower(),
            "records": n,
            "unique_keys": stats.records_written,
            "log_bytes": size,
            "bytes_read": stats.bytes_read,
            "bytes_written": stats.bytes_written,
            "seconds": round(stats.elapsed_s, 2),
            "mb_per_s": round(stats.bytes_read / MB / stats.elapsed_s, 1),
            "map_mb_per_s": round(stats.map_bytes_read / MB / map_s, 1),
            "rewrite_mb_per_s": round(stats.bytes_read / MB / rewrite_s, 1),
        }
        log.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(
        f"Cleaner, {out['machine']}: {out['log_bytes'] / MB:.0f} MB, {out['records']:,} records "
        f"({out['codec']}), {out['unique_keys']:,} kept"
    )
    print("| pass MB/s | offset map MB/s | rewrite MB/s | seconds | size after |")
    print("|---:|---:|---:|---:|---:|")
    print(
        f"| {out['mb_per_s']} | {out['map_mb_per_s']} | {out['rewrite_mb_per_s']} | "
        f"{out['seconds']} | {out['bytes_written'] / out['bytes_read']:.0%} |"
    )
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    (results / "cleaner.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
