"""Re-measure the README's figures, each with the commit and command behind it.

Every figure in the README's Benchmarks section comes from one entry of FIGURES
below: a benchmark script, its arguments and environment. This runs the entries
asked for (all by default) one after the other and, for each, writes
benchmarks/results/figures/<figure>-<commit>.json: the commit (and whether the
tree had uncommitted changes), the exact command, when it ran and for how long,
the machine's load average before, during (sampled every 5 s) and after, the
benchmark's exit status, the end of its console output, and the raw result
files it wrote (embedded). A reader sees the distribution behind each median
in the benchmark's own raw results, and whether the machine was idle.

    .venv/bin/python benchmarks/figures.py --list
    .venv/bin/python benchmarks/figures.py                  # every figure: about two hours
    .venv/bin/python benchmarks/figures.py storage broker   # some of them

Run from a checkout of the commit to be measured, on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from kafkalab.cluster.soak import ALL_KINDS, BROKER_KINDS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
OUT = RESULTS / "figures"
CONSOLE_LINES = 400  # of each benchmark's output, kept in its record


@dataclass(frozen=True)
class Figure:
    name: str
    readme: str  # where in the README's Benchmarks section the figure is
    args: tuple[str, ...]  # the script and its arguments, under benchmarks/
    env: dict[str, str] = field(default_factory=dict)
    code_at: str | None = None  # measure an older commit's kafkalab/ (a "before")


SIX_KINDS = tuple(kind.value for kind in BROKER_KINDS)  # the soak's every broker fault kind
#: Every fault kind of the soak: brokers', a quorum's, the nemeses' and lazyfs's.
EVERY_SOAK_KIND = tuple(kind.value for kind in ALL_KINDS)
BEFORE_VALIDATOR = "0ced080"  # the last commit before the LogValidator walked records
BEFORE_QUORUM_OF_ONE = "cf4f59f"  # the last commit whose single controller wrote directly
PRODUCE_AB = {
    "KAFKALAB_BENCH_RUNS": "7",
    "KAFKALAB_BENCH_PHASES": "produce",
    "KAFKALAB_BENCH_CLIENTS": "librdkafka",
}


FIGURES = (
    Figure("storage", "Storage", ("bench_storage.py",)),
    Figure("broker", "Broker", ("bench_broker.py",)),
    Figure(
        "log-validator-before",
        "What checking every record costs",
        ("bench_log_validator.py", f"before-{BEFORE_VALIDATOR}-idle"),
        code_at=BEFORE_VALIDATOR,
    ),
    Figure("log-validator", "What checking every record costs", ("bench_log_validator.py", "idle")),
    Figure(
        "broker-produce-before",
        "What checking every record costs",
        ("bench_broker.py",),
        {**PRODUCE_AB, "KAFKALAB_BENCH_RESULT": "broker-produce-before.json"},
        code_at=BEFORE_VALIDATOR,
    ),
    Figure(
        "broker-produce-after",
        "What checking every record costs",
        ("bench_broker.py",),
        {**PRODUCE_AB, "KAFKALAB_BENCH_RESULT": "broker-produce-after.json"},
    ),
    Figure("cluster", "Cluster and Failover", ("bench_cluster.py",)),
    Figure(
        "controller-failover",
        "Cluster and Failover, the active controller killed",
        ("bench_controller_failover.py", "--kills", "20"),
    ),
    Figure(
        "controller-path",
        "Cluster and Failover, the single controller as a quorum of one",
        ("bench_controller_path.py", "--before", BEFORE_QUORUM_OF_ONE, "--rounds", "5"),
    ),
    Figure("groups", "Consumer groups", ("bench_groups.py",)),
    Figure("transactions", "Transactions", ("bench_transactions.py",)),
    Figure("cleaner", "Log cleaner", ("bench_cleaner.py",)),
    Figure(
        "cleaner-lz4", "Log cleaner, lz4", ("bench_cleaner.py",), {"KAFKALAB_BENCH_CODEC": "lz4"}
    ),
    Figure("cleaner-loop", "Log cleaner, the event loop", ("bench_cleaner_loop.py",)),
    Figure("log-manager-duties", "Log manager duties", ("bench_log_manager_duties.py",)),
    Figure(
        "soak-leader-kill",
        "Soak, 100 leader kills",
        ("soak.py", "--faults", "100", "--seed", "0", "--kinds", "leader-kill"),
    ),
    Figure("soak-mixed", "Soak, 100 mixed faults", ("soak.py", "--faults", "100", "--seed", "0")),
    Figure(
        "soak-1000",
        "Soak, 60 faults at 1,000 records/s",
        ("soak.py", "--faults", "60", "--seed", "9", "--rate", "1000", "--kinds", *SIX_KINDS),
    ),
    Figure(
        "soak-quorum",
        "Soak, 100 mixed faults on a controller quorum, overlapping",
        ("soak.py", "--faults", "100", "--seed", "0", "--controllers", "3", "--overlap"),
    ),
    Figure(
        "soak-all",
        "Soak, 100 faults of every kind on a controller quorum, overlapping",
        (
            "soak.py",
            "--faults",
            "100",
            "--seed",
            "0",
            "--controllers",
            "3",
            "--overlap",
            "--kinds",
            *EVERY_SOAK_KIND,
        ),
    ),
    Figure("fuzz", "Fuzz", ("fuzz_protocol.py", "--frames", "1000000", "--seed", "1")),
    Figure("spark", "Spark", ("bench_spark.py",)),
    Figure("spark-columns", "Spark, without Spark", ("bench_spark_columns.py",)),
    Figure(
        "partition-scale-labs",
        "Partition scale, 1,000 with the labs' sessions",
        ("bench_partition_scale.py", "--sizes", "1000", "--settings", "labs", "--records", "10"),
    ),
    Figure(
        "partition-scale-kafka",
        "Partition scale, 3,000 with Kafka's defaults",
        ("bench_partition_scale.py", "--sizes", "3000", "--settings", "kafka", "--records", "10"),
    ),
)
BY_NAME = {f.name: f for f in FIGURES}


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def result_files(since: float) -> dict[str, object]:
    """The raw results the benchmark wrote: files under results/ changed since it began."""
    found: dict[str, object] = {}
    for path in sorted(RESULTS.glob("*")):
        if path.is_file() and path.stat().st_mtime >= since:
            text = path.read_text(errors="replace")
            try:
                found[path.name] = json.loads(text)
            except json.JSONDecodeError:
                found[path.name] = text
    return found


def code_of(commit: str) -> Path:
    """An older commit's kafkalab/ package, extracted once under /tmp."""
    where = Path(tempfile.gettempdir()) / f"kafkalab-figures-{commit}"
    if not (where / "kafkalab").is_dir():
        where.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", commit, "kafkalab"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


