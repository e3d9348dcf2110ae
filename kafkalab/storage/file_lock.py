"""FileLock: one process at a time in a data directory (Kafka: `.lock`, FileLock).

Two brokers writing one partition's segment files would interleave batches and
break every invariant the storage keeps, so Kafka's LogManager takes an exclusive
lock on `<log dir>/.lock` at startup and holds it until shutdown ("Failed to
acquire lock on file .lock ... A Kafka instance in another process or thread is
using this directory."). The KRaft controller does the same for its metadata dir.

Invariant: while a LogManager (or controller) is open on a directory, no other
open file description holds the lock. The lock is flock(2), advisory and owned
by the open file: the OS drops it when the process dies, however it dies, so a
SIGKILLed broker never leaves a stale lock behind (the `.lock` file stays, empty).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from kafkalab.storage.errors import LogDirInUseError

LOCK_FILE = ".lock"


class FileLock:
    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / LOCK_FILE
        self._fd: int | None = None

    def lock(self) -> FileLock:
        """Take the lock or raise LogDirInUseError at once (never waits)."""
        if self._fd is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirInUseError(self.path.parent) from None
        self._fd = fd
        return self

    def unlock(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor releases the flock
            self._fd = None
