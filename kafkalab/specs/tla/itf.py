"""ITF, Apalache's Informal Trace Format (https://apalache-mc.org/docs/adr/015adr-trace.html):
TLA+ values and traces to and from JSON.

Keeps ``value_to_itf``, ``value_from_itf``, ``trace_to_itf``, ``write_itf`` and
``read_itf``.  Invariants: integers are written as ``{"#bigint": "..."}`` and read from
that or from plain JSON integers; sets are ``{"#set": [...]}`` in canonical order;
sequences (tuples) are JSON arrays (``{"#tup": [...]}`` is read too); records (functions
on strings with a non-empty domain) are JSON objects; any other function is
``{"#map": [[k, v], ...]}``.  Reading converts back to the same values (``values``), so
``read_itf(write_itf(...))`` gives states equal to the checker's.  Apalache's extra
fields (``params``, ``loop``, more ``#meta`` keys) are accepted and kept.
"""

from __future__ import annotations

import json
import os

from .errors import TlaError
from .values import Fn, LazySet, as_frozenset, make_fn, sort_key, sorted_elems

ITF_URL = "https://apalache-mc.org/docs/adr/015adr-trace.html"


class ItfError(TlaError):
    """A file is not a readable ITF trace."""


def value_to_itf(v):
    t = type(v)
    if t is bool or t is str:
        return v
    if t is int:
        return {"#bigint": str(v)}
    if t is tuple:
        return [value_to_itf(x) for x in v]
    if t is frozenset or isinstance(v, LazySet):
        return {"#set": [value_to_itf(x) for x in sorted_elems(as_frozenset(v))]}
    if t is Fn:
        if v.is_record():
            return {k: value_to_itf(v.d[k]) for k in sorted(v.d)}
        keys = sorted(v.d, key=sort_key)
        return {"#map": [[value_to_itf(k), value_to_itf(v.d[k])] for k in keys]}
    raise ItfError(f"cannot write {v!r} as ITF")


def value_from_itf(j):
    if isinstance(j, bool | str):
        return j
    if isinstance(j, int):
        return j
    if isinstance(j, float):
        if j.is_integer():
            return int(j)
        raise ItfError(f"ITF has no non-integer numbers: {j}")
    if isinstance(j, list):
        return tuple(value_from_itf(x) for x in j)
    if isinstance(j, dict):
        if "#bigint" in j:
            return int(j["#bigint"])
        if "#set" in j:
            return frozenset(value_from_itf(x) for x in j["#set"])
        if "#tup" in j:
            return tuple(value_from_itf(x) for x in j["#tup"])
        if "#map" in j:
            return make_fn({value_from_itf(k): value_from_itf(x) for k, x in j["#map"]})
        if "#unserializable" in j:
            raise ItfError(f"an unserializable ITF value: {j['#unserializable']!r}")
        tags = [k for k in j if k.startswith("#") and k != "#meta"]
        if tags:
            raise ItfError(f"unknown ITF value tag {tags[0]}")
        return make_fn({k: value_from_itf(x) for k, x in j.items() if k != "#meta"})
    if j is None:
        raise ItfError("null is not an ITF value")
    raise ItfError(f"cannot read {j!r} as an ITF value")


def trace_to_itf(
    variables, states, source="", description="", invariant=None, actions=None
) -> dict:
    """The ITF document of a trace (states are dicts variable -> value)."""
    meta = {
        "format": "ITF",
        "format-description": ITF_URL,
        "source": source,
        "description": description,
    }
    if invariant:
        meta["invariant"] = invariant
    out_states = []
    for i, st in enumerate(states):
        smeta = {"index": i}
        if actions and i < len(actions) and actions[i]:
            smeta["action"] = actions[i]
        row = {"#meta": smeta}
        for v in variables:
            row[v] = value_to_itf(st[v])
        out_states.append(row)
    return {"#meta": meta, "vars": list(variables), "states": out_states}


def write_itf(path, trace) -> dict:
    """Write a ``CheckResult``'s trace (or an ITF dict) to ``path``; returns the dict."""
    doc = trace if isinstance(trace, dict) else trace.to_itf()
    with open(os.fspath(path), "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
        fh.write("\n")
    return doc


def itf_from_json(doc: dict) -> dict:
    if not isinstance(doc, dict) or "states" not in doc:
        raise ItfError("an ITF document is a JSON object with a 'states' list")
    states, metas = [], []
    for st in doc["states"]:
        if not isinstance(st, dict):
            raise ItfError("an ITF state is a JSON object")
        metas.append(st.get("#meta", {}))
        states.append({k: value_from_itf(x) for k, x in st.items() if k != "#meta"})
    variables = doc.get("vars")
    if variables is None:
        variables = list(states[0]) if states else []
    out = {"vars": list(variables), "states": states, "meta": doc.get("#meta", {})}
    out["state_meta"] = metas
    for extra in ("params", "loop"):
        if extra in doc:
            out[extra] = doc[extra]
    return out


def read_itf(path) -> dict:
    """``{"vars": [...], "states": [dict var -> value], "meta": {...}}`` (plus
    ``state_meta`` and, when present, ``params`` and ``loop``)."""
    with open(os.fspath(path), encoding="utf-8") as fh:
        try:
            doc = json.load(fh)
        except json.JSONDecodeError as ex:
            raise ItfError(f"{path}: not JSON: {ex}") from None
    return itf_from_json(doc)
