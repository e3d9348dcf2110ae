"""Controller failover: how long a KRaft quorum is without an active controller.

Three controllers (a KRaft quorum, `LocalCluster(controllers=3)`) and three
brokers as processes. A librdkafka producer (acks=all, idempotent) sends a record
every 10 ms to a topic with RF=3. For each settings row, `--kills` times: SIGKILL
the active controller and measure

  new leader      kill -> DescribeQuorum (polled every ~20 ms) names another
                  voter leading in a higher epoch (the followers' fetch timeout
                  running out, then the election)
  metadata change kill -> the first CreateTopics (RF=3, sent through a broker,
                  retried every ~20 ms from the moment of the kill) that succeeds
                  (the brokers finding the new leader and it accepting writes)

then restart the killed controller and wait for the quorum to be whole (three
voters, each at the high watermark) before the next kill. At the end of a row every
acknowledged record is looked for in the topic: acknowledged records lost must be 0.

Rows: the controller.quorum.* timeouts kafkalab's quorum tests use (election 500 ms,
fetch 1000 ms, request 800 ms) and Kafka's defaults (QuorumConfig: election 1000 ms,
fetch 2000 ms, election backoff max 1000 ms, request 2000 ms).

    .venv/bin/python benchmarks/bench_controller_failover.py --kills 20
    .venv/bin/python benchmarks/bench_controller_failover.py --kills 2 --settings labs
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import LABS_QUORUM
from kafkalab.cluster.metadata_quorum import describe_quorum
from kafkalab.server.controller_channel import parse_bootstrap_servers

RESULTS = Path(__file__).resolve().parent / "results"
POLL_S = 0.02

SETTINGS = {
    "labs": LABS_QUORUM,
    "kafka": {
        "controller.quorum.election.timeout.ms": "1000",
        "controller.quorum.fetch.timeout.ms": "2000",
        "controller.quorum.election.backoff.max.ms": "1000",
        "controller.quorum.request.timeout.ms": "2000",
    },
}


def quorum_now(addresses):
    """The leader's DescribeQuorum answer, one pass over the voters; None when no
    live voter leads (an election runs, or the leader is dead)."""
    try:
        return describe_quorum(addresses, timeout_s=0.0)
    except Exception:  # noqa: BLE001 - a dead voter, or no leader yet: ask again
        return None


def wait_whole(addresses, timeout_s: float = 60.0):
    """Three voters, a leader, and every voter at the high watermark."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        q = quorum_now(addresses)
        if (
            q is not None
            and len(q.current_voters) == 3
            and all(r.log_end_offset == q.high_watermark for r in q.current_voters)
        ):
            return q
        time.sleep(0.1)
    raise TimeoutError("the quorum was not whole again within 60 s")


class Load:
    """A record every 10 ms, acks=all, idempotent; values name the kill they precede."""

    def __init__(self, bs: str, topic: str) -> None:
        self.topic = topic
        self.phase = "pre"
        self.acked: list[bytes] = []
        self.failed = 0
        self._stop = threading.Event()
        self._producer = Producer(
            {
                "bootstrap.servers": bs,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "message.timeout.ms": 120000,
            }
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.append(msg.value())
        else:
            self.failed += 1

    def _run(self) -> None:
        seq = 0
        while not self._stop.is_set():
            value = f"{self.phase}-{seq}".encode()
            self._producer.produce(self.topic, value, partition=0, on_delivery=self._delivered)
            self._producer.poll(0)
            seq += 1
            time.sleep(0.01)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._producer.flush(120)
        self._producer = None  # destroyed now, not retrying a stopped cluster later


def consumed(bs: str, topic: str, want: int) -> set[bytes]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "bench-check", "enable.auto.commit": False})
    got: set[bytes] = set()
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        idle_until = time.monotonic() + 30
        while time.monotonic() < idle_until and len(got) < want:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.add(m.value())
                idle_until = time.monotonic() + 10
    finally:
        c.close()
    return got


def metadata_change(admin: AdminClient, topic: str, done: dict) -> None:
    """CreateTopics retried until it succeeds; the moment it does goes in `done`."""
    while True:
        try:
            for f in admin.create_topics(
                [NewTopic(topic, 1, 3)], request_timeout=5, operation_timeout=5
            ).values():
                f.result(10)
            break
        except KafkaException as e:
            if "TOPIC_ALREADY_EXISTS" in str(e):  # an earlier try went through
                break
            done["errors"] = done.get("errors", 0) + 1
            time.sleep(POLL_S)
    done["t"] = time.monotonic()


