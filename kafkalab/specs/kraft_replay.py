"""Replay a KafkaRaft trace (specs/kraft/) against kafkalab's Raft module (kafkalab/raft).

    report = replay_kraft("specs/kraft/counterexamples/kraft--vote-not-persisted.itf.json")
    report = replay_kraft(trace, defects=())      # the correct code, whatever the trace says

Each spec voter (c1, c2, c3) becomes a KafkaRaftClient (node ids 1, 2, 3) over a
RaftLog and a MemoryQuorumStateStore that survive its restarts. The replay is the
network and the clock: its timers never expire by themselves (every timeout is a
step the spec names), it carries exactly the messages the spec's step carries, and
a Fetch response holds at most one record (QuorumConfig.fetch_max_entries = 1, as
the spec's Fetch brings one). Each step is named by the action instance that takes
it (kafkalab.specs.runner.follow_trace, KRAFT_ACTIONS) and done with the module:

    Timeout(v)              the election (or fetch) timeout with pre-vote off: v turns
                            Prospective and, its pre-votes won, Candidate of the next
                            epoch (QuorumState.transition_to_prospective, then
                            transition_to_candidate; the spec leaves pre-vote out)
    RequestVote(c, v)       c's VoteRequest (its epoch, log end offset and last epoch)
                            handled by v (handle), v's VoteResponse by c
                            (handle_vote_response), then c polls: with a majority it
                            becomes leader and appends its LeaderChange record
    BeginQuorumEpoch(l, v)  l's BeginQuorumEpochRequest handled by v, the response by l
    Resign(l)               l.resign(): EndQuorumEpoch (not delivered: the spec's Resign
                            tells nobody)
    ClientWrite(l)          l.append([a record])
    Fetch(f)                f's FetchRequest (FetchOffset, LastFetchedEpoch) handled by
                            its leader, the response handled by f (handle_fetch_response)
                            or lost: lost when the spec's f did not change but the
                            response would change it
    Restart(v)              a new KafkaRaftClient over v's log and quorum-state store
                            (QuorumState.initialize)

After every step each voter's state is compared with the spec's: role (Kafka's
state class), epoch, voted-for, known leader, a candidate's granted votes, the
epochs of its log's records, the high watermark (the spec's hw is Kafka's
QuorumState.highWatermark(): 0 until known, and a new leader knows none until a
record of its own epoch commits: KafkaRaftClient.quorum_high_watermark), and a
leader's fetch offset per follower (-1: none yet). The spec's history is derived
from the code and compared too: `elected` from the leader transitions the replay
sees, `committed` from the leaders' high watermarks. The first difference stops the
replay with a ReplayMismatch naming the step, the action, the values and, where a
broken variant meets the correct code, why.

The broken variants are settings of the module (QuorumConfig.defects): the trace's
CommitOwnEpochFirst = FALSE switches on KAFKA_12619, PersistElectionState = FALSE
switches on KAFKA_10527. The report lists which of the spec's invariants kafkalab's
voters broke (ElectionSafety, LeaderCompleteness), as the counterexamples do.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from kafkalab.raft.errors import RaftError
from kafkalab.raft.kafka_raft_client import KafkaRaftClient
from kafkalab.raft.leader_state import LeaderState
from kafkalab.raft.quorum_config import KAFKA_10527, KAFKA_12619, QuorumConfig
from kafkalab.raft.quorum_state import CandidateState, FollowerState, StateName
from kafkalab.raft.quorum_state_store import NOT_VOTED, UNKNOWN_LEADER, MemoryQuorumStateStore
from kafkalab.raft.raft_log import RaftLog
from kafkalab.raft.raft_message import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    RaftMessage,
    VoteRequest,
    VoteResponse,
)
from kafkalab.specs.replay import ReplayMismatch, ReplayReport
from kafkalab.specs.trace import Trace, load_trace
from kafkalab.specs.trace_actions import KRAFT_ACTIONS, NONE

#: a timer the replay never lets expire: every timeout is a step the spec names
NEVER_MS = 10**12


def replay_config(defects=()) -> QuorumConfig:
    """The voters' configuration: no timer fires by itself, one record per Fetch."""
    return QuorumConfig(
        election_timeout_ms=NEVER_MS,
        fetch_timeout_ms=NEVER_MS,
        request_timeout_ms=NEVER_MS,
        fetch_max_entries=1,
        defects=frozenset(defects),
    )


@dataclass
class KraftReplayReport(ReplayReport):
    defects: frozenset[str] = frozenset()
    elected: set = field(default_factory=set)  # (epoch, voter) of every leader seen
    committed: set = field(default_factory=set)  # (offset, record epoch, leader epoch)
    violations: list[str] = field(default_factory=list)  # the spec's invariants kafkalab broke


