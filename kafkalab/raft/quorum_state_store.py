"""The `quorum-state` file: the epoch, the leader and the vote a voter must not forget.

Kafka's classes: org.apache.kafka.raft.FileQuorumStateStore, ElectionState and the
generated QuorumStateData (raft/src/main/resources/common/message/QuorumStateData.json).
The file sits in the metadata log's directory (`__cluster_metadata-0/quorum-state`)
and holds one line of JSON, as Kafka's QuorumStateDataJsonConverter writes it, with
the `data_version` Kafka appends:

    {"clusterId":"","leaderId":-1,"leaderEpoch":3,"votedId":2,"appliedOffset":0,
     "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}

(version 0: a static voter set, kraft.version 0; version 1, written by Kafka with
KIP-853's dynamic voters, drops clusterId, appliedOffset and currentVoters and adds
votedDirectoryId: we read it and write version 0.)

The rule this file exists for: a vote is durable before it is granted. Every
durable transition of QuorumState writes the file here, fsynced, before the
handler returns the response that grants the vote; a voter that restarts reads
it back and cannot vote twice in an epoch, nor become leader again in the epoch it
led (KAFKA-10527). The write is Kafka's: `quorum-state.tmp`, fsync, rename over
the file, fsync the directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kafkalab.raft.errors import QuorumStateStoreError
from kafkalab.storage import durability_ledger
from kafkalab.storage.checkpoint_file import fsync_dir

QUORUM_STATE_FILE = "quorum-state"  # Kafka: FileQuorumStateStore.DEFAULT_FILE_NAME
DATA_VERSION = "data_version"
NOT_VOTED = -1
UNKNOWN_LEADER = -1
NO_DIRECTORY_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid.ZERO_UUID as Kafka's JSON writes it
LOWEST_SUPPORTED_VERSION = 0
HIGHEST_SUPPORTED_VERSION = 1


@dataclass(frozen=True)
class ElectionState:
    """What a voter persists (Kafka: ElectionState): its epoch, the leader it knows in
    that epoch (or -1), the candidate it voted for in that epoch (or -1), the voters."""

    epoch: int
    leader_id: int = UNKNOWN_LEADER
    voted_id: int = NOT_VOTED
    voters: frozenset[int] = field(default_factory=frozenset)

    @property
    def has_leader(self) -> bool:
        return self.leader_id != UNKNOWN_LEADER

    @property
    def has_voted(self) -> bool:
        return self.voted_id != NOT_VOTED

    def is_leader(self, replica_id: int) -> bool:
        return self.leader_id == replica_id

    def is_voted_candidate(self, replica_id: int) -> bool:
        return self.voted_id == replica_id

    def to_quorum_state_data(self, version: int = 0) -> dict[str, object]:
        """The JSON object Kafka writes for this state, `data_version` included, keys in
        Kafka's order."""
        data: dict[str, object] = {}
        if version == 0:
            data["clusterId"] = ""
        data["leaderId"] = self.leader_id
        data["leaderEpoch"] = self.epoch
        data["votedId"] = self.voted_id
        if version == 0:
            data["appliedOffset"] = 0
            data["currentVoters"] = [{"voterId": v} for v in sorted(self.voters)]
        elif version == 1:
            data["votedDirectoryId"] = NO_DIRECTORY_ID
        else:
            raise ValueError(f"quorum-state data_version {version} is not 0 or 1")
        data[DATA_VERSION] = version
        return data

    @classmethod
    def from_quorum_state_data(
        cls, data: dict[str, object], voters: Iterable[int] = ()
    ) -> ElectionState:
        """Read Kafka's JSON object (version 0 or 1); `voters` stands in for the
        voter set when the file (version 1) does not name it."""
        raw_voters = data.get("currentVoters")
        if isinstance(raw_voters, list):
            voters = [int(v["voterId"]) for v in raw_voters if isinstance(v, dict)]

        def integer(name: str, default: int) -> int:
            value = data.get(name, default)
            if not isinstance(value, int):
                raise ValueError(f"quorum-state field {name} is {value!r}, not an integer")
            return value

        return cls(
            epoch=integer("leaderEpoch", -1),
            leader_id=integer("leaderId", UNKNOWN_LEADER),
            voted_id=integer("votedId", NOT_VOTED),
            voters=frozenset(voters),
        )


class QuorumStateStore(Protocol):
    """Where a voter's ElectionState lives (Kafka: QuorumStateStore)."""

    def read_election_state(self) -> ElectionState | None:
        """The last state written, or None if none ever was."""
        ...

    def write_election_state(self, state: ElectionState) -> None:
        """Make `state` durable before returning."""
        ...

    def clear(self) -> None: ...


class FileQuorumStateStore:
    """The `quorum-state` file, written as Kafka writes it (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str], version: int = 0) -> None:
        if version not in (0, 1):
            raise ValueError(f"quorum-state data_version {version} is not 0 or 1")
        self.path = Path(path)
        self.version = version
        self.writes = 0  # how many states were made durable (a lab counts the fsyncs)

    @classmethod
    def in_directory(cls, directory: str | os.PathLike[str]) -> FileQuorumStateStore:
        return cls(Path(directory) / QUORUM_STATE_FILE)

    def read_election_state(self) -> ElectionState | None:
        if not self.path.exists():
            return None
        try:
            line = self.path.read_text(encoding="utf-8").splitlines()[0]
            data = json.loads(line)
        except (OSError, IndexError, ValueError) as e:
            raise QuorumStateStoreError(f"cannot read {self.path}: {e}") from e
        if not isinstance(data, dict) or DATA_VERSION not in data:
            raise QuorumStateStoreError(f"{self.path} holds no object with {DATA_VERSION}")
        version = data[DATA_VERSION]
        if not isinstance(version, int) or not (
            LOWEST_SUPPORTED_VERSION <= version <= HIGHEST_SUPPORTED_VERSION
        ):
            raise QuorumStateStoreError(
                f"{self.path}: data_version ({version}) is not within the min "
                f"({LOWEST_SUPPORTED_VERSION}) and max ({HIGHEST_SUPPORTED_VERSION}) supported"
            )
        try:
            return ElectionState.from_quorum_state_data(data)
        except ValueError as e:
            raise QuorumStateStoreError(f"cannot read {self.path}: {e}") from e

    def write_election_state(self, state: ElectionState) -> None:
        line = json.dumps(state.to_quorum_state_data(self.version), separators=(",", ":"))
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            tmp.unlink(missing_ok=True)
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
                durability_ledger.file_synced(tmp, f.fileno())
            os.replace(tmp, self.path)
            fsync_dir(self.path.parent)
        except OSError as e:
            raise QuorumStateStoreError(f"cannot write {self.path}: {e}") from e
        finally:
            tmp.unlink(missing_ok=True)
        self.writes += 1

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
        self.path.with_name(self.path.name + ".tmp").unlink(missing_ok=True)


class MemoryQuorumStateStore:
    """A store that keeps the last state written in memory (Kafka's tests:
    MockQuorumStateStore): what survives a simulated restart in the hypothesis
    tests, where an fsync per vote would cost time and teach nothing more."""

    def __init__(self) -> None:
        self.state: ElectionState | None = None
        self.writes = 0

    def read_election_state(self) -> ElectionState | None:
        return self.state

    def write_election_state(self, state: ElectionState) -> None:
        self.state = state
        self.writes += 1

    def clear(self) -> None:
        self.state = None
