"""Both coordinators' shards implement runtime.CoordinatorShard, checked at run time.

A typed assignment (`shard: CoordinatorShard[...] = GroupCoordinator()`) checks
nothing when the tests run, and a runtime_checkable isinstance only looks at
names. So: every method the protocol declares exists on the shard with the
protocol's parameters first, in order, of the same kind and annotated with the
same types (the record type for the protocol's type variable), the same return
type, and any further parameter optional (callable as the protocol says).
"""

from __future__ import annotations

import inspect
import typing

import pytest

from kafkalab.coordinator.group import GroupCoordinator
from kafkalab.coordinator.group.group_coordinator import GroupCoordinatorRecord
from kafkalab.coordinator.runtime import CoordinatorShard
from kafkalab.coordinator.transaction import TransactionCoordinatorShard, TransactionRecord

PROTOCOL_METHODS = sorted(
    name
    for name, value in vars(CoordinatorShard).items()
    if inspect.isfunction(value) and not name.startswith("_")
)


def _hints(function, record_type: type) -> dict[str, object]:
    """The function's annotations as types, the protocol's type variable as `record_type`."""
    hints = typing.get_type_hints(function)
    return {
        name: record_type if isinstance(hint, typing.TypeVar) else hint
        for name, hint in hints.items()
    }


def mismatches(shard_type: type, record_type: type) -> list[str]:
    """How `shard_type` fails to implement CoordinatorShard[record_type] ([]: it does)."""
    found = []
    for name in PROTOCOL_METHODS:
        implementation = getattr(shard_type, name, None)
        if not inspect.isfunction(implementation):
            found.append(f"{name}: missing")
            continue
        wanted = _hints(getattr(CoordinatorShard, name), record_type)
        given = _hints(implementation, record_type)
        expected = list(inspect.signature(getattr(CoordinatorShard, name)).parameters.values())
        actual = list(inspect.signature(implementation).parameters.values())
        for i, p in enumerate(expected):
            q = actual[i] if i < len(actual) else None
            if q is None or (q.name, q.kind) != (p.name, p.kind):
                found.append(f"{name}: parameter {i} is {q}, the protocol's is {p}")
            elif p.name != "self" and given.get(q.name) != wanted.get(p.name):
                found.append(f"{name}({p.name}): {given.get(q.name)} != {wanted.get(p.name)}")
        for q in actual[len(expected) :]:
            if q.default is inspect.Parameter.empty and q.kind not in (
                inspect.Parameter.VAR_POSITIONAL,
                inspect.Parameter.VAR_KEYWORD,
            ):
                found.append(f"{name}: extra parameter {q.name} has no default")
        if given.get("return") != wanted.get("return"):
            found.append(f"{name}: returns {given.get('return')}, not {wanted.get('return')}")
    return found


def test_the_protocol_declares_the_shard_methods():
    assert PROTOCOL_METHODS == [
        "on_loaded",
        "on_unloaded",
        "replay",
        "replay_end_transaction_marker",
    ]


@pytest.mark.parametrize(
    ("shard_type", "record_type"),
    [
        (GroupCoordinator, GroupCoordinatorRecord),
        (TransactionCoordinatorShard, TransactionRecord),
    ],
)
def test_the_shards_implement_the_protocol(shard_type, record_type):
    assert mismatches(shard_type, record_type) == []


class _Renamed:
    def replay(self, rec: GroupCoordinatorRecord) -> None: ...

    def replay_end_transaction_marker(self, producer_id: int, committed: bool) -> None: ...

    def on_loaded(self, partition: int, now_ms: str) -> None: ...

    def on_unloaded_partition(self, partition: int) -> None: ...


def test_the_check_finds_a_missing_method_a_renamed_parameter_and_a_wrong_type():
    assert sorted(
        m.split(":")[0].split("(")[0] for m in mismatches(_Renamed, GroupCoordinatorRecord)
    ) == [
        "on_loaded",
        "on_unloaded",
        "replay",
    ]