def trace_defects(trace: Trace) -> frozenset[str]:
    """The defects a KafkaRaft trace's constants stand for."""
    constants = trace.meta.get("constants") or _constants_of(trace)
    out = set()
    if constants.get("CommitOwnEpochFirst") is False:
        out.add(KAFKA_12619)
    if constants.get("PersistElectionState") is False:
        out.add(KAFKA_10527)
    return frozenset(out)


def replay_kraft(source: str | Path | dict | Trace, defects=None) -> KraftReplayReport:
    """Replay every step of a KafkaRaft trace on kafkalab's voters, with `defects`
    switched on (by default those of the trace's configuration); raise ReplayMismatch
    at the first step where code and spec disagree."""
    doc = _itf(source)
    trace = load_trace(doc)
    steps = _named_steps(trace, doc)
    code_defects = trace_defects(trace) if defects is None else frozenset(defects)
    replay = _KraftReplay(sorted(trace.states[0]["role"]), code_defects, trace_defects(trace))
    report = KraftReplayReport(
        "defects: " + (", ".join(sorted(code_defects)) or "none"), defects=code_defects
    )
    for step, label in enumerate(steps, start=1):
        before, after = trace.states[step - 1], trace.states[step]
        did = replay.perform(step, label, before, after)
        replay.record_history()
        replay.compare(step, label, after)
        report.steps.append({"step": step, "action": label, "implementation": did})
    report.elected, report.committed = replay.elected, replay.committed
    report.violations = replay.violations()
    return report


# -- the trace --------------------------------------------------------------------------------


def _itf(source) -> dict:
    if isinstance(source, dict):
        return source
    if isinstance(source, Trace):
        return _trace_to_itf(source)
    return json.loads(Path(source).read_text())


def _module_of(trace: Trace) -> Path:
    from kafkalab.specs.runner import SPECS_DIR

    name = Path(trace.meta.get("source") or "").name
    module = SPECS_DIR / "kraft" / name
    if not name or not module.exists():
        raise ValueError(f"the trace comes from {name!r}, not from an MC file of specs/kraft")
    return module


def _constants_of(trace: Trace) -> dict:
    from kafkalab.specs.tla import load_module, solve_constants

    mod = load_module(str(_module_of(trace)))
    return dict(solve_constants(mod, "ConstInit", None))


def _named_steps(trace: Trace, doc: dict) -> list[str]:
    """Each step named by the action instance of KafkaRaft's Next that takes it; the
    trace must be a behaviour of its spec (else CounterexampleDoesNotFollow)."""
    from kafkalab.specs.runner import follow_trace

    return follow_trace(_module_of(trace), doc, KRAFT_ACTIONS)


def _trace_to_itf(trace: Trace) -> dict:
    """A KafkaRaft trace loaded as plain Python, back as an ITF document."""
    from kafkalab.specs.tla.itf import trace_to_itf
    from kafkalab.specs.tla.values import Fn

    def tla(var: str, value):
        if var in ("elected", "committed"):
            return frozenset(tuple(x) for x in value)
        if var == "restarts":
            return value
        if var == "fetched":
            return Fn({k: Fn(dict(v)) for k, v in value.items()})
        if var == "log":
            return Fn({k: tuple(v) for k, v in value.items()})
        if var == "votes":
            return Fn({k: frozenset(v) for k, v in value.items()})
        return Fn(dict(value))

    states = [{v: tla(v, s[v]) for v in trace.variables} for s in trace.states]
    doc = trace_to_itf(trace.variables, states, source=trace.meta.get("source", ""))
    if "constants" in trace.meta:
        doc["#meta"]["constants"] = dict(trace.meta["constants"])
    return doc


_CALL = re.compile(r"^(\w+)\((.*)\)$")


def _parse(label: str) -> tuple[str, list[str]]:
    m = _CALL.match(label)
    if not m or m.group(1) not in KRAFT_ACTIONS:
        raise ValueError(f"not an action of KafkaRaft's Next: {label}")
    return m.group(1), re.findall(r'"([^"]*)"', m.group(2))


# -- the voters -------------------------------------------------------------------------------


_ROLE = {
    StateName.UNATTACHED: "unattached",
    StateName.CANDIDATE: "candidate",
    StateName.LEADER: "leader",
    StateName.FOLLOWER: "follower",
    StateName.RESIGNED: "resigned",
    StateName.PROSPECTIVE: "prospective",  # never in the spec: pre-vote is left out
}


