"""A Jepsen-grade checker for Kafka histories (after Jepsen's Kafka workload,
jepsen-io/jepsen `jepsen/tests/kafka.clj`, whose docstrings are its specification).

A history is a list of operations. Each op belongs to a *process* (one client's
thread of control: its ops never overlap), has a *type* (`ok`: it happened;
`fail`: it definitely did not; `info`: unknown) and is made of micro-operations:

    Send(key, value, offset)       offset None when the client never learnt it
    Poll({key: [(offset, value), ...]})
    Assign(keys) / Subscribe(keys) what the consumer reads from next
    Commit({key: offset})          the consumer's committed offsets (recorded only)

A key is a topic-partition. Values must be unique per key. From *every*
observation (each poll, and each send whose effect is known to be visible), the
checker builds per key the version order: the log by offset, and a dense index
that skips the offsets nobody saw a value at (transaction markers, aborted
records). Against it, it looks for each anomaly Jepsen's workload names, each
case with its evidence (keys, values, offsets, indices, processes, op indices):

    inconsistent-offsets   two values at one offset of a key
    duplicate              one value at more than one offset
    lost-write             a committed value below the highest index some ok
                           poll read, that no ok poll read
    unseen                 acknowledged, never polled by the end (and, as a series
                           over time, `Verdict.unseen_series`; and Jepsen's
                           realtime lag of each poll, `Verdict.lag_series`)
    G1a                    an ok poll read a value whose send definitely failed
                           (an aborted read)
    precommitted-read      an op polled a value it sent itself (under
                           read_committed a transaction never sees its own writes)
    poll-skip              a process's next poll of a key starts past the value
                           after the one its last poll ended with
    nonmonotonic-poll      ... or at or before it (reset by assign/subscribe and
                           by a rebalance of that key during the op)
    int-poll-skip, int-nonmonotonic-poll   the same between two reads in one op
    nonmonotonic-send      a process's sends to a key go backwards in the log
    int-send-skip, int-nonmonotonic-send   two sends of one op not adjacent / in
                           reverse order in the log
    G0, G1c                a cycle of write-write (G0) or write-write and
                           write-read dependencies with at least one write-read
                           edge (G1c) between ops; found with Tarjan's strongly
                           connected components, each reported with one cycle
                           and its edges

Which anomalies are fine depends on the settings (`Settings`): int-send-skip and
G0 always (a transaction's writes interleave with others', writes are not
isolated); poll-skip and nonmonotonic-poll with subscribe (a rebalance moves a
partition between consumers); G1c when write-write edges are inferred (a
transaction is not isolated from later writers); a duplicate whose writer's
outcome is unknown when the producer is not idempotent (the client may have
retried it). The verdict is valid iff every anomaly found is allowed.

    h = History()
    h.add(Op("p0", OK, [Send(("t", 0), b"a", 0)]))
    h.add(Op("p1", OK, [Poll({("t", 0): [(0, b"a")]})]))
    verdict = check(h)
    assert verdict.valid, verdict.summary()

`from_history()` converts the recorder of `kafkalab.cluster.history` into this
model, so its histories check here too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from kafkalab.kinds import Kind

Key = Hashable  # a topic-partition, (topic, partition)


class OpType(Kind):
    """How an op ended."""

    OK = "ok"  # it happened
    FAIL = "fail"  # it definitely did not happen
    INFO = "info"  # unknown: it may or may not have happened


OK, FAIL, INFO = OpType.OK, OpType.FAIL, OpType.INFO


@dataclass(frozen=True)
class Send:
    key: Key
    value: bytes
    offset: int | None = None  # None: the client never learnt it


@dataclass
class Poll:
    reads: dict[Key, list[tuple[int, bytes]]]


@dataclass(frozen=True)
class Assign:
    keys: tuple[Key, ...]


@dataclass(frozen=True)
class Subscribe:
    keys: tuple[Key, ...]


@dataclass
class Commit:
    offsets: dict[Key, int]


Mop = Send | Poll | Assign | Subscribe | Commit


@dataclass
class Op:
    process: str
    type: OpType
    mops: list[Mop]
    invoke: float = 0.0
    complete: float = 0.0
    #: keys whose assignment changed during the op (a rebalance): no order is
    #: expected across them
    rebalanced: frozenset = frozenset()
    #: the consumer's isolation level: a read_uncommitted poll may see what
    #: aborted transactions wrote
    read_committed: bool = True
    #: the op was a transaction (its sends commit or abort together)
    transactional: bool = False
    index: int = -1  # position in the history, set by History.add

    def writes(self) -> dict[Key, list[bytes]]:
        out: dict[Key, list[bytes]] = defaultdict(list)
        for mop in self.mops:
            if isinstance(mop, Send):
                out[mop.key].append(mop.value)
        return out

    def reads(self) -> dict[Key, list[bytes]]:
        out: dict[Key, list[bytes]] = defaultdict(list)
        for mop in self.mops:
            if isinstance(mop, Poll):
                for key, pairs in mop.reads.items():
                    out[key].extend(value for _, value in pairs)
        return out

    def read_pairs(self) -> dict[Key, list[tuple[int, bytes]]]:
        out: dict[Key, list[tuple[int, bytes]]] = defaultdict(list)
        for mop in self.mops:
            if isinstance(mop, Poll):
                for key, pairs in mop.reads.items():
                    out[key].extend(pairs)
        return out

    def write_pairs(self) -> dict[Key, list[tuple[int | None, bytes]]]:
        out: dict[Key, list[tuple[int | None, bytes]]] = defaultdict(list)
        for mop in self.mops:
            if isinstance(mop, Send):
                out[mop.key].append((mop.offset, mop.value))
        return out

    def sends(self) -> list[Send]:
        return [mop for mop in self.mops if isinstance(mop, Send)]

    def assignment(self) -> set[Key] | None:
        """The keys of the op's last assign/subscribe, None if it has none."""
        keys = None
        for mop in self.mops:
            if isinstance(mop, (Assign, Subscribe)):
                keys = set(mop.keys)
        return keys


