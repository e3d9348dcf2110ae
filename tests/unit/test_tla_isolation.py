"""Evaluation does not depend on what the process evaluated before: no cache shared
between evaluations may confuse FALSE/TRUE with 0/1, which Python equates (also inside
tuples, sets and records)."""

from __future__ import annotations

import os

from kafkalab.specs.tla import load_module

HERE = os.path.join(os.path.dirname(__file__), "tla")


def kinds(states) -> set:
    """The Python types of the leaves of ``states`` (dicts of x, y, r)."""
    out = set()
    for st in states:
        out.add(type(st["x"]))
        out.update(type(v) for v in st["y"])
        out.add(type(st["r"].d["a"]))
    return out


def walk(path: str, consts: dict) -> tuple[list, list, object]:
    mod = load_module(path)
    inits = mod.initial_states("Init", consts)
    succs = [t for s in inits for _, t in mod.successors(s, "Next", consts)]
    return inits, succs, mod.evaluate("Pick", consts)


def test_booleans_after_integers_in_one_process():
    # Bits first: its sets {0, 1}, {<<0, 1>>, <<1, 0>>}, {[a |-> 0], [a |-> 1]} are
    # enumerated (in canonical order) before Flags's equal-in-Python boolean sets.
    inits, succs, pick = walk(os.path.join(HERE, "Bits.tla"), {"C": 0})
    assert kinds(inits) == kinds(succs) == {int}
    assert pick == 0 and type(pick) is int
    inits, succs, pick = walk(os.path.join(HERE, "Flags.tla"), {"C": False})
    assert len(inits) == 8
    assert kinds(inits) == kinds(succs) == {bool}
    assert pick is False
    # and back: the integers stay integers
    inits, succs, pick = walk(os.path.join(HERE, "Bits.tla"), {"C": 0})
    assert kinds(inits) == kinds(succs) == {int}
    assert type(pick) is int


def test_constants_false_and_zero_are_different_instances():
    mod = load_module(os.path.join(HERE, "Flags.tla"))
    assert mod.evaluate("C", {"C": 0}) == 0
    assert mod.evaluate("C", {"C": False}) is False
    assert mod.evaluate("C = FALSE", {"C": False}) is True
