"""CoordinatorTimer against a model: a dict of key -> (deadline, order scheduled)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkalab.coordinator.coordinator_timer import CoordinatorTimer

KEYS = st.sampled_from(["a", "b", "c", ("hb", "g", "m1"), ("join", "g")])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("schedule"), KEYS, st.integers(0, 50)),
        st.tuples(st.just("cancel"), KEYS),
        st.tuples(st.just("pop"), st.integers(0, 60)),
    ),
    max_size=60,
)


@given(OPS)
def test_the_timer_fires_each_live_deadline_once_earliest_first(ops):
    timer, model, order = CoordinatorTimer(), {}, 0
    for op in ops:
        if op[0] == "schedule":
            timer.schedule(op[1], op[2])
            model[op[1]] = (op[2], order)
            order += 1
        elif op[0] == "cancel":
            timer.cancel(op[1])
            model.pop(op[1], None)
        else:
            now = op[1]
            due = sorted((at, seq, key) for key, (at, seq) in model.items() if at <= now)
            fired = []
            while (got := timer.pop_due(now)) is not None:
                fired.append(got)
            assert fired == [(at, key) for at, _, key in due]
            for _, _, key in due:
                del model[key]
        assert timer.next_deadline_ms() == min((at for at, _ in model.values()), default=None)
        assert all((key in timer) == (key in model) for key in ["a", "b", "c"])


def test_a_rescheduled_key_fires_once_at_its_new_deadline():
    timer = CoordinatorTimer()
    timer.schedule("session", 100)
    timer.schedule("session", 300)  # a heartbeat moved it
    assert timer.pop_due(200) is None
    assert timer.pop_due(300) == (300, "session") and timer.pop_due(10_000) is None
