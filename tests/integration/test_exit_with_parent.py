"""A broker whose starter dies stops, even when its data directory went first.

BrokerProcess sets KAFKALAB_EXIT_WITH_PID, so a killed notebook kernel leaves no
broker behind. A notebook keeps its cluster in a TemporaryDirectory, which the
dying kernel removes: the broker's graceful stop then fails writing its
checkpoints, and before this it stayed up for good (found on one CPU, where a
lab 05 cell failed and its kernel was shut down).
"""

import os
import shutil
import subprocess
import sys
import time

import pytest

from kafkalab.server.broker import EXIT_WITH_PID

pytestmark = pytest.mark.integration


def _broker_under(parent_pid: int, data, tmp_path) -> subprocess.Popen:
    config = tmp_path / "broker.properties"
    config.write_text(f"node.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs={data}\n")
    out = open(tmp_path / "broker.out", "w")
    broker = subprocess.Popen(
        [sys.executable, "-m", "kafkalab", "broker", str(config)],
        stdout=out,
        stderr=subprocess.STDOUT,
        env={**os.environ, EXIT_WITH_PID: str(parent_pid)},
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while " listening on " not in (tmp_path / "broker.out").read_text():
        assert time.monotonic() < deadline and broker.poll() is None, "the broker did not start"
        time.sleep(0.1)
    return broker


@pytest.mark.parametrize("data_dir_removed", [False, True])
def test_a_broker_stops_when_its_starter_dies(tmp_path, data_dir_removed) -> None:
    parent = subprocess.Popen(["sleep", "120"])
    data = tmp_path / "data"
    broker = _broker_under(parent.pid, data, tmp_path)
    try:
        if data_dir_removed:
            shutil.rmtree(data)
        parent.kill()
        parent.wait()
        broker.wait(timeout=30)  # the watchdog looks once a second; a stop gets 15 s
        assert broker.returncode == (1 if data_dir_removed else 0)
    finally:
        parent.kill()
        if broker.poll() is None:
            broker.kill()
            broker.wait()