@dataclass
class History:
    """Ops in the order they completed (per process: the order it ran them)."""

    ops: list[Op] = field(default_factory=list)

    def add(self, op: Op) -> Op:
        op.index = len(self.ops)
        self.ops.append(op)
        return op


@dataclass(frozen=True)
class Settings:
    #: consumers subscribed (a rebalance may move their partitions)
    subscribe: bool = False
    #: infer write-write edges from the log order (then G1c is expected)
    ww_deps: bool = False
    #: the producer is idempotent (a retried send is never duplicated)
    idempotent: bool = True
    #: anomalies allowed on top of what the settings allow
    allow: frozenset[str] = frozenset()


@dataclass
class VersionOrder:
    """One key's log as every observation saw it."""

    log: dict[int, set[bytes]]  # offset -> values seen there
    by_index: list[bytes]  # dense index -> value (one per observed offset)
    offsets: list[int]  # dense index -> offset
    by_value: dict[bytes, int]  # value -> its first dense index
    by_offset: dict[int, int] = field(default_factory=dict)  # offset -> dense index

    @classmethod
    def of(cls, log: dict[int, set[bytes]]) -> VersionOrder:
        offsets = sorted(log)
        by_index = [min(log[o]) for o in offsets]
        by_value: dict[bytes, int] = {}
        for i, o in enumerate(offsets):
            for v in sorted(log[o]):
                by_value.setdefault(v, i)
        return cls(log, by_index, offsets, by_value, {o: i for i, o in enumerate(offsets)})


