"""LogValidator benchmark: CPU a leader spends per produced record, with the record
walk (this code) and without it (an older commit, on PYTHONPATH).

    .venv/bin/python benchmarks/bench_log_validator.py LABEL
    PYTHONPATH=/path/to/older/checkout .venv/bin/python benchmarks/bench_log_validator.py LABEL

`UnifiedLog.append_as_leader` of 100-byte records (librdkafka's benchmark shape:
no key, no headers) in batches of 9,000 records (about 1 MB, as the broker
benchmark's producer sends them) and of 100 records (about 12 KB), 50 appends a
run, seven runs; process CPU time per record, median and all runs. The question:
what does checking every record add to a produce, per record? Writes
benchmarks/results/log-validator-LABEL.json.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kafkalab.records.memory_records import SimpleRecord, build_batch
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.unified_log import UnifiedLog

RUNS = 7
APPENDS = 50
SHAPES = {"9,000 records (~1 MB)": 9_000, "100 records (~12 KB)": 100}


def run(per_batch: int) -> float:
    now = int(time.time() * 1000)
    records = [SimpleRecord(b"x" * 100, timestamp=now + i // 100) for i in range(per_batch)]
    batch = build_batch(records)
    with tempfile.TemporaryDirectory(prefix="kafkalab-bench-validator-") as d:
        log = UnifiedLog(Path(d) / "t-0", LogConfig(segment_bytes=1 << 30))
        copies = [bytearray(batch) for _ in range(APPENDS)]
        c0 = time.process_time()
        for copy in copies:
            log.append_as_leader(copy)
        spent = time.process_time() - c0
        log.close()
    return spent / (per_batch * APPENDS) * 1e9


def main() -> int:
    label = sys.argv[1] if len(sys.argv) > 1 else "run"
    rows = []
    for shape, per_batch in SHAPES.items():
        runs = [run(per_batch) for _ in range(RUNS)]
        rows.append(
            {
                "batch": shape,
                "cpu_ns_per_record_median": statistics.median(runs),
                "cpu_ns_per_record_runs": runs,
            }
        )
        print(f"{label}: {shape}: {statistics.median(runs):.0f} ns CPU per record", file=sys.stderr)
    out = Path(__file__).parent / "results" / f"log-validator-{label}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