def row(name: str, kills: int) -> dict:
    props = SETTINGS[name]
    records: list[dict] = []
    with LocalCluster(brokers=3, controllers=3, controller_props=props) as cluster:
        bs = cluster.bootstrap_servers
        addresses = parse_bootstrap_servers(cluster.controller_bootstrap_servers)
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic("load", 1, 3)]).values():
            f.result(30)
        cluster.wait_fully_replicated()
        with Load(bs, "load") as load:
            time.sleep(1)
            for kill in range(kills):
                q0 = wait_whole(addresses)
                old, epoch0 = q0.leader_id, q0.leader_epoch
                load.phase = f"k{kill}"
                done: dict = {}
                change = threading.Thread(
                    target=metadata_change, args=(admin, f"meta-{name}-{kill}", done)
                )
                t0 = time.monotonic()
                cluster.kill(old)
                change.start()
                while True:
                    q = quorum_now(addresses)
                    if q is not None and q.leader_id != old and q.leader_epoch > epoch0:
                        t_leader = time.monotonic()
                        break
                    time.sleep(POLL_S)
                change.join(120)
                if "t" not in done:
                    raise TimeoutError(f"kill {kill}: no metadata change within 120 s")
                rec = {
                    "kill": kill,
                    "killed": old,
                    "epoch_before": epoch0,
                    "new_leader": q.leader_id,
                    "epoch_after": q.leader_epoch,
                    "new_leader_ms": round((t_leader - t0) * 1000, 1),
                    "metadata_change_ms": round((done["t"] - t0) * 1000, 1),
                    "create_topics_retries": done.get("errors", 0),
                }
                records.append(rec)
                print(
                    f"  {name} kill {kill}: controller {old} (epoch {epoch0}) -> "
                    f"{q.leader_id} (epoch {q.leader_epoch}): new leader "
                    f"{rec['new_leader_ms']:.0f} ms, metadata change "
                    f"{rec['metadata_change_ms']:.0f} ms",
                    flush=True,
                )
                cluster.restart(old)
            wait_whole(addresses)
            load.phase = "post"
            time.sleep(1)
        acked = set(load.acked)
        got = consumed(bs, "load", len(acked))
        lost = acked - got
        lost_by_kill = {r["kill"]: 0 for r in records}
        for v in lost:
            phase = v.split(b"-", 1)[0].decode()
            if phase.startswith("k"):
                lost_by_kill[int(phase[1:])] += 1
        for r in records:
            r["acked_lost"] = lost_by_kill[r["kill"]]
        del admin  # destroyed before the cluster stops, not retrying it afterwards
        return {
            "settings": name,
            "controller_props": props,
            "kills": len(records),
            "acked": len(acked),
            "failed_sends": load.failed,
            "acked_lost": len(lost),
            "new_leader_ms": stats([r["new_leader_ms"] for r in records]),
            "metadata_change_ms": stats([r["metadata_change_ms"] for r in records]),
            "leader_to_metadata_change_ms": stats(
                [r["metadata_change_ms"] - r["new_leader_ms"] for r in records]
            ),
            "per_kill": records,
        }


def pct(xs: list[float], p: float) -> float:
    """Nearest-rank percentile (with 20 kills the p99 is the maximum)."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, -(-len(s) * p // 100) - 1))]


def stats(xs: list[float]) -> dict:
    return {
        "median": statistics.median(xs),
        "p90": pct(xs, 90),
        "p99": pct(xs, 99),
        "max": max(xs),
        "all": sorted(xs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    args = parser.parse_args(argv)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    rows = []
    for name in args.settings:
        print(f"== {name}: {SETTINGS[name]}, {args.kills} kills", flush=True)
        r = row(name, args.kills)
        rows.append(r)
        for key in ("new_leader_ms", "metadata_change_ms", "leader_to_metadata_change_ms"):
            s = r[key]
            print(
                f"{name} {key}: median {s['median']:.0f}, p90 {s['p90']:.0f}, "
                f"p99 {s['p99']:.0f}, max {s['max']:.0f}",
                flush=True,
            )
        print(f"{name}: {r['acked']} acknowledged, {r['acked_lost']} lost", flush=True)
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    out = RESULTS / f"controller-failover-{commit}-{stamp}.json"
    out.write_text(json.dumps({"commit": commit, "kills": args.kills, "rows": rows}, indent=1))
    print(f"wrote {out}")
    return 1 if any(r["acked_lost"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
