"""`kafkalab metadata-quorum`: the KRaft quorum as Kafka's `kafka-metadata-quorum.sh`
shows it (Kafka: org.apache.kafka.tools.MetadataQuorumCommand).

    kafkalab metadata-quorum --bootstrap-controller HOST:PORT[,...] describe --status
    kafkalab metadata-quorum --bootstrap-controller HOST:PORT[,...] describe --replication

It sends DescribeQuorum (55) v2 to the controllers given, in turn, until the leader
answers (a voter that is not the leader answers NOT_LEADER_OR_FOLLOWER with the leader
it knows), and prints Kafka's layout: for --status ClusterId, LeaderId, LeaderEpoch,
HighWatermark, MaxFollowerLag, MaxFollowerLagTimeMs, CurrentVoters, CurrentObservers;
for --replication one row a replica (NodeId, LogEndOffset, Lag,
LastFetchTimestamp, LastCaughtUpTimestamp, Status: Leader, Follower or Observer).
`describe_quorum(addresses)` is the same question from Python.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import RAFT_APIS
from kafkalab.raft.raft_message import DescribeQuorumResponse
from kafkalab.raft.raft_wire import METADATA_PARTITION, METADATA_TOPIC, describe_quorum_from_body
from kafkalab.server.controller_channel import parse_bootstrap_servers
from kafkalab.server.inter_broker_connection import InterBrokerConnection

DESCRIBE_QUORUM_VERSION = 2


async def _ask(host: str, port: int) -> DescribeQuorumResponse:
    conn = InterBrokerConnection(host, port, RAFT_APIS, lambda: "kafkalab-metadata-quorum")
    body = {
        "topics": [
            {"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": METADATA_PARTITION}]}
        ]
    }
    try:
        answer = await conn.request(ApiKeys.DESCRIBE_QUORUM, DESCRIBE_QUORUM_VERSION, body)
    finally:
        conn.close()
    return describe_quorum_from_body(answer)


def _ask_now(host: str, port: int) -> DescribeQuorumResponse:
    """_ask from synchronous code, also where an event loop already runs in this
    thread (a Jupyter kernel): there, on a worker thread with a loop of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_ask(host, port))
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _ask(host, port)).result()


def describe_quorum(
    addresses: Sequence[tuple[str, int]], timeout_s: float = 10.0
) -> DescribeQuorumResponse:
    """The leader's DescribeQuorum answer, asking each controller in turn (and again,
    while an election runs) until one leads. KafkaError(NOT_LEADER_OR_FOLLOWER) after
    `timeout_s` without a leader."""
    deadline = time.monotonic() + timeout_s
    last: DescribeQuorumResponse | None = None
    while True:
        for host, port in addresses:
            try:
                answer = _ask_now(host, port)
            except KafkaError:
                continue
            if answer.error_code == Errors.NONE:
                return answer
            last = answer
        if time.monotonic() > deadline:
            raise KafkaError(
                Errors.NOT_LEADER_OR_FOLLOWER,
                f"no controller of {addresses} leads the quorum (last answer: {last})",
            )
        time.sleep(0.2)


def status_lines(resp: DescribeQuorumResponse, cluster_id: str = "", now_ms: int = 0) -> list[str]:
    """Kafka's `describe --status` lines."""
    now_ms = now_ms or int(time.time() * 1000)
    leader_leo = next(
        (r.log_end_offset for r in resp.current_voters if r.replica_id == resp.leader_id), -1
    )
    followers = [r for r in resp.current_voters if r.replica_id != resp.leader_id]
    max_lag = max((leader_leo - r.log_end_offset for r in followers), default=0)
    caught_up = [r.last_caught_up_timestamp for r in followers if r.last_caught_up_timestamp >= 0]
    max_lag_ms = max((now_ms - t for t in caught_up), default=0) if followers else 0
    rows = [
        ("ClusterId", cluster_id),
        ("LeaderId", resp.leader_id),
        ("LeaderEpoch", resp.leader_epoch),
        ("HighWatermark", resp.high_watermark),
        ("MaxFollowerLag", max_lag),
        ("MaxFollowerLagTimeMs", max_lag_ms),
        ("CurrentVoters", "[" + ",".join(str(r.replica_id) for r in resp.current_voters) + "]"),
        ("CurrentObservers", "[" + ",".join(str(r.replica_id) for r in resp.observers) + "]"),
    ]
    return [f"{name + ':':<24}{value}" for name, value in rows]


def replication_rows(resp: DescribeQuorumResponse, now_ms: int = 0) -> list[dict]:
    """Kafka's `describe --replication` table, a dict a row."""
    now_ms = now_ms or int(time.time() * 1000)
    leader_leo = next(
        (r.log_end_offset for r in resp.current_voters if r.replica_id == resp.leader_id), -1
    )
    rows = []
    for kind, replicas in (("voter", resp.current_voters), ("observer", resp.observers)):
        for r in replicas:
            status = (
                "Leader"
                if r.replica_id == resp.leader_id
                else ("Follower" if kind == "voter" else "Observer")
            )
            rows.append(
                {
                    "NodeId": r.replica_id,
                    "LogEndOffset": r.log_end_offset,
                    "Lag": max(0, leader_leo - r.log_end_offset),
                    "LastFetchTimestamp": r.last_fetch_timestamp,
                    "LastCaughtUpTimestamp": r.last_caught_up_timestamp,
                    "Status": status,
                }
            )
    rows.sort(key=lambda row: (row["Status"] != "Leader", row["NodeId"]))
    return rows


def format_table(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    out = ["  ".join(f"{c:<{widths[c]}}" for c in columns).rstrip()]
    out += ["  ".join(f"{r[c]!s:<{widths[c]}}" for c in columns).rstrip() for r in rows]
    return out


def _main(args: argparse.Namespace) -> int:
    answer = describe_quorum(parse_bootstrap_servers(args.bootstrap_controller), args.timeout)
    if args.replication:
        lines = format_table(replication_rows(answer))
    else:
        lines = status_lines(answer)
    print("\n".join(lines))
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "metadata-quorum", help="describe the KRaft controller quorum (kafka-metadata-quorum.sh)"
    )
    parser.add_argument(
        "--bootstrap-controller",
        required=True,
        metavar="HOST:PORT[,...]",
        help="the controllers to ask (Kafka's --bootstrap-controller)",
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to find the leader")
    sub = parser.add_subparsers(dest="action", metavar="describe", required=True)
    describe = sub.add_parser("describe", help="the quorum's leader, epoch, voters and lags")
    what = describe.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true")
    what.add_argument("--replication", action="store_true")
    parser.set_defaults(func=_main)