@dataclass
class Verdict:
    valid: bool
    anomalies: dict[str, list[dict]]
    allowed: frozenset[str]
    #: (time, {key: acknowledged but not yet polled}) after each ok op
    unseen_series: list[tuple[float, dict[Key, int]]]
    version_orders: dict[Key, VersionOrder]
    #: Jepsen's realtime lag: per ok poll, process and key, how long before the poll
    #: began the offset after the highest one the process had seen was known to exist
    lag_series: list[dict] = field(default_factory=list)

    @property
    def bad(self) -> list[str]:
        """The anomalies found that the settings do not allow."""
        return sorted(name for name in self.anomalies if name not in self.allowed)

    def summary(self) -> str:
        found = ", ".join(f"{n} {len(c)}" for n, c in sorted(self.anomalies.items()))
        lines = [
            f"{'valid' if self.valid else 'INVALID'}: {found or 'no anomalies'}"
            + (f"; not allowed: {', '.join(self.bad)}" if self.bad else "")
        ]
        for name in sorted(self.anomalies):
            for case in self.anomalies[name][:5]:
                lines.append(f"  {name}: {case}")
        return "\n".join(lines)


def check(history: History, settings: Settings = Settings()) -> Verdict:
    """Every anomaly of Jepsen's Kafka workload in `history`, with evidence."""
    a = _Analysis(history)
    found: dict[str, list[dict]] = {}
    for name, cases in (
        ("inconsistent-offsets", a.inconsistent_offsets()),
        ("duplicate", a.duplicates()),
        ("lost-write", a.lost_writes()),
        ("unseen", a.unseen()[1]),
        ("G1a", a.aborted_reads()),
        ("precommitted-read", a.precommitted_reads()),
        *a.poll_order().items(),
        *a.internal_polls().items(),
        ("nonmonotonic-send", a.nonmonotonic_sends()),
        *a.internal_sends().items(),
        *a.cycles(settings.ww_deps).items(),
    ):
        if cases:
            found[name] = cases
    allowed = _allowed(settings, found)
    return Verdict(
        valid=all(name in allowed for name in found),
        anomalies=found,
        allowed=allowed,
        unseen_series=a.unseen()[0],
        version_orders=a.orders,
        lag_series=realtime_lag(history),
    )


def _allowed(settings: Settings, found: dict[str, list[dict]]) -> frozenset[str]:
    allowed = {"int-send-skip", "G0"} | set(settings.allow)
    if settings.subscribe:
        allowed |= {"poll-skip", "nonmonotonic-poll"}
    if settings.ww_deps:
        allowed.add("G1c")
    dups = found.get("duplicate", [])
    if dups and not settings.idempotent and all(c["writer type"] == INFO for c in dups):
        allowed.add("duplicate")
    return frozenset(allowed)


