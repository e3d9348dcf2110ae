"""What the controller's path costs the common case: a three-broker cluster started,
a topic created, 100,000 records produced with acks=all, against the same with an
older commit's kafkalab (`--before`, e.g. the last commit where the single controller
wrote its metadata log directly rather than running as a KRaft quorum of one).

Rounds alternate between the two codes (before, after, before, ...), so both see
the same machine at the same moments. Each round runs in a child process whose
PYTHONPATH is that code (the cluster's processes inherit it) and times:

    start_s          LocalCluster(3).start(): controller up, every broker unfenced
    create_s         CreateTopics of one partition with RF=3 answered
    create_ready_s   ... and its leader and full ISR visible in Metadata
    produce_s        100,000 records of 100 bytes, librdkafka, acks=all, idempotent,
                     produced and flushed

    python benchmarks/bench_controller_path.py --before cf4f59f --rounds 5
    (or through benchmarks/figures.py controller-path)

Writes benchmarks/results/controller-path.json: every round's figures and the
medians per code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULT = HERE / "results" / "controller-path.json"
RECORDS = 100_000
VALUE = b"x" * 100
FIGURES = ("start_s", "create_s", "create_ready_s", "produce_s")


def one_round() -> dict[str, float]:
    """Measure once with the kafkalab on PYTHONPATH."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from kafkalab.cluster import LocalCluster

    out: dict[str, float] = {}
    t0 = time.monotonic()
    with LocalCluster(3) as cluster:
        out["start_s"] = time.monotonic() - t0
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        t0 = time.monotonic()
        for f in admin.create_topics([NewTopic("bench", 1, 3)]).values():
            f.result(60)
        out["create_s"] = time.monotonic() - t0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            p = admin.list_topics("bench", timeout=10).topics["bench"].partitions.get(0)
            if p is not None and p.leader >= 0 and len(p.isrs) == 3:
                break
            time.sleep(0.01)
        else:
            raise TimeoutError("bench-0 never had a leader and a full ISR")
        out["create_ready_s"] = time.monotonic() - t0
        producer = Producer(
            {
                "bootstrap.servers": bs,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "batch.size": 1_000_000,
            }
        )
        t0 = time.monotonic()
        for _ in range(RECORDS):
            while True:
                try:
                    producer.produce("bench", VALUE)
                    break
                except BufferError:
                    producer.poll(0.01)
        if producer.flush(120) != 0:
            raise TimeoutError("records left unacknowledged")
        out["produce_s"] = time.monotonic() - t0
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--before", required=False, help="the older commit to set against")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per code (default 5)")
    parser.add_argument("--one-round", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one_round:
        print(json.dumps(one_round()))
        return 0
    if not args.before:
        parser.error("--before COMMIT is required")
    from figures import code_of  # this directory's: an older commit's kafkalab/ under /tmp

    after = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    codes = {f"before-{args.before}": code_of(args.before), f"after-{after}": ROOT}
    rounds: list[dict] = []
    for n in range(args.rounds):
        for name, code in codes.items():
            env = {**os.environ, "PYTHONPATH": str(code)}
            done = subprocess.run(
                [sys.executable, __file__, "--one-round"],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode != 0:
                print(done.stdout, done.stderr, file=sys.stderr)
                return 1
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            rounds.append({"round": n, "code": name, **figures})
            print(name, {k: round(v, 2) for k, v in figures.items()}, flush=True)
    medians = {
        name: {f: round(statistics.median(r[f] for r in rounds if r["code"] == name), 3)
               for f in FIGURES}
        for name in codes
    }  # fmt: skip
    for name, m in medians.items():
        print(f"median {name}: {m}")
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(
        json.dumps({"records": RECORDS, "medians": medians, "rounds": rounds}, indent=1) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
