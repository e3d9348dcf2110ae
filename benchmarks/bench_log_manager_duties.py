"""How long the LogManager's duties hold their caller (the broker's event loop),
with everything in the caller (`background_threads=0`, labs) and with the
broker's writer thread (`background.threads`).

    .venv/bin/python benchmarks/bench_log_manager_duties.py

Per run, on 100 partitions in one log dir: five offset checkpoints (three
files, each fsynced, and the directory), a flush.ms flush of 10 logs holding
about 2 MB each unflushed, and a retention pass that drops 40 segments of 1 MB.
Three runs per mode. Writes benchmarks/results/log-manager-duties-<commit>.json.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafkalab.records.memory_records import SimpleRecord, build_batch
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.log_manager import LogManager

RUNS = 3


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 1)


def run(background_threads: int) -> dict:
    base = Path(tempfile.mkdtemp(prefix="kafkalab-duties-"))
    try:
        config = LogConfig(segment_bytes=1024 * 1024, retention_ms=1, flush_ms=0)
        manager = LogManager(base, config, background_threads=background_threads)
        logs = [manager.get_or_create_log("t", p) for p in range(100)]
        batch = build_batch([SimpleRecord(b"x" * 100, key=b"k%d" % i) for i in range(100)])
        checkpoints = []
        for _ in range(5):
            began = time.perf_counter()
            manager.checkpoint()
            checkpoints.append(ms(began))
        for lg in logs[:10]:
            for _ in range(170):
                lg.append_as_leader(batch)
            lg.update_high_watermark(lg.log_end_offset)
        began = time.perf_counter()
        manager.flush_dirty_logs()
        flush = ms(began)
        for lg in logs[:10]:
            for _ in range(170):
                lg.append_as_leader(batch)
            lg.roll()
            lg.update_high_watermark(lg.log_end_offset)
        time.sleep(0.01)
        began = time.perf_counter()
        deleted = manager.cleanup_logs()
        retention = ms(began)
        manager.shutdown()
        return {
            "checkpoint_ms": checkpoints,
            "flush_ms": flush,
            "retention_ms": retention,
            "segments_deleted": sum(len(v) for v in deleted.values()),
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    measured = commit()
    rows = []
    for _ in range(RUNS):
        for threads in (0, 1):
            row = {"background_threads": threads, **run(threads)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    out = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}",
        "load_average": os.getloadavg(),
        "commit": measured,
        "command": "benchmarks/bench_log_manager_duties.py",
        "rows": rows,
    }
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    (results / f"log-manager-duties-{measured}.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