class _Analysis:
    def __init__(self, history: History) -> None:
        self.ops = history.ops
        self.ok_reads: dict[Key, set[bytes]] = defaultdict(set)
        self.writer_of: dict[Key, dict[bytes, Op]] = defaultdict(dict)
        self.readers_of: dict[Key, dict[bytes, list[Op]]] = defaultdict(lambda: defaultdict(list))
        for op in self.ops:
            for key, values in op.reads().items():
                for v in values:
                    self.readers_of[key][v].append(op)
                if op.type == OK:
                    self.ok_reads[key].update(values)
            for key, values in op.writes().items():
                for v in values:
                    self.writer_of[key][v] = op
        self.logs: dict[Key, dict[int, set[bytes]]] = defaultdict(lambda: defaultdict(set))
        for op in self.ops:
            # Polls are always observations of the log; a send only when its
            # effect is known to be visible.
            for key, pairs in op.read_pairs().items():
                for offset, value in pairs:
                    self.logs[key][offset].add(value)
            if self.committed(op):
                for s in op.sends():
                    if s.offset is not None:
                        self.logs[s.key][s.offset].add(s.value)
        self.orders = {key: VersionOrder.of(log) for key, log in self.logs.items()}
        self._unseen: tuple | None = None
        #: (key, offset) -> (op index, process, value) of every op that saw it
        self.seen_at: dict[tuple, list[tuple]] = defaultdict(list)
        for op in self.ops:
            for key, pairs in op.read_pairs().items():
                for offset, value in pairs:
                    self.seen_at[(key, offset)].append((op.index, op.process, value))
            for sent in op.sends():
                if sent.offset is not None:
                    self.seen_at[(sent.key, sent.offset)].append((op.index, op.process, sent.value))

    def committed(self, op: Op) -> bool:
        """ok, or unknown with one of its sends read by an ok poll."""
        if op.type == OK:
            return True
        return op.type == INFO and any(
            v in self.ok_reads[k] for k, vs in op.writes().items() for v in vs
        )

    def index(self, key: Key, pair: tuple[int | None, bytes]) -> int | None:
        """The dense index of an observation: of its offset when known (a value at
        two offsets is judged where it was seen), else of the value."""
        order = self.orders.get(key)
        if order is None:
            return None
        offset, value = pair
        if offset is not None and offset in order.by_offset:
            return order.by_offset[offset]
        return order.by_value.get(value)

    # -- the version order itself ---------------------------------------------------

    def inconsistent_offsets(self) -> list[dict]:
        out = []
        for key, order in self.orders.items():
            for i, offset in enumerate(order.offsets):
                if len(order.log[offset]) > 1:
                    values = sorted(order.log[offset])
                    out.append(
                        {
                            "key": key,
                            "offset": offset,
                            "index": i,
                            "values": values,
                            "ops": self._ops_seeing(key, offset, values),
                        }
                    )
        return out

    def _ops_seeing(self, key: Key, offset: int, values: list[bytes]) -> list[tuple]:
        """(op index, process, value) of each op that saw one of `values` at `offset`."""
        return [seen for seen in self.seen_at[(key, offset)] if seen[2] in values]

    def duplicates(self) -> list[dict]:
        out = []
        for key, order in self.orders.items():
            at: dict[bytes, list[int]] = defaultdict(list)
            for offset in order.offsets:
                for v in order.log[offset]:
                    at[v].append(offset)
            for value, offsets in sorted(at.items()):
                if len(offsets) > 1:
                    writer = self.writer_of[key].get(value)
                    out.append(
                        {
                            "key": key,
                            "value": value,
                            "offsets": offsets,
                            "writer": writer and (writer.index, writer.process),
                            "writer type": writer.type if writer else None,
                        }
                    )
        return out

    def lost_writes(self) -> list[dict]:
        out = []
        for key, read in self.ok_reads.items():
            order = self.orders.get(key)
            if order is None:
                continue
            last_index: dict[bytes, int] = {}
            for i, offset in enumerate(order.offsets):
                for v in order.log[offset]:
                    last_index[v] = i
            bound = max((order.by_value[v] for v in read if v in order.by_value), default=-1)
            if bound < 0:
                continue
            # The value some ok poll read at the highest index: the evidence that
            # everything below should have been read too.
            max_read = min(v for v in order.log[order.offsets[bound]] if v in read)
            max_reader = next(op for op in self.readers_of[key][max_read] if op.type == OK)
            for value, i in sorted(last_index.items(), key=lambda kv: kv[1]):
                if i > bound or value in read:
                    continue
                writer = self.writer_of[key].get(value)
                if writer is None or not self.committed(writer):
                    continue
                out.append(
                    {
                        "key": key,
                        "value": value,
                        "offset": order.offsets[order.by_value[value]],
                        "index": order.by_value[value],
                        "max read index": bound,
                        "max read": max_read,
                        "max reader": (max_reader.index, max_reader.process),
                        "writer": (writer.index, writer.process),
                    }
                )
        return out

    def unseen(self) -> tuple[list[tuple[float, dict[Key, int]]], list[dict]]:
        """Acknowledged sends no ok poll had read, after each ok op; the last point's
        non-empty keys are the `unseen` anomaly."""
        if self._unseen is not None:
            return self._unseen
        unseen: dict[Key, set[bytes]] = {}  # acknowledged, not yet polled
        polled: dict[Key, set[bytes]] = defaultdict(set)
        series = []
        for op in self.ops:
            if op.type != OK:
                continue
            writes, reads = op.writes(), op.reads()
            if not writes and not reads:
                continue
            for k, vs in writes.items():
                unseen.setdefault(k, set()).update(v for v in vs if v not in polled[k])
            for k, vs in reads.items():
                polled[k].update(vs)
                if k in unseen:
                    unseen[k].difference_update(vs)
            series.append((op.complete, {k: len(vs) for k, vs in unseen.items()}))
        cases = []
        for key, missing in unseen.items():
            if missing:
                cases.append(
                    {
                        "key": key,
                        "count": len(missing),
                        "values": sorted(missing),
                        "writers": sorted(
                            {
                                (self.writer_of[key][v].index, self.writer_of[key][v].process)
                                for v in missing
                            }
                        ),
                    }
                )
        self._unseen = (series, cases)
        return self._unseen

    # -- reads of what should not be read --------------------------------------------

    def aborted_reads(self) -> list[dict]:
        out = []
        for op in self.ops:
            if op.type != OK:
                continue
            for key, pairs in op.read_pairs().items():
                for offset, value in pairs:
                    writer = self.writer_of[key].get(value)
                    if writer is None or writer.type != FAIL:
                        continue
                    if not op.read_committed and writer.transactional:
                        continue  # read_uncommitted reads aborted transactions by design
                    out.append(
                        {
                            "key": key,
                            "value": value,
                            "offset": offset,
                            "writer": (writer.index, writer.process),
                            "reader": (op.index, op.process),
                        }
                    )
        return out

    def precommitted_reads(self) -> list[dict]:
        out = []
        for op in self.ops:
            reads = op.reads()
            for key, values in op.writes().items():
                both = sorted(set(values) & set(reads.get(key, ())))
                if both:
                    out.append({"key": key, "values": both, "op": (op.index, op.process, op.type)})
        return out

    # -- order per process and inside one op -----------------------------------------

    def _step(self, key: Key, p1: tuple, p2: tuple, skip_if=None) -> dict | None:
        """A skip or a step back between two consecutive observations of a key,
        each (offset or None, value)."""
        i1, i2 = self.index(key, p1), self.index(key, p2)
        v1, v2 = p1[1], p2[1]
        if i1 is None or i2 is None:
            return None
        delta = i2 - i1
        order = self.orders[key]
        if delta > 1:
            skipped = order.by_index[i1 + 1 : i2]
            if skip_if is not None:
                skipped = [v for v in skipped if not skip_if(v)]
                if not skipped:
                    return None
            return {
                "kind": "skip",
                "key": key,
                "values": [v1, v2],
                "delta": delta,
                "skipped": skipped,
            }
        if delta < 1:
            return {"kind": "nonmonotonic", "key": key, "values": [v1, v2], "delta": delta}
        return None

    def _invisible_to(self, op: Op):
        """What a read_committed reader may legitimately skip: aborted values."""
        if not op.read_committed:
            return None

        def aborted(key):
            return lambda v: (w := self.writer_of[key].get(v)) is not None and w.type == FAIL

        return aborted

    def poll_order(self) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {"poll-skip": [], "nonmonotonic-poll": []}
        last: dict[str, dict[Key, Op]] = defaultdict(dict)
        for op in self.ops:
            mine = last[op.process]
            keys = op.assignment()
            if keys is not None and op.type != FAIL:
                for k in list(mine):
                    if k not in keys:
                        del mine[k]
            for k in op.rebalanced:
                mine.pop(k, None)
            reads = op.read_pairs()
            invisible = self._invisible_to(op)
            for key, values in reads.items():
                if not values or key not in mine:
                    continue
                previous = mine[key]
                v1 = previous.read_pairs()[key][-1]
                step = self._step(key, v1, values[0], invisible and invisible(key))
                if step is not None:
                    name = "poll-skip" if step.pop("kind") == "skip" else "nonmonotonic-poll"
                    step["process"] = op.process
                    step["ops"] = [previous.index, op.index]
                    out[name].append(step)
            if op.type == OK:
                for key, values in reads.items():
                    if values:
                        mine[key] = op
        return out

    def internal_polls(self) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {"int-poll-skip": [], "int-nonmonotonic-poll": []}
        for op in self.ops:
            invisible = self._invisible_to(op)
            for key, values in op.read_pairs().items():
                if key in op.rebalanced:
                    continue
                for v1, v2 in zip(values, values[1:], strict=False):
                    step = self._step(key, v1, v2, invisible and invisible(key))
                    if step is not None:
                        kind = step.pop("kind")
                        name = "int-poll-skip" if kind == "skip" else "int-nonmonotonic-poll"
                        step["op"] = (op.index, op.process)
                        out[name].append(step)
        return out

    def nonmonotonic_sends(self) -> list[dict]:
        """A process's sends to one key, op after op, move forward in the log.
        (Unlike polls, an assign or subscribe has nothing to do with sends.)"""
        out = []
        last: dict[str, dict[Key, Op]] = defaultdict(dict)
        for op in self.ops:
            if op.type == FAIL:
                continue
            mine = last[op.process]
            writes = op.write_pairs()
            for key, values in writes.items():
                if key in mine:
                    previous = mine[key]
                    v1 = previous.write_pairs()[key][-1]
                    step = self._step(key, v1, values[0])
                    if step is not None and step.pop("kind") == "nonmonotonic":
                        step["process"] = op.process
                        step["ops"] = [previous.index, op.index]
                        out.append(step)
            for key in writes:
                mine[key] = op
        return out

    def internal_sends(self) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {"int-send-skip": [], "int-nonmonotonic-send": []}
        for op in self.ops:
            if op.type == FAIL:
                continue
            for key, values in op.write_pairs().items():
                for v1, v2 in zip(values, values[1:], strict=False):
                    step = self._step(key, v1, v2)
                    if step is not None:
                        kind = step.pop("kind")
                        name = "int-send-skip" if kind == "skip" else "int-nonmonotonic-send"
                        step["op"] = (op.index, op.process)
                        out[name].append(step)
        return out

    # -- dependency cycles -----------------------------------------------------------

    def cycles(self, ww_deps: bool) -> dict[str, list[dict]]:
        """G0 (write-write cycles) and G1c (cycles with a write-read edge) between ok
        and unknown ops; write-write edges only with `ww_deps`."""
        members = {op.index for op in self.ops if op.type != FAIL}
        edges: dict[tuple[int, int], list[tuple[str, Key, bytes]]] = defaultdict(list)
        if ww_deps:
            for key, order in self.orders.items():
                writers = self.writer_of[key]
                for v1, v2 in zip(order.by_index, order.by_index[1:], strict=False):
                    a, b = writers.get(v1), writers.get(v2)
                    if a and b and a is not b and a.index in members and b.index in members:
                        edges[(a.index, b.index)].append(("ww", key, v2))
        for key, readers in self.readers_of.items():
            for value, ops in readers.items():
                w = self.writer_of[key].get(value)
                if w is None or w.index not in members:
                    continue
                for r in ops:
                    if r is not w and r.index in members:
                        edges[(w.index, r.index)].append(("wr", key, value))
        out: dict[str, list[dict]] = {"G0": [], "G1c": []}
        ww_only = {e: [x for x in kinds if x[0] == "ww"] for e, kinds in edges.items()}
        ww_only = {e: k for e, k in ww_only.items() if k}
        for scc in strongly_connected(ww_only):
            out["G0"].append(self._cycle_case(scc, ww_only, None))
        components = strongly_connected(edges)
        component_of = {node: n for n, scc in enumerate(components) for node in scc}
        inner_wr: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for (a, b), kinds in edges.items():
            n = component_of.get(a)
            if n is not None and component_of.get(b) == n and any(x[0] == "wr" for x in kinds):
                inner_wr[n].append((a, b))
        for n, scc in enumerate(components):
            if inner_wr[n]:
                out["G1c"].append(self._cycle_case(scc, edges, min(inner_wr[n])))
        return out

    def _cycle_case(self, scc: set[int], edges: dict, through: tuple[int, int] | None) -> dict:
        start, nxt = through if through else (min(scc), None)
        path = _path(edges, scc, nxt if nxt is not None else start, start, first=nxt is None)
        if through:
            path = [start, *path]
        steps = []
        for a, b in zip(path, path[1:], strict=False):
            labels = edges[(a, b)]
            if (a, b) == through:  # the write-read edge the cycle was found through
                labels = [x for x in labels if x[0] == "wr"]
            kind, key, value = labels[0]
            steps.append(
                {
                    "from": (a, self.ops[a].process),
                    "to": (b, self.ops[b].process),
                    "dependency": kind,
                    "key": key,
                    "value": value,
                }
            )
        return {"ops": sorted(scc), "cycle": steps}


