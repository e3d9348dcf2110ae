"""A real three-broker cluster (controller + brokers as processes): acks=all writes
survive a SIGKILLed leader, and a paused follower leaves and rejoins the ISR."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import controller_isr, controller_isr_history, partition_state, wait_until

from kafkalab.cluster import LocalCluster


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={"replica.lag.time.max.ms": "2000"},
    ) as c:
        yield c


def test_acks_all_survives_a_killed_leader(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic("safe", 1, 3)]).values():
        future.result(10)
    wait_until(lambda: partition_state(cluster.bootstrap_servers, "safe")[1] == [1, 2, 3])
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 30000,
        }
    )
    acked = []

    def on_delivery(err, msg):
        if err is None:
            acked.append(msg.value())

    for i in range(200):
        producer.produce("safe", value=b"before-%d" % i, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    leader, _ = partition_state(cluster.bootstrap_servers, "safe")
    cluster.kill(leader)
    new_leader = wait_until(
        lambda: (lambda s: s[0] if s[0] not in (leader, -1) else None)(
            partition_state(cluster.bootstrap_servers, "safe")
        )
    )
    assert new_leader != leader
    for i in range(100):
        producer.produce("safe", value=b"after-%d" % i, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    del producer
    assert len(acked) == 300
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "check",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition("safe", 0, 0)])
        got = []
        deadline = time.time() + 30
        while len(got) < 300 and time.time() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        consumer.close()
    assert got == acked  # every acknowledged record, in order, nothing else


def test_a_paused_follower_leaves_and_rejoins_the_isr(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic("isr", 1, 3)]).values():
        future.result(10)
    leader, isr = wait_until(
        lambda: (lambda s: s if s[1] == [1, 2, 3] else None)(
            partition_state(cluster.bootstrap_servers, "isr")
        )
    )
    follower = next(b for b in isr if b != leader)
    cluster.brokers[follower].pause()  # SIGSTOP
    try:
        producer = Producer(
            {"bootstrap.servers": cluster.brokers[leader].bootstrap_servers, "acks": "1"}
        )
        for i in range(20):
            producer.produce("isr", value=b"%d" % i)
            producer.flush(10)
            time.sleep(0.2)
        wait_until(lambda: follower not in controller_isr(cluster, "isr"))
        del producer
    finally:
        cluster.brokers[follower].resume()  # SIGCONT
    wait_until(lambda: follower in controller_isr(cluster, "isr"), timeout=60)


def test_cluster_command_line_up_faults_and_down(tmp_path):
    import subprocess
    import sys

    def run(*args, timeout=120):
        return subprocess.run(
            [sys.executable, "-m", "kafkalab", "cluster", *args, "--dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    up = run("up", "--brokers", "2")
    try:
        assert up.returncode == 0, up.stderr
        assert up.stdout.splitlines()[-1].startswith("bootstrap.servers=127.0.0.1:")
        again = run("up", "--brokers", "2")  # would orphan the running processes
        assert again.returncode == 1 and "already running" in again.stderr
        assert run("stop", "2").returncode == 0
        assert "broker 2\t" in run("status").stdout and "paused" in run("status").stdout
        assert run("continue", "2").returncode == 0
        assert run("kill", "1").returncode == 0
        status = run("status").stdout.splitlines()
        assert any(line.startswith("broker 1") and line.endswith("down") for line in status)
        assert run("restart", "1").returncode == 0
        assert run("power-failure", "2").returncode == 0
        assert run("restart", "2").returncode == 0
        cut = run("cut", "1", "2", "--one-way")
        assert cut.stdout.strip() == "broker 2 no longer hears broker 1"
        assert "broker 2\t" in run("status").stdout and "does not hear [1]" in run("status").stdout
        assert run("heal").returncode == 0
        assert run("cut", "1", "9").returncode == 1  # no broker 9
        processes = run("status").stdout.split("\n\n")[0].splitlines()
        assert len(processes) == 3 and all(line.endswith("running") for line in processes)
    finally:
        down = run("down")
    assert down.returncode == 0 and not (tmp_path / "cluster.json").exists()
    leftovers = subprocess.run(
        ["pgrep", "-f", f"kafkalab (broker|controller) {tmp_path}"], capture_output=True, text=True
    )
    assert leftovers.stdout == ""


def test_power_failure_loses_unflushed_data_and_replication_brings_it_back(cluster):
    """acks=all records are on every ISR member's page cache but not fsynced (Kafka
    leaves flushing to the OS). A power cut on a follower destroys its copy; the
    follower recovers, truncates and fetches everything again from the leader."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic("power", 1, 3)]).values():
        future.result(10)
    leader, _ = wait_until(
        lambda: (lambda s: s if s[1] == [1, 2, 3] else None)(
            partition_state(cluster.bootstrap_servers, "power")
        )
    )
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(100):
        producer.produce("power", value=b"%d" % i)
    assert producer.flush(30) == 0
    del producer
    follower = next(b for b in (1, 2, 3) if b != leader)
    isr_changes_before = len(controller_isr_history(cluster, "power"))
    cut = cluster.power_failure(follower)
    assert cut["power-0"] > 0  # the follower's unflushed records are gone from its disk
    cluster.restart(follower)  # re-registering fences it: it leaves the ISR...
    # ...and rejoins once it has fetched everything again (AlterPartition). It may be
    # back already (it catches up fast): the controller's log shows both steps.
    wait_until(lambda: follower in controller_isr(cluster, "power"), timeout=60)
    since = controller_isr_history(cluster, "power")[isr_changes_before:]
    assert any(follower not in isr for isr in since), since
    # Only the broker that lost its disk survives: it must lead with all the data.
    for other in (1, 2, 3):
        if other != follower:
            cluster.kill(other)
    survivor = cluster.brokers[follower].bootstrap_servers
    wait_until(lambda: partition_state(survivor, "power")[0] == follower, timeout=60)
    consumer = Consumer(
        {
            "bootstrap.servers": survivor,
            "group.id": "p",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition("power", 0, 0)])
        got = []
        deadline = time.time() + 30
        while len(got) < 100 and time.time() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        consumer.close()
    assert got == [b"%d" % i for i in range(100)]


def test_brokers_stop_when_the_process_that_started_them_is_killed(tmp_path):
    """A notebook kernel or test runner that dies (SIGKILL, no cleanup) must not
    leave its brokers running: they watch the process that started them."""
    import os
    import signal
    import subprocess
    import sys

    script = (
        "import sys, time\n"
        "from kafkalab.cluster import LocalCluster\n"
        f"c = LocalCluster(brokers=1, base_dir={str(tmp_path)!r}).start()\n"
        "print(' '.join(str(p.process.pid) for p in [c.controller, *c.brokers.values()]), flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2
        parent.send_signal(signal.SIGKILL)
        parent.wait()

        def gone(pid):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            return False

        wait_until(lambda: all(gone(p) for p in pids), timeout=30)
    finally:
        parent.kill()
