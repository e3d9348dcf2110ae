"""`kafkalab cluster up --controllers 3` as a user runs it: the quorum in `status`,
a controller killed by its id, a new leader, `kafkalab metadata-quorum describe` in
Kafka's layout, and `down` leaves no process behind."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

from kafkalab.cluster.local_cluster import ProcessState, process_state


def kafkalab(*args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "kafkalab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def leader_of(status: str) -> tuple[int, int] | None:
    m = re.search(r"quorum: leader (\d+), epoch (\d+)", status)
    return (int(m[1]), int(m[2])) if m else None


def test_cluster_up_with_three_controllers_and_a_controller_killed(tmp_path):
    d = str(tmp_path / "k")
    out = kafkalab("cluster", "up", "--brokers", "1", "--controllers", "3", "--dir", d)
    state = json.loads((tmp_path / "k" / "cluster.json").read_text())
    pids = [c["pid"] for c in state["controllers"].values()] + [
        b["pid"] for b in state["brokers"].values()
    ]
    try:
        assert sorted(state["controllers"]) == ["3001", "3002", "3003"]
        assert "controller 3001:" in out and "bootstrap.servers=" in out
        status = kafkalab("cluster", "status", "--dir", d)
        first = leader_of(status)
        assert first is not None, status
        assert all(f"{c}\t" in status for c in (3001, 3002, 3003))

        bootstrap = ",".join(c["address"] for c in state["controllers"].values())
        described = kafkalab(
            "metadata-quorum", "--bootstrap-controller", bootstrap, "describe", "--status"
        )
        assert re.search(rf"LeaderId:\s+{first[0]}\n", described), described
        assert "CurrentVoters:          [3001,3002,3003]" in described
        table = kafkalab(
            "metadata-quorum", "--bootstrap-controller", bootstrap, "describe", "--replication"
        )
        assert table.splitlines()[0].split() == [
            "NodeId",
            "LogEndOffset",
            "Lag",
            "LastFetchTimestamp",
            "LastCaughtUpTimestamp",
            "Status",
        ]
        assert table.splitlines()[1].split()[-1] == "Leader"

        kafkalab("cluster", "kill", str(first[0]), "--dir", d)
        deadline = time.monotonic() + 60
        while True:
            now = leader_of(kafkalab("cluster", "status", "--dir", d))
            if now is not None and now[0] != first[0]:
                break
            assert time.monotonic() < deadline, "no new leader"
            time.sleep(0.5)
        assert now[1] > first[1]
        # the broker follows the new leader, and status says which controller it talks to
        status = kafkalab("cluster", "status", "--dir", d)
        while not re.search(rf"\nbroker\tcontroller\tepoch\tunreachable\n1\t{now[0]}\t", status):
            assert time.monotonic() < deadline, status
            time.sleep(0.5)
            status = kafkalab("cluster", "status", "--dir", d)
        # a broker and a controller cut one way, each way
        out = kafkalab("cluster", "cut", "1", str(now[0]), "--one-way", "--dir", d)
        assert f"controller {now[0]} no longer hears broker 1" in out
        out = kafkalab("cluster", "cut", str(now[0]), "1", "--one-way", "--dir", d)
        assert f"broker 1 no longer hears controller {now[0]}" in out
        status = kafkalab("cluster", "status", "--dir", d)
        assert re.search(rf"broker 1\t.*does not hear \[{now[0]}\]", status), status
        assert re.search(rf"controller {now[0]}\t.*does not hear \[1\]", status), status
        kafkalab("cluster", "heal", "--dir", d)
        kafkalab("cluster", "restart", str(first[0]), "--dir", d)
        out = kafkalab("cluster", "cut", "3002", "3003", "--dir", d)
        assert "controller 3003 no longer hears controller 3002" in out
        status = kafkalab("cluster", "status", "--dir", d)
        assert re.search(r"controller 3002\t.*does not hear \[3003\]", status), status
        kafkalab("cluster", "heal", "--dir", d)
        assert "does not hear" not in kafkalab("cluster", "status", "--dir", d)
        status = kafkalab("cluster", "status", "--dir", d)
        assert f"controller {first[0]}\t" in status and "running" in status
    finally:
        last = json.loads((tmp_path / "k" / "cluster.json").read_text())
        pids += [c["pid"] for c in last["controllers"].values()]  # the restarted one
        kafkalab("cluster", "down", "--dir", d)
    assert all(process_state(p) == ProcessState.DOWN for p in pids)
