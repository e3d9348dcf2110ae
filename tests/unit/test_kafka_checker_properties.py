"""Histories generated from a simulated correct log, polls at random positions: a
correct one has no anomalies at all, and one injected fault (an acknowledged value
dropped from every poll, two values reordered, one duplicated) gives exactly the
anomaly it should."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kafkalab.cluster.checker import OK, Assign, History, Op, Poll, Send, check


@dataclass
class Entry:
    offset: int
    value: bytes
    producer: str | None
    dropped: bool = False


@dataclass
class Simulation:
    """A log per key, and the events clients saw of it."""

    log: dict[tuple, list[Entry]] = field(default_factory=dict)
    events: list[tuple] = field(
        default_factory=list
    )  # ("send", p, key, entry) / ("poll", c, reads)
    next_offset: dict[tuple, int] = field(default_factory=dict)

    def append(self, key: tuple, value: bytes, producer: str | None, gap: bool) -> Entry:
        entry = Entry(self.next_offset[key], value, producer)
        self.next_offset[key] += 2 if gap else 1  # a gap: a control record's offset
        self.log[key].append(entry)
        return entry

    def history(self) -> History:
        h = History()
        for t, event in enumerate(self.events):
            if event[0] == "send":
                _, p, key, entry = event
                op = Op(p, OK, [Send(key, entry.value, entry.offset)])
            elif event[0] == "assign":
                op = Op(event[1], OK, [Assign(tuple(self.log))])
            else:
                _, c, positions = event
                reads = {}
                for key, (start, end) in positions.items():
                    pairs = [(e.offset, e.value) for e in self.log[key][start:end] if not e.dropped]
                    if pairs:
                        reads[key] = pairs
                op = Op(c, OK, [Poll(reads)])
            op.invoke, op.complete = float(t), t + 0.5
            h.add(op)
        return h


@st.composite
def simulations(draw) -> Simulation:
    keys = [("t", p) for p in range(draw(st.integers(1, 3)))]
    sim = Simulation({k: [] for k in keys}, [], {k: 0 for k in keys})
    producers = [f"p{i}" for i in range(draw(st.integers(1, 2)))]
    consumers = [f"c{i}" for i in range(draw(st.integers(1, 2)))]
    position = {(c, k): 0 for c in consumers for k in keys}
    for c in consumers:
        sim.events.append(("assign", c))
    n = 0
    for step in draw(st.lists(st.booleans(), min_size=2, max_size=30)):
        if step:
            key, p = draw(st.sampled_from(keys)), draw(st.sampled_from(producers))
            entry = sim.append(key, b"%d-%d" % (key[1], n), p, draw(st.booleans()))
            sim.events.append(("send", p, key, entry))
            n += 1
        else:
            c = draw(st.sampled_from(consumers))
            positions = {}
            for key in keys:
                start = position[(c, key)]
                end = start + draw(st.integers(0, len(sim.log[key]) - start))
                positions[key] = (start, end)
                position[(c, key)] = end
            sim.events.append(("poll", c, positions))
    return sim


def final_poll(sim: Simulation) -> None:
    """A reader that reads every key to its end, so nothing stays unseen."""
    sim.events.append(("assign", "final"))
    sim.events.append(("poll", "final", {k: (0, len(sim.log[k])) for k in sim.log}))


@settings(max_examples=150, deadline=None)
@given(simulations())
def test_a_correct_history_has_no_anomalies(sim):
    final_poll(sim)
    verdict = check(sim.history())
    assert verdict.anomalies == {} and verdict.valid, verdict.summary()


@settings(max_examples=150, deadline=None)
@given(simulations(), st.data())
def test_an_acknowledged_value_dropped_from_every_poll_is_a_lost_write(sim, data):
    candidates = [(k, i) for k, log in sim.log.items() for i in range(len(log) - 1)]
    assume(candidates)
    key, i = data.draw(st.sampled_from(candidates))
    lost = sim.log[key][i]
    lost.dropped = True
    final_poll(sim)
    verdict = check(sim.history())
    assert not verdict.valid
    assert [c["value"] for c in verdict.anomalies["lost-write"]] == [lost.value]
    assert verdict.anomalies["lost-write"][0]["offset"] == lost.offset
    assert [c["values"] for c in verdict.anomalies["unseen"]] == [[lost.value]]
    # Polls that read across the hole skipped it; nothing else is wrong.
    assert set(verdict.anomalies) <= {"lost-write", "unseen", "poll-skip", "int-poll-skip"}
    for name in ("poll-skip", "int-poll-skip"):
        assert all(c["skipped"] == [lost.value] for c in verdict.anomalies.get(name, []))


@settings(max_examples=150, deadline=None)
@given(simulations(), st.data())
def test_two_values_of_one_producer_swapped_in_the_log_are_a_nonmonotonic_send(sim, data):
    candidates = [
        (k, i)
        for k, log in sim.log.items()
        for i in range(len(log) - 1)
        if log[i].producer == log[i + 1].producer
    ]
    assume(candidates)
    key, i = data.draw(st.sampled_from(candidates))
    first, second = sim.log[key][i], sim.log[key][i + 1]
    first.offset, second.offset = second.offset, first.offset
    sim.log[key][i], sim.log[key][i + 1] = second, first
    final_poll(sim)
    verdict = check(sim.history())
    assert set(verdict.anomalies) == {"nonmonotonic-send"} and not verdict.valid
    (case,) = verdict.anomalies["nonmonotonic-send"]
    assert case["values"] == [first.value, second.value] and case["delta"] == -1
    assert case["process"] == first.producer


@settings(max_examples=150, deadline=None)
@given(simulations(), st.data())
def test_a_value_written_twice_is_a_duplicate(sim, data):
    candidates = [(k, i) for k, log in sim.log.items() for i in range(len(log))]
    assume(candidates)
    key, i = data.draw(st.sampled_from(candidates))
    original = sim.log[key][i]
    copy = sim.append(key, original.value, None, gap=False)
    final_poll(sim)
    verdict = check(sim.history())
    assert set(verdict.anomalies) == {"duplicate"} and not verdict.valid
    (case,) = verdict.anomalies["duplicate"]
    assert (case["key"], case["value"]) == (key, original.value)
    assert case["offsets"] == [original.offset, copy.offset]
