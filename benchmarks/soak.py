"""Soak: many faults in a row under an acks=all load, then the Jepsen-grade checker's verdict.

Run on purpose (it takes minutes; not part of `make bench`); CI runs a slice
(tests/faults/test_soak.py). See kafkalab/cluster/soak.py for the faults.

    .venv/bin/python benchmarks/soak.py                              # 100 faults of every kind, seed 0
    .venv/bin/python benchmarks/soak.py --kinds leader-kill --faults 100
    .venv/bin/python benchmarks/soak.py --faults 10 --seed 7 --kinds leader-kill power-failure
    .venv/bin/python benchmarks/soak.py --controllers 3 --overlap    # a quorum, its faults, overlaps

Prints one line per fault, then the report; writes benchmarks/results/soak.json;
exits 1 when the verdict is not valid.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from kafkalab.cluster.soak import ALL_KINDS, add_arguments, default_kinds, percentile, run_soak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    default = [k.value for k in default_kinds(args.controllers)]
    args.kinds = args.kinds or default
    print(
        f"== soak: {args.faults} faults ({', '.join(args.kinds)}), seed {args.seed}, "
        f"{args.rate:g} records/s acks=all, {args.controllers} controller(s)"
        + (", overlapping" if args.overlap else ""),
        flush=True,
    )
    report = run_soak(
        faults=args.faults,
        seed=args.seed,
        kinds=args.kinds,
        rate=args.rate,
        controllers=args.controllers,
        overlap=args.overlap,
        client_log=args.client_log,
        base_dir=args.base_dir,
    )
    print(report.table())
    v = report.verdict
    fo, cfo = report.failovers_ms, report.controller_failovers_ms
    result = {
        "faults": args.faults,
        "seed": args.seed,
        "kinds": args.kinds,
        "survived": report.survived,
        "controllers": args.controllers,
        "overlap": args.overlap,
        "by_kind": report.by_kind,
        "overlapped": [list(pair) for pair in report.overlapped],
        "acknowledged": report.acknowledged,
        "failed_sends": report.failed_sends,
        "failed_by_error": report.failed_by_error,
        "unavailable": report.unavailable,
        "lost": None if v is None else len(report.anomalies("lost-write")),
        "duplicated": None if v is None else len(report.anomalies("duplicate")),
        "unseen": None if v is None else sum(c["count"] for c in report.anomalies("unseen")),
        "poll_skip": report.per_process("poll-skip"),
        "nonmonotonic_poll": report.per_process("nonmonotonic-poll"),
        "anomalies": None if v is None else {n: len(c) for n, c in v.anomalies.items()},
        "checker_valid": None if v is None else v.valid,
        "read": report.read,
        "read_gaps": len(report.read_gaps),
        "read_all": report.read_all,
        "read_errors": report.read_errors,
        "read_fetch_state": report.read_fetch_state,
        "failover_ms": {
            "p50": percentile(fo, 50),
            "p99": percentile(fo, 99),
            "max": max(fo, default=None),
            "n": len(fo),
        },
        "controller_failover_ms": {
            "p50": percentile(cfo, 50),
            "p99": percentile(cfo, 99),
            "max": max(cfo, default=None),
            "n": len(cfo),
        },
        "byte_identical": report.byte_identical,
        "high_watermark": report.high_watermark,
        "elapsed_s": report.elapsed_s,
        "valid": report.valid,
        "error": report.error,
    }
    out = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(out, exist_ok=True)
    every = set(args.kinds) == {k.value for k in ALL_KINDS}
    kinds = "all-kinds" if every else "-".join(args.kinds)  # a file name fits 255 bytes
    name = "soak.json" if args.kinds == default else f"soak-{kinds}.json"
    if args.controllers > 1 or args.overlap:
        name = name.replace("soak", f"soak-quorum{args.controllers}", 1)
        name = name.replace(".json", "-overlap.json" if args.overlap else ".json")
    with open(os.path.join(out, name), "w") as f:
        json.dump(result, f, indent=2)
    return 0 if report.valid else 1


if __name__ == "__main__":
    sys.exit(main())