def realtime_lag(history: History) -> list[dict]:
    """For each ok poll, each key its process has assigned or seen: the lag, a lower
    bound on how long the process had been behind when the poll began: the poll's
    invoke time minus the time some op had shown the next offset to exist (0 when
    none had). An assign keeps the positions of the keys it keeps (new ones start
    at -1), a subscribe forgets them all (the group decides what comes)."""
    known_at: dict[Key, dict[int, float]] = defaultdict(dict)  # offset -> first known
    for op in history.ops:
        if op.type == FAIL:
            continue
        for key, offset in _max_offsets(op).items():
            times = known_at[key]
            while offset >= 0 and offset not in times:  # every lower offset exists too
                times[offset] = op.complete
                offset -= 1
    positions: dict[str, dict[Key, int]] = defaultdict(dict)
    lags = []
    for op in history.ops:
        if op.type != OK:
            continue
        mine = positions[op.process]
        for mop in op.mops:
            if isinstance(mop, Assign):
                positions[op.process] = mine = {k: mine.get(k, -1) for k in mop.keys}
            elif isinstance(mop, Subscribe):
                positions[op.process] = mine = {}
        if not any(isinstance(mop, Poll) for mop in op.mops):
            continue
        for key, offset in _max_offsets(op).items():
            mine[key] = max(mine.get(key, -1), offset)
        for key, offset in mine.items():
            since = known_at[key].get(offset + 1)
            lag = 0.0 if since is None else max(0.0, op.invoke - since)
            lags.append({"time": op.invoke, "process": op.process, "key": key, "lag": lag})
    return lags