class _KraftReplay:
    def __init__(self, names: list[str], defects: frozenset[str], spec_defects: frozenset[str]):
        self.names = names
        self.ids = {n: i for i, n in enumerate(names, start=1)}
        self.by_id = {i: n for n, i in self.ids.items()}
        self.config = replay_config(defects)
        self.defects, self.spec_defects = defects, spec_defects
        self.logs = {n: RaftLog() for n in names}
        self.stores = {n: MemoryQuorumStateStore() for n in names}
        self.now = 0
        self.correlation = 0
        self.clients = {n: self._build(n) for n in names}
        self.elected: set[tuple[int, str]] = set()
        self.committed: set[tuple[int, int, int]] = set()

    def _build(self, n: str) -> KafkaRaftClient:
        return KafkaRaftClient(
            self.ids[n],
            self.ids.values(),
            self.logs[n],
            self.stores[n],
            self.config,
            random.Random(self.ids[n]),
            self.now,
        )

    def _message(self, src: str, dst: str, data) -> RaftMessage:
        self.correlation += 1
        return RaftMessage(self.correlation, self.ids[src], self.ids[dst], data)

    def _request(self, src: str, dst: str, data):
        """`dst` handles a request from `src` (through handle: the envelope's checks
        too); its response's data."""
        out = self.clients[dst].handle(self._message(src, dst, data), self.now)
        for m in out:
            if m.destination_id == self.ids[src] and not m.is_request:
                return m.data
        raise AssertionError(f"{dst} did not answer {type(data).__name__} from {src}")

    # -- the actions ---------------------------------------------------------------------------

    def perform(self, step: int, label: str, before: dict, after: dict) -> str:
        self.now += 1
        name, args = _parse(label)
        try:
            return getattr(self, name.lower())(*args, before=before, after=after)
        except RaftError as e:
            raise ReplayMismatch(
                step, label, f"the spec takes this step, kafkalab refuses it: {e}"
            ) from e

    def timeout(self, v: str, **_) -> str:
        q = self.clients[v].quorum
        q.transition_to_prospective(self.now)
        q.transition_to_candidate(self.now)
        return f"{v}: Prospective, pre-votes won: Candidate of epoch {q.epoch}, voted for itself"

    def requestvote(self, c: str, v: str, **_) -> str:
        cc = self.clients[c]
        end = cc.log.end_offset_and_epoch()
        req = VoteRequest(cc.epoch, cc.local_id, end.epoch, end.offset)
        resp = self._request(c, v, req)
        assert isinstance(resp, VoteResponse)
        cc.handle_vote_response(self.ids[v], resp, False, self.now)
        cc.poll(self.now)
        verdict = "granted" if resp.vote_granted else f"refused ({resp.error_code.name})"
        return f"Vote(epoch {req.replica_epoch}) to {v}: {verdict}; {c} is {cc.state_name}"

    def beginquorumepoch(self, l: str, v: str, **_) -> str:  # noqa: E741
        lc = self.clients[l]
        resp = self._request(l, v, BeginQuorumEpochRequest(lc.local_id, lc.epoch))
        assert isinstance(resp, BeginQuorumEpochResponse)
        lc.handle_begin_quorum_epoch_response(self.ids[v], resp, self.now)
        return f"BeginQuorumEpoch(epoch {lc.epoch}) to {v}: {resp.error_code.name}"

    def resign(self, l: str, **_) -> str:  # noqa: E741
        self.clients[l].resign(self.now)
        return f"{l}.resign(): Resigned in epoch {self.clients[l].epoch}"

    def clientwrite(self, l: str, **_) -> str:  # noqa: E741
        offset = self.clients[l].append([f"metadata record {self.now}"], self.now)
        return f"{l}.append(): offset {offset}"

    def fetch(self, f: str, before: dict, after: dict) -> str:
        fc = self.clients[f]
        state = fc.quorum.state
        if not isinstance(state, FollowerState):
            raise RaftError(f"{f} is {fc.state_name}, not a follower: it does not fetch")
        ldr = self.by_id[state.leader_id]
        req = FetchRequest(fc.local_id, fc.epoch, fc.log.end_offset, fc.log.last_fetched_epoch)
        resp = self._request(f, ldr, req)
        assert isinstance(resp, FetchResponse)
        spec_moved = before["log"][f] != after["log"][f] or before["hw"][f] != after["hw"][f]
        would_move = (
            resp.diverging_epoch is not None
            or bool(resp.records)
            or min(resp.high_watermark, fc.log.end_offset) > fc.quorum_high_watermark
        )
        what = f"Fetch(offset {req.fetch_offset}, last epoch {req.last_fetched_epoch}) to {ldr}"
        if resp.diverging_epoch is not None:
            what += f": DivergingEpoch {resp.diverging_epoch}"
        else:
            what += f": {len(resp.records)} record(s), HW {resp.high_watermark}"
        if would_move and not spec_moved:
            return what + ", response lost"
        fc.handle_fetch_response(self.ids[ldr], resp, req, self.now)
        return what

    def restart(self, v: str, **_) -> str:
        self.clients[v] = self._build(v)
        return f"{v} restarted: {self.clients[v].state_name} in epoch {self.clients[v].epoch}"

    # -- what the code did, as the spec says it ------------------------------------------------

    def _name(self, node: int) -> str:
        return NONE if node in (UNKNOWN_LEADER, NOT_VOTED) else self.by_id[node]

    def view(self, n: str) -> dict:
        c = self.clients[n]
        state = c.quorum.state
        out = {
            "role": _ROLE[c.state_name],
            "epoch": c.epoch,
            "votedFor": self._name(state.voted_id),
            "leader": self._name(c.leader_id),
            "votes": sorted(self.by_id[i] for i in state.granted)
            if isinstance(state, CandidateState)
            else [],
            "log": [e.epoch for e in c.log.entries],
            "hw": c.quorum_high_watermark,
        }
        if isinstance(state, LeaderState):
            out["fetched"] = {
                self.by_id[v]: -1 if s.end_offset is None else s.end_offset
                for v, s in state.voter_states.items()
                if v != c.local_id
            }
        return out

    def record_history(self) -> None:
        for n, c in self.clients.items():
            state = c.quorum.state
            if not isinstance(state, LeaderState):
                continue
            self.elected.add((state.epoch, n))
            hw = state.high_watermark or 0
            for o, entry in enumerate(c.log.entries[:hw]):
                if not any(x[0] == o and x[1] == entry.epoch for x in self.committed):
                    self.committed.add((o, entry.epoch, state.epoch))

    def compare(self, step: int, label: str, after: dict) -> None:
        for n in self.names:
            got = self.view(n)
            for key, value in got.items():
                spec = after[key][n]
                if key == "fetched":
                    spec = {v: o for v, o in spec.items() if v != n}
                elif key == "votes":
                    spec = sorted(spec)
                if value != spec:
                    detail = f"{n}'s {key} is {value}, the spec says {spec}"
                    why = self._why(n, key)
                    raise ReplayMismatch(step, label, detail + (f": {why}" if why else ""))
        for key, ours in (("elected", self.elected), ("committed", self.committed)):
            spec = {tuple(x) for x in after[key]}
            if ours != spec:
                raise ReplayMismatch(
                    step,
                    label,
                    f"kafkalab's {key} history is {sorted(ours)}, the spec's {sorted(spec)}",
                )

    def _why(self, n: str, key: str) -> str:
        """Why the correct code and a broken variant part (or the other way round)."""
        c = self.clients[n]
        state = c.quorum.state
        if KAFKA_12619 in self.spec_defects - self.defects and key in ("hw", "committed"):
            if isinstance(state, LeaderState):
                return (
                    f"kafkalab's leader moves its high watermark only once a majority holds a "
                    f"record of its own epoch, past its LeaderChange record at offset "
                    f"{state.epoch_start_offset} (the fix of KAFKA-12619); the spec's "
                    f"CommitOwnEpochFirst = FALSE moves it once a majority reaches that offset"
                )
        if KAFKA_10527 in self.spec_defects - self.defects and key in (
            "votedFor",
            "role",
            "leader",
        ):
            return (
                f"kafkalab's quorum-state file kept {n}'s vote and leader of epoch {c.epoch} "
                f"(written and fsynced before a vote is granted; a former leader restarts "
                f"Resigned, KAFKA-10527); the spec's PersistElectionState = FALSE lost them in "
                f"the restart"
            )
        if self.defects - self.spec_defects:
            return (
                f"kafkalab runs with {', '.join(sorted(self.defects - self.spec_defects))} "
                f"switched on, the spec's configuration without it"
            )
        return ""

    def violations(self) -> list[str]:
        """The spec's invariants that kafkalab's voters break now."""
        out = []
        by_epoch: dict[int, set[str]] = {}
        for e, n in self.elected:
            by_epoch.setdefault(e, set()).add(n)
        for e, leaders in sorted(by_epoch.items()):
            if len(leaders) > 1:
                out.append(f"ElectionSafety: epoch {e} had leaders {', '.join(sorted(leaders))}")
        for o, rec_epoch, by in sorted(self.committed):
            for n, c in self.clients.items():
                if c.is_leader() and c.epoch > by:
                    entries = c.log.entries
                    if len(entries) <= o or entries[o].epoch != rec_epoch:
                        out.append(
                            f"LeaderCompleteness: the record of epoch {rec_epoch} at offset {o}, "
                            f"committed in epoch {by}, is not in the log of {n}, leader of "
                            f"epoch {c.epoch}"
                        )
        return out
