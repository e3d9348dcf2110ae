"""One process at a time in a data directory: the `.lock` file (Kafka's FileLock)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from kafkalab.storage.errors import LogDirInUseError
from kafkalab.storage.file_lock import LOCK_FILE, FileLock
from kafkalab.storage.log_manager import LogManager


def test_a_second_log_manager_on_the_same_directory_is_refused_until_shutdown(tmp_path):
    first = LogManager(tmp_path / "logs")
    first.get_or_create_log("orders", 0)
    with pytest.raises(LogDirInUseError) as refused:
        LogManager([tmp_path / "other", tmp_path / "logs"])
    assert "Failed to acquire lock on file .lock" in str(refused.value)
    assert str(tmp_path / "logs") in str(refused.value)
    # The refused manager let go of the directory it had already locked.
    FileLock(tmp_path / "other").lock().unlock()
    first.shutdown()
    second = LogManager(tmp_path / "logs")
    assert second.get_log("orders", 0) is not None
    second.shutdown()


def test_the_lock_goes_with_a_killed_process(tmp_path):
    """flock belongs to the open file: SIGKILL leaves the .lock file but no lock."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from kafkalab.storage.file_lock import FileLock; "
            "FileLock(sys.argv[1]).lock(); print('locked', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(LogDirInUseError):
            FileLock(tmp_path).lock()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
    assert (tmp_path / LOCK_FILE).exists()
    FileLock(tmp_path).lock().unlock()


def test_a_broker_on_a_directory_in_use_exits_with_the_reason(tmp_path):
    (tmp_path / "server.properties").write_text(
        f"node.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs={tmp_path / 'data'}\n"
    )
    lock = FileLock(tmp_path / "data").lock()
    try:
        run = subprocess.run(
            [sys.executable, "-m", "kafkalab", "broker", str(tmp_path / "server.properties")],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        lock.unlock()
    assert run.returncode == 1, run.stderr
    assert "another kafkalab broker or controller is using this directory" in run.stderr
