"""CoordinatorRuntimeCore: the partitions, pending appends and timers both
coordinators share (kafkalab.coordinator.runtime)."""

import enum

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalab.coordinator.runtime import (
    VALID_PREVIOUS_STATES,
    CoordinatorContext,
    CoordinatorResult,
    CoordinatorRuntimeCore,
    CoordinatorState,
    IllegalCoordinatorStateTransition,
    request_handle,
)
from kafkalab.errors import Errors


class Kind(enum.Enum):
    SYNC = "sync"
    OFFSETS = "offsets"


Core = CoordinatorRuntimeCore[Kind, str, tuple[str, ...]]


def test_a_partition_is_served_only_once_loaded_and_until_resigned():
    core = Core()
    assert core.status(3) is Errors.NOT_COORDINATOR
    assert core.begin_load(3, epoch=1)
    assert core.status(3) is Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert core.complete_load(3, epoch=1)
    assert core.status(3) is None and core.owned == {3}
    assert core.resign(3, epoch=2)
    assert core.status(3) is Errors.NOT_COORDINATOR and core.owned == set()


def test_a_load_finishing_after_the_resignation_is_stale():
    """The late-load rule: the records read for a term that has ended must not be
    served (the old group side re-claimed the partition whatever happened meanwhile)."""
    core = Core()
    core.begin_load(0, epoch=1)
    core.resign(0, epoch=1)
    assert not core.complete_load(0)
    assert core.status(0) is Errors.NOT_COORDINATOR


def test_a_load_of_an_older_election_is_stale():
    core = Core()
    core.begin_load(0, epoch=1)
    core.begin_load(0, epoch=2)  # re-elected before the first load finished
    assert not core.complete_load(0, epoch=1)
    assert core.status(0) is Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert core.complete_load(0, epoch=2)
    assert not core.complete_load(0, epoch=2)  # once only
    assert core.status(0) is None


def test_a_stale_epoch_changes_nothing():
    core = Core()
    core.begin_load(0, epoch=5)
    core.complete_load(0)
    assert not core.resign(0, epoch=4)  # an older resignation arriving late
    assert not core.begin_load(0, epoch=3)
    assert core.status(0) is None and core.contexts[0].epoch == 5


def test_after_close_nothing_is_served_loaded_or_timed():
    core = Core(range(3))
    core.schedule(("x",), 10)
    core.add_append(Kind.SYNC, 1, "r", "data")
    core.close()
    dropped = core.drop_appends(None)  # the coordinator answers them
    assert [(a.kind, a.request) for a in dropped] == [(Kind.SYNC, "r")]
    assert [core.status(p) for p in range(3)] == [Errors.COORDINATOR_NOT_AVAILABLE] * 3
    assert not core.begin_load(0, epoch=9)
    assert core.next_deadline_ms() is None
    core.schedule_if_absent(("periodic",), 5)
    assert core.next_deadline_ms() is None


def test_the_transition_table_refuses_what_it_does_not_list():
    assert CoordinatorState.LOADING in VALID_PREVIOUS_STATES[CoordinatorState.ACTIVE]
    context = CoordinatorContext(0)
    with pytest.raises(IllegalCoordinatorStateTransition):
        context.transition_to(CoordinatorState.ACTIVE)  # never loaded
    for state in CoordinatorState:
        for previous in CoordinatorState:
            c = CoordinatorContext(0, previous)
            if previous in VALID_PREVIOUS_STATES[state]:
                c.transition_to(state)
                assert c.state is state
            else:
                with pytest.raises(IllegalCoordinatorStateTransition):
                    c.transition_to(state)


_events = st.lists(
    st.tuples(
        st.sampled_from(["begin", "complete", "complete_epoch", "resign", "resign_epoch"]),
        st.integers(0, 2),
        st.integers(0, 4),
    ),
    max_size=40,
)


