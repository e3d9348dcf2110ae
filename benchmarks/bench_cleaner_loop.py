"""Cleaner vs. event loop: the longest stall of an asyncio loop while a LogManager
on that loop compacts 100 MB, the way a broker runs it (`tick()` every second).

    .venv/bin/python benchmarks/bench_cleaner_loop.py                 # all modes
    .venv/bin/python benchmarks/bench_cleaner_loop.py inline process  # some
    # before: the inline mode on an older commit's code
    git archive <commit> kafkalab | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old KAFKALAB_BENCH_CODE_COMMIT=<commit> \
        .venv/bin/python benchmarks/bench_cleaner_loop.py idle inline
    KAFKALAB_BENCH_MB=20 ...                                          # MB of records

Modes:
- `inline`: the cleaning in `tick()` itself (`cleaner_threads=0`): what the broker
  did before cleaning moved off the loop. Runs on older commits too (then it is
  exactly the old code).
- `thread`: the same pass (`run_clean_task`) in a thread of the loop's process,
  swapped in on the loop: shown for comparison only (the GIL).
- `process`: `cleaner_threads=1` and `background_threads=1`, as the broker runs
  now: the pass in a cleaner process, `tick()` hands it out and swaps it in, the
  writer thread deletes the replaced segment's files.
- `idle`: the probe alone for 5 s, nothing cleaned: how late a 1 ms sleep wakes up
  on this machine anyway (other processes share its cores).

`longest_tick_ms` is the longest `tick()` call: the time the loop spent in the
LogManager itself (for `process`, the hand-out or the swap).

A probe task sleeps 1 ms in a loop and records how late it wakes up; the report
gives the longest gap and the 99th percentile while the pass runs, and how many
probe wake-ups there were per second (1000 at best). The log is the one
bench_cleaner.py builds (100-byte values, 10% unique keys, 16 KiB batches, no
compression), copied afresh for each mode. Writes
benchmarks/results/cleaner-loop-<commit>.json (raw gaps summarised per mode).
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_cleaner import TOTAL, build_log  # noqa: E402

import kafkalab  # noqa: E402
from kafkalab.storage.log_config import LogConfig  # noqa: E402
from kafkalab.storage.log_manager import LogManager  # noqa: E402

TOPIC_CONFIGS = {"bench": {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}}
TICK_S = 1.0  # the broker's TICK_SECONDS


def commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def open_manager(directory: Path, threads: int) -> LogManager:
    kwargs = dict(topic_configs=TOPIC_CONFIGS, cleaner_backoff_ms=0)
    if threads:  # as the broker runs it: cleaner processes and the writer thread
        kwargs["cleaner_threads"] = threads
        kwargs["background_threads"] = 1
    return LogManager(directory, LogConfig(), **kwargs)


async def probe(stop: asyncio.Event, gaps: list[float]) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now


async def run_mode(mode: str, directory: Path) -> dict:
    manager = open_manager(directory, 1 if mode == "process" else 0)
    log = manager.get_log("bench", 0)
    log.update_high_watermark(log.log_end_offset)  # built without a LogManager: no checkpoint
    size = log.size
    stop = asyncio.Event()
    gaps: list[float] = []
    task = asyncio.create_task(probe(stop, gaps))
    await asyncio.sleep(0.5)
    gaps.clear()
    start = time.perf_counter()
    result = None
    ticks: list[float] = []
    slow_ticks: list[tuple[float, list[str]]] = []  # over 10 ms: how long, what it did

    def tick() -> dict:
        began = time.perf_counter()
        done = manager.tick()
        ticks.append(time.perf_counter() - began)
        if ticks[-1] > 0.01:
            slow_ticks.append((round(ticks[-1] * 1000, 1), sorted(done)))
        return done

    try:
        if mode == "idle":  # the same probe with nothing to do: the machine's own noise
            await asyncio.sleep(5)
        elif mode == "inline":
            while result is None:
                result = tick().get("cleaner")
                await asyncio.sleep(TICK_S)
        elif mode == "thread":
            planned = manager.cleaner.plan(log, manager.clock())
            assert planned is not None
            cleaning, segments = planned
            from kafkalab.storage.log_cleaner import run_clean_task

            outcome = await asyncio.to_thread(run_clean_task, cleaning)
            result = manager.cleaner.swap_in(log, outcome, segments)
        else:
            while result is None:
                done = tick()
                if "cleaned" in done:
                    result = done["cleaned"][0]
                await asyncio.sleep(TICK_S)
        elapsed = time.perf_counter() - start
    finally:
        stop.set()
        await task
        manager.shutdown()
    ordered = sorted(gaps)
    stats = result.stats if result is not None else None
    return {
        "mode": mode,
        "log_bytes": size,
        "bytes_read": stats and stats.bytes_read,
        "bytes_written": stats and stats.bytes_written,
        "pass_s": stats and round(stats.elapsed_s, 2),
        "longest_tick_ms": round(max(ticks, default=0) * 1000, 1),
        "ticks_over_10ms": slow_ticks,
        "wall_s": round(elapsed, 2),
        "probe_wakeups": len(gaps),
        "wakeups_per_s": round(len(gaps) / elapsed, 1),
        "max_stall_ms": round(ordered[-1] * 1000, 1),
        "p99_stall_ms": round(ordered[int(len(ordered) * 0.99)] * 1000, 1),
        "median_stall_ms": round(ordered[len(ordered) // 2] * 1000, 2),
        "threads_in_process": threading.active_count(),
    }


def main() -> None:
    modes = sys.argv[1:] or ["idle", "inline", "thread", "process"]
    measured = os.environ.get("KAFKALAB_BENCH_CODE_COMMIT") or commit()  # before any change
    base = Path(os.environ.get("KAFKALAB_BENCH_DIR") or tempfile.mkdtemp(prefix="kafkalab-loop-"))
    rows = []
    try:
        source = base / "source"
        built, _ = build_log(source / "bench-0")
        built.close()
        for mode in modes:
            work = base / mode
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(source, work)
            rows.append(asyncio.run(run_mode(mode, work)))
            shutil.rmtree(work)
            print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}",
        "load_average": os.getloadavg(),
        # KAFKALAB_BENCH_CODE_COMMIT names the code measured when PYTHONPATH points
        # at another commit's kafkalab (the "before" run).
        "commit": measured,
        "kafkalab": str(Path(kafkalab.__file__).parent),
        "command": "benchmarks/bench_cleaner_loop.py " + " ".join(modes),
        "mb": TOTAL / 1e6,
        "rows": rows,
    }
    print("| mode | pass s | longest loop stall ms | p99 ms | longest tick ms | wake-ups/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['mode']} | {r['pass_s']} | {r['max_stall_ms']} | {r['p99_stall_ms']} | "
            f"{r['longest_tick_ms']} | {r['wakeups_per_s']} |"
        )
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    name = f"cleaner-loop-{out['commit']}-{'-'.join(modes)}.json"
    (results / name).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
