"""Checkpoint files: small text files a broker rewrites atomically to remember offsets.

Kafka's classes: org.apache.kafka.server.common.CheckpointFile,
OffsetCheckpointFile and LeaderEpochCheckpointFile. The format is text:

    0                 <- version
    2                 <- number of entries
    orders 0 1200     <- one entry per line, fields separated by one space
    orders 1 985

A log directory holds `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint` and `replication-offset-checkpoint` (entries
`topic partition offset`); a partition directory holds
`leader-epoch-checkpoint` (entries `epoch start_offset`).

Invariant: a reader sees either the old file or the new one, never a mix. We
write `<name>.tmp`, fsync it, rename it over the old file and fsync the
directory, as Kafka does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Generic, TypeVar

from kafkalab.storage import durability_ledger
from kafkalab.storage.errors import KafkaStorageError

T = TypeVar("T")

RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

CURRENT_VERSION = 0


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    durability_ledger.dir_synced(directory)


class CheckpointFile(Generic[T]):
    """A versioned list of entries, each formatted as one line."""

    def __init__(
        self,
        path: str | os.PathLike,
        fields: int,
        to_line: Callable[[T], str],
        from_fields: Callable[[list[str]], T],
    ) -> None:
        self.path = Path(path)
        self._fields = fields
        self._to_line = to_line
        self._from_fields = from_fields

    def write(self, entries: Iterable[T]) -> None:
        entries = list(entries)
        lines = [str(CURRENT_VERSION), str(len(entries))]
        lines += [self._to_line(e) for e in entries]
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            os.fsync(f.fileno())
            durability_ledger.file_synced(tmp, f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)

    def read(self) -> list[T]:
        """Entries in file order; [] when the file does not exist."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        lines = text.splitlines()

        def bad(why: str) -> KafkaStorageError:
            return KafkaStorageError(
                f"malformed checkpoint file {self.path}: {why}. Delete it to make the broker "
                "recover every log from its start"
            )

        if len(lines) < 2:
            raise bad("fewer than two header lines")
        if lines[0].strip() != str(CURRENT_VERSION):
            raise bad(f"unsupported version {lines[0]!r}")
        try:
            count = int(lines[1])
        except ValueError:
            raise bad(f"entry count {lines[1]!r} is not a number") from None
        body = lines[2:]
        if len(body) != count:
            raise bad(f"header says {count} entries, found {len(body)}")
        entries = []
        for number, line in enumerate(body, start=3):
            parts = line.split(" ")
            if len(parts) != self._fields:
                raise bad(f"line {number} {line!r} should have {self._fields} fields")
            try:
                entries.append(self._from_fields(parts))
            except ValueError:
                raise bad(f"line {number} {line!r} has a non-numeric field") from None
        return entries


class OffsetCheckpointFile:
    """`topic partition offset` entries, read as a dict {(topic, partition): offset}."""

    def __init__(self, path: str | os.PathLike) -> None:
        self._file: CheckpointFile[tuple[str, int, int]] = CheckpointFile(
            path,
            3,
            lambda e: f"{e[0]} {e[1]} {e[2]}",
            lambda f: (f[0], int(f[1]), int(f[2])),
        )
        self.path = self._file.path

    def write(self, offsets: dict[tuple[str, int], int]) -> None:
        self._file.write((t, p, o) for (t, p), o in sorted(offsets.items()))

    def read(self) -> dict[tuple[str, int], int]:
        return {(t, p): o for t, p, o in self._file.read()}


class LeaderEpochCheckpointFile:
    """`epoch start_offset` entries of one partition (KIP-101), in epoch order."""

    def __init__(self, path: str | os.PathLike) -> None:
        self._file: CheckpointFile[tuple[int, int]] = CheckpointFile(
            path, 2, lambda e: f"{e[0]} {e[1]}", lambda f: (int(f[0]), int(f[1]))
        )
        self.path = self._file.path

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        self._file.write(entries)

    def read(self) -> list[tuple[int, int]]:
        return self._file.read()