def run(figure: Figure, commit: str, dirty: bool) -> dict:
    command = [sys.executable, str(HERE / figure.args[0]), *figure.args[1:]]
    code = code_of(figure.code_at) if figure.code_at else ROOT
    env = {**os.environ, **figure.env, "PYTHONPATH": str(code), "PYTHONUNBUFFERED": "1"}
    if figure.code_at:
        env["KAFKALAB_BENCH_CODE_COMMIT"] = figure.code_at
    shown = " ".join(
        [
            *([f"PYTHONPATH=<git archive {figure.code_at} kafkalab>"] if figure.code_at else []),
            *(f"{k}={v}" for k, v in figure.env.items()),
            "python",
            "benchmarks/" + figure.args[0],
            *figure.args[1:],
        ]
    )
    print(f"== {figure.name}: {shown}", flush=True)
    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(5):
            samples.append(loadavg()[0])

    started, before = time.time(), loadavg()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    lines: list[str] = []
    with subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            lines.append(line.rstrip("\n"))
    stop.set()
    sampler.join()
    record = {
        "figure": figure.name,
        "readme": figure.readme,
        "commit": commit,
        "uncommitted_changes": dirty,
        "kafkalab_code_commit": figure.code_at or commit,
        "command": shown,
        "started_utc": datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds"),
        "elapsed_s": round(time.time() - started, 1),
        "returncode": proc.returncode,
        "loadavg_before": before,
        "loadavg_after": loadavg(),
        "loadavg_1min_during": {
            "max": max(samples, default=None),
            "median": sorted(samples)[len(samples) // 2] if samples else None,
            "samples": len(samples),
        },
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "console_tail": lines[-CONSOLE_LINES:],
        "raw_results": result_files(started),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{figure.name}-{commit}.json"
    path.write_text(json.dumps(record, indent=1, default=str) + "\n")
    print(f"== {figure.name}: exit {proc.returncode}, wrote {path.relative_to(ROOT)}", flush=True)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("figures", nargs="*", metavar="FIGURE", help="default: every figure")
    parser.add_argument("--list", action="store_true", help="name every figure and its command")
    args = parser.parse_args(argv)
    if args.list:
        for f in FIGURES:
            env = " ".join(f"{k}={v}" for k, v in f.env.items())
            at = f" (kafkalab/ at {f.code_at})" if f.code_at else ""
            print(f"{f.name:24} {env} {' '.join(f.args)}{at}  [README: {f.readme}]")
        return 0
    unknown = [n for n in args.figures if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown figure {', '.join(unknown)}; choose from {', '.join(BY_NAME)}")
    commit = git("rev-parse", "--short", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    if dirty:
        print("warning: uncommitted changes; the records say so", file=sys.stderr)
    failed = [
        f.name
        for f in (BY_NAME[n] for n in args.figures or BY_NAME)
        if run(f, commit, dirty)["returncode"] != 0
    ]
    print(f"== done; failed: {', '.join(failed) or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
