"""ITF traces: the checker's counterexample survives a write/read round trip, values map
to the ITF encodings, and files as Apalache writes them are read."""

from __future__ import annotations

import json
import os

import pytest

from kafkalab.specs.tla import (
    ItfError,
    check,
    make_fn,
    read_itf,
    value_from_itf,
    value_to_itf,
    write_itf,
)

HERE = os.path.join(os.path.dirname(__file__), "tla")


def test_counterexample_round_trip(tmp_path):
    r = check(
        os.path.join(HERE, "TwoPhase.tla"),
        init="TPInit",
        next="TPNext",
        invariants=["NobodyCommits"],
        cinit="ConstInit",
    )
    assert r.verdict == "violation"
    path = tmp_path / "cex.itf.json"
    write_itf(path, r)
    doc = json.loads(path.read_text())
    assert doc["#meta"]["format"] == "ITF"
    assert doc["#meta"]["invariant"] == "NobodyCommits"
    assert doc["#meta"]["source"].endswith("TwoPhase.tla")
    assert doc["vars"] == r.variables
    assert [s["#meta"]["index"] for s in doc["states"]] == list(range(len(r.trace)))
    back = read_itf(path)
    assert back["vars"] == r.variables
    assert back["states"] == r.trace
    assert back["meta"]["invariant"] == "NobodyCommits"
    assert back["state_meta"][-1]["action"] == "RMRcvCommitMsg"


def test_value_encodings():
    rec = make_fn({"a": 1, "b": frozenset({"x"})})
    fun = make_fn({"k": 1, 2: "v"})
    assert value_to_itf(5) == {"#bigint": "5"}
    assert value_to_itf(True) is True and value_to_itf("s") == "s"
    assert value_to_itf((1, "a")) == [{"#bigint": "1"}, "a"]
    assert value_to_itf(frozenset({2, 1})) == {"#set": [{"#bigint": "1"}, {"#bigint": "2"}]}
    assert value_to_itf(rec) == {"a": {"#bigint": "1"}, "b": {"#set": ["x"]}}
    assert value_to_itf(fun) == {"#map": [[{"#bigint": "2"}, "v"], ["k", {"#bigint": "1"}]]}
    for v in (5, -3, True, "s", (1, "a"), (), frozenset({2, 1}), rec, fun):
        assert value_from_itf(value_to_itf(v)) == v


def test_reads_apalache_style_files(tmp_path):
    doc = {
        "#meta": {"format": "ITF", "source": "Foo.tla", "status": "violation", "varTypes": {}},
        "params": [],
        "vars": ["x", "s", "f"],
        "loop": 1,
        "states": [
            {"#meta": {"index": 0}, "x": 7, "s": {"#tup": [1, {"#bigint": "2"}]},
             "f": {"#map": [[1, "a"], [2, "b"]]}},
            {"#meta": {"index": 1}, "x": {"#bigint": "8"}, "s": [], "f": {}},
        ],
    }  # fmt: skip
    p = tmp_path / "apalache.itf.json"
    p.write_text(json.dumps(doc))
    t = read_itf(p)
    assert t["vars"] == ["x", "s", "f"]
    assert t["states"][0] == {"x": 7, "s": (1, 2), "f": ("a", "b")}
    assert t["states"][1] == {"x": 8, "s": (), "f": ()}
    assert t["loop"] == 1 and t["meta"]["status"] == "violation"


def test_unserializable_and_unknown_values_are_errors(tmp_path):
    with pytest.raises(ItfError, match="unserializable"):
        value_from_itf({"#unserializable": "Nat"})
    with pytest.raises(ItfError, match="#foo"):
        value_from_itf({"#foo": 1})
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(ItfError):
        read_itf(p)


def test_ok_result_has_an_empty_trace():
    r = check(os.path.join(HERE, "HourClock.tla"), init="HCini", next="HCnxt")
    assert r.to_itf()["states"] == []