@given(_events)
def test_served_iff_the_newest_election_finished_loading_and_was_not_resigned(events):
    """A model of the rule in a few lines: per partition the newest epoch seen, and
    whether its load began, finished, or was ended by a resignation."""
    core = Core()
    model: dict[int, tuple[int, str]] = {}  # partition -> (epoch, "loading"|"active"|"closed")
    for op, partition, epoch in events:
        seen, state = model.get(partition, (-1, "initial"))
        if op == "begin":
            ok = core.begin_load(partition, epoch)
            assert ok == (epoch >= seen)
            if ok:
                model[partition] = (epoch, "loading")
        elif op in ("complete", "complete_epoch"):
            asked = epoch if op == "complete_epoch" else None
            ok = core.complete_load(partition, asked)
            assert ok == (state == "loading" and asked in (None, seen))
            if ok:
                model[partition] = (seen, "active")
        else:
            asked = epoch if op == "resign_epoch" else None
            ok = core.resign(partition, asked)
            assert ok == (asked is None or asked >= seen)
            if ok:
                model[partition] = (max(seen, -1 if asked is None else asked), "closed")
        for p in range(3):
            expected = {
                "loading": Errors.COORDINATOR_LOAD_IN_PROGRESS,
                "active": None,
            }.get(model.get(p, (-1, "initial"))[1], Errors.NOT_COORDINATOR)
            assert core.status(p) is expected
        assert core.owned == {p for p, (_, s) in model.items() if s == "active"}
        assert core.loading == {p for p, (_, s) in model.items() if s == "loading"}


def test_pending_appends_are_taken_once_and_dropped_per_partition():
    core = Core()
    a = core.add_append(Kind.SYNC, 0, "join-1", "g1")
    b = core.add_append(Kind.OFFSETS, 1, None, "g2")
    c = core.add_append(Kind.OFFSETS, 0, "commit-7", "g3")
    assert len({a, b, c}) == 3
    assert core.next_sequence() > c  # load order stays below later appends
    taken = core.take_append(b)
    assert taken is not None and (taken.kind, taken.partition, taken.payload) == (
        Kind.OFFSETS,
        1,
        "g2",
    )
    assert core.take_append(b) is None
    assert [p.append_id for p in core.drop_appends(0)] == [a, c]
    assert core.take_append(a) is None and core.appends == {}


def test_due_timers_fire_earliest_first_including_those_scheduled_while_firing():
    core = Core()
    fired: list[tuple[tuple[str, ...], int]] = []

    def fire(key: tuple[str, ...], at: int) -> None:
        fired.append((key, at))
        if key == ("periodic",):
            core.schedule(key, at + 10)  # re-arms itself, as offset expiry does

    core.schedule(("b",), 7)
    core.schedule(("a",), 5)
    core.schedule(("gone",), 6)
    core.cancel(("gone",))
    core.schedule_if_absent(("periodic",), 3)
    core.schedule_if_absent(("periodic",), 1)  # already armed: unchanged
    assert core.is_scheduled(("periodic",)) and not core.is_scheduled(("gone",))
    core.fire_due(25, fire)
    assert fired == [
        (("periodic",), 3),
        (("a",), 5),
        (("b",), 7),
        (("periodic",), 13),
        (("periodic",), 23),
    ]
    assert core.next_deadline_ms() == 33


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 100)), max_size=30), st.integers(0, 100)
)
def test_fire_due_fires_exactly_the_due_deadlines_in_order(schedules, now):
    core = Core()
    latest: dict[str, int] = {}
    for key, at in schedules:
        core.schedule((str(key),), at)
        latest[str(key)] = at
    fired: list[tuple[int, str]] = []
    core.fire_due(now, lambda key, at: fired.append((at, key[0])))
    assert [at for at, _ in fired] == sorted(at for at, _ in fired)
    assert sorted(fired) == sorted((at, k) for k, at in latest.items() if at <= now)
    rest = [at for at in latest.values() if at > now]
    assert core.next_deadline_ms() == (min(rest) if rest else None)


def test_request_handles_and_results():
    assert request_handle("mine") == "mine"
    first, second = request_handle(None), request_handle(None)
    assert first != second and first[0] == "request"
    result = CoordinatorResult[bytes, str](records=(b"k",), response="ok")
    assert result.records == (b"k",) and result.response == "ok"
    assert CoordinatorResult[bytes, str]().response is None