def _max_offsets(op: Op) -> dict[Key, int]:
    """The highest offset of each key an op read or sent."""
    out: dict[Key, int] = {}
    for key, pairs in op.read_pairs().items():
        for offset, _ in pairs:
            out[key] = max(out.get(key, -1), offset)
    for sent in op.sends():
        if sent.offset is not None:
            out[sent.key] = max(out.get(sent.key, -1), sent.offset)
    return out


def strongly_connected(edges: Iterable[tuple[int, int]]) -> list[set[int]]:
    """Tarjan's strongly connected components (iteratively) with more than one node."""
    graph: dict[int, list[int]] = defaultdict(list)
    for a, b in edges:
        graph[a].append(b)
        graph.setdefault(b, [])
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    out: list[set[int]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(component)
    return out


def _path(edges: dict, scc: set[int], source: int, target: int, first: bool) -> list[int]:
    """The shortest path source -> target inside `scc` (breadth first); with
    `first`, source == target and the path is a cycle of at least one edge."""
    graph: dict[int, list[int]] = defaultdict(list)
    for a, b in edges:
        if a in scc and b in scc:
            graph[a].append(b)
    came: dict[int, int] = {}
    frontier = [source]
    seen = set() if first else {source}
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child in seen:
                    continue
                seen.add(child)
                came[child] = node
                if child == target:
                    path = [target]
                    while path[-1] != source or len(path) == 1:
                        path.append(came[path[-1]])
                    return list(reversed(path))
                following.append(child)
        frontier = following
    raise AssertionError("a strongly connected component always has the path")


# -- the adapter from kafkalab.cluster.history ----------------------------------------

PRODUCER = "producer"
FINAL_READ = "final read"
FINAL_READ_COMMITTED = "final read (read_committed)"


def from_history(recorded) -> tuple[History, Settings]:
    """A `kafkalab.cluster.history.History` as ops of this model, and the settings
    it is judged with.

    Each acknowledged send is an ok send op (its offset known), each send the
    client gave up on an unknown one (it may be in the log); a transaction's sends
    are one op, ok if it committed, fail if it aborted, unknown otherwise. The
    recorder names no producer, so every send is process `producer` (one client's
    sends to a partition are acknowledged in log order). Each read is an ok poll of
    its reader, and each final log an ok poll of its own process. The recorder
    records no assignment and its readers may seek forward, so poll-skip is allowed.
    Replica divergence is not in this model: `history.check()` judges it."""
    from kafkalab.cluster.history import READ_COMMITTED
    from kafkalab.cluster.history import OpKind as Old

    out = History()
    sent_at: dict[tuple, int] = {}
    done: set[tuple] = set()
    txn_sends: dict[str, list] = defaultdict(list)  # txn -> [send op]
    in_txn: set[tuple] = set()  # (tp, value) of every transactional send
    acked: dict[tuple, int] = {}  # (tp, value) -> offset
    ended: set[str] = set()
    for old in recorded.ops:
        tv = (old.tp, old.value)
        if old.kind == Old.SEND:
            sent_at.setdefault(tv, old.index)
            if old.txn:
                txn_sends[old.txn].append(old)
                in_txn.add(tv)
        elif old.kind == Old.ACK:
            acked[tv] = old.offset
            if tv not in in_txn:
                done.add(tv)
                out.add(
                    Op(
                        PRODUCER,
                        OK,
                        [Send(old.tp, old.value, old.offset)],
                        invoke=sent_at.get(tv, old.index),
                        complete=old.index,
                    )
                )
        elif old.kind == Old.FAIL:
            if tv not in in_txn and tv not in done:
                done.add(tv)
                out.add(
                    Op(
                        PRODUCER,
                        INFO,
                        [Send(old.tp, old.value)],
                        invoke=sent_at.get(tv, old.index),
                        complete=old.index,
                    )
                )
        elif old.kind in (Old.COMMIT, Old.ABORT, Old.TXN_FAIL) and old.txn not in ended:
            ended.add(old.txn)
            kind = {Old.COMMIT: OK, Old.ABORT: FAIL, Old.TXN_FAIL: INFO}[old.kind]
            out.add(_txn_op(old.txn, kind, txn_sends[old.txn], acked, old.index))
        elif old.kind == Old.READ:
            out.add(
                Op(
                    old.reader or "?",
                    OK,
                    [Poll({old.tp: [(old.offset, old.value)]})],
                    invoke=old.index,
                    complete=old.index,
                    read_committed=old.isolation == READ_COMMITTED,
                )
            )
    end = len(recorded.ops)
    for txn, sends in txn_sends.items():
        if txn not in ended:
            out.add(_txn_op(txn, INFO, sends, acked, end))
    for tv, at in sent_at.items():
        if tv not in done and tv not in in_txn:
            out.add(
                Op(PRODUCER, INFO, [Send(tv[0], tv[1], acked.get(tv))], invoke=at, complete=end)
            )
    for name, finals, committed in (
        (FINAL_READ, recorded.finals, False),
        (FINAL_READ_COMMITTED, recorded.committed_finals, True),
    ):
        for tp, records in finals.items():
            out.add(
                Op(
                    name,
                    OK,
                    [Poll({tp: list(records)})],
                    invoke=end,
                    complete=end,
                    read_committed=committed,
                )
            )
    return out, Settings(allow=frozenset({"poll-skip"}))


def _txn_op(txn: str, kind: OpType, sends: list, acked: dict, at: int) -> Op:
    mops = [Send(s.tp, s.value, acked.get((s.tp, s.value))) for s in sends]
    first = min((s.index for s in sends), default=at)
    return Op(f"txn {txn}", kind, mops, invoke=first, complete=at, transactional=True)
