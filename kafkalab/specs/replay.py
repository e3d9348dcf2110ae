"""Replay a KafkaReplication trace against kafkalab's own replication code.

Each spec replica becomes a real `Partition` on a real `UnifiedLog` (in a temp
dir). Step by step, the action the spec took is recognised from what changed,
performed with the implementation's API (make_leader, make_follower +
truncate_by_rule, append_records_to_leader, a fetch's read and
append_records_to_follower, update_follower_fetch_state, apply_isr_change),
and then each replica's log (record ids and epochs), leader epoch, epoch cache
and HW are compared with the spec's next state. The first difference stops the
replay with a `ReplayMismatch` naming the step, the action and the values.

Before a leader-side call the replay tells the leader the LEO of every ISR
member that follows it in its epoch (update_follower_fetch_state: the fetches
the spec abstracts), so the implementation computes its HW from what the spec's
HW is computed from.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kafkalab.errors import KafkaError
from kafkalab.records import SimpleRecord, build_batch, iter_batches
from kafkalab.replication.partition import Partition, Role
from kafkalab.specs.trace import Trace, load_trace
from kafkalab.specs.trace_actions import NONE, infer_action
from kafkalab.storage.unified_log import UnifiedLog


class ReplayMismatch(AssertionError):
    def __init__(self, step: int, action: str, detail: str) -> None:
        super().__init__(f"step {step} ({action}): implementation and spec disagree: {detail}")
        self.step, self.action, self.detail = step, action, detail


@dataclass
class ReplayReport:
    rule: str
    steps: list[dict] = field(default_factory=list)  # step, action, what the code did

    def table(self):
        import pandas as pd

        return pd.DataFrame(self.steps).set_index("step")


def _broker_id(name: str) -> int:
    digits = "".join(ch for ch in name if ch.isdigit())
    return int(digits) if digits else abs(hash(name)) % 1000 + 1


def _records(p: Partition) -> list[dict]:
    log = p.log
    if log.log_end_offset == log.log_start_offset:
        return []
    data = log.read(log.log_start_offset, 1 << 24).read_bytes()
    return [
        {"id": int(r.value), "epoch": b.header.partition_leader_epoch}
        for b in iter_batches(data)
        for r in b.records
    ]


def replay_replication(
    source: str | Path | dict | Trace, truncation_rule: str | None = None
) -> ReplayReport:
    """Replay every step; raise ReplayMismatch at the first disagreement."""
    trace = source if isinstance(source, Trace) else load_trace(source)
    rule = truncation_rule or _constant(trace, "TruncationRule")
    report = ReplayReport(rule)
    first = trace.states[0]
    names = sorted(first["log"])
    ids = {r: _broker_id(r) for r in names}
    with tempfile.TemporaryDirectory(prefix="kafkalab-replay-") as tmp:
        parts = {
            r: Partition(
                "spec",
                0,
                ids[r],
                UnifiedLog(Path(tmp) / r / "spec-0"),
                truncation_rule=rule,
            )
            for r in names
        }
        try:
            for step in range(1, len(trace.states)):
                before, after = trace.states[step - 1], trace.states[step]
                action, args = infer_action(before, after)
                did = _perform(action, args, before, after, parts, ids, step)
                _compare(step, f"{action}{args}", action, args, after, parts, ids)
                report.steps.append(
                    {"step": step, "action": f"{action}({', '.join(args)})", "implementation": did}
                )
        finally:
            for p in parts.values():
                p.log.close()
    return report


def _constant(trace: Trace, name: str):
    constants = trace.meta.get("constants") or {}
    if name not in constants:
        raise ValueError(f"the trace does not say its {name}; pass it to the replay")
    return constants[name]


def _perform(action, args, before, after, parts, ids, step) -> str:
    now = step * 1000
    if action == "BecomeLeader":
        (r,) = args
        isr = sorted(ids[x] for x in after["isr"][r])
        parts[r].make_leader(after["epoch"][r], isr, sorted(ids.values()), step, now)
        return f"make_leader(epoch {after['epoch'][r]}, isr {isr})"
    if action == "BecomeFollower":
        (r,) = args
        leader = after["leader"][r]
        isr = sorted(ids[x] for x in after["isr"][r])
        p = parts[r]
        p.make_follower(
            ids[leader] if leader != NONE else -1,
            after["epoch"][r],
            isr,
            sorted(ids.values()),
            step,
        )
        if leader == NONE:
            return "make_follower(no leader)"
        lp = parts[leader]
        try:  # OffsetForLeaderEpoch answered by the leader's own code, fencing included
            rounds = p.truncate_by_rule(lp.last_offset_for_leader_epoch)
        except KafkaError as e:
            raise ReplayMismatch(
                step, f"BecomeFollower({r})", f"the spec truncates, but {leader} refuses: {e}"
            ) from e
        return f"make_follower({leader}), truncation rounds {rounds}"
    if action == "LeaderWrite":
        (r,) = args
        p = parts[r]
        _fetches_reach(r, before, parts, ids, now)
        p.append_records_to_leader(
            build_batch([SimpleRecord(str(before["nextId"]).encode())]), 1, 1
        )
        return f"append_records_to_leader(r{before['nextId']}): HW {p.log.high_watermark}"
    if action == "FollowerFetch":
        (f,) = args
        p, lp = parts[f], parts[before["leader"][f]]
        leo = p.log.log_end_offset
        data = b""
        if lp.log.log_end_offset > leo:
            data = lp.log.read(leo, 1 << 20, max_offset=leo + 1).read_bytes()
        p.append_records_to_follower(data, lp.log.high_watermark)
        return f"fetch from {leo}: {len(data)} bytes, leader HW {lp.log.high_watermark}"
    if action == "LeaderIncreaseHw":
        (ldr,) = args
        _fetches_reach(ldr, before, parts, ids, now)
        return f"fetches from the ISR reach the leader: HW {parts[ldr].log.high_watermark}"
    if action == "LeaderLearnsIsr":
        (ldr,) = args
        _fetches_reach(ldr, before, parts, ids, now)
        new_isr = sorted(ids[x] for x in after["isr"][ldr])
        parts[ldr].apply_isr_change(new_isr, step)
        return f"apply_isr_change({new_isr}) from the metadata log"
    if action in ("LeaderShrinkIsr", "LeaderExpandIsr"):
        ldr, f = args
        lp = parts[ldr]
        _fetches_reach(ldr, before, parts, ids, now)
        if action == "LeaderExpandIsr":
            change = lp.update_follower_fetch_state(ids[f], parts[f].log.log_end_offset, now)
            if change is None or ids[f] not in change.new_isr:
                raise ReplayMismatch(
                    step, f"{action}{args}", f"the leader would not add {f} to its ISR"
                )
        new_isr = sorted(ids[x] for x in after["quorum"]["isr"])
        lp.apply_isr_change(new_isr, step)
        return f"apply_isr_change({new_isr}): HW {lp.log.high_watermark}"
    if action == "Crash":
        (r,) = args
        if r not in parts:
            return "power failure of a broker that holds nothing"
        keep = len(after["log"][r])
        p = parts[r]
        p.log.truncate_to(keep)  # what survives the power cut
        p.role, p.leader_id, p.leader_epoch = Role.NONE, -1, -1  # a restarted broker
        return f"power failure: {keep} records survive"
    return "controller only"


def _fetches_reach(ldr: str, before: dict, parts: dict, ids: dict, now: int) -> None:
    """The leader hears the LEO of every ISR member that follows it in its epoch."""
    lp = parts[ldr]
    for f in before["isr"][ldr]:
        if f != ldr and before["leader"][f] == ldr and before["epoch"][f] == before["epoch"][ldr]:
            lp.update_follower_fetch_state(ids[f], parts[f].log.log_end_offset, now)


def _compare(step, label, action, args, after, parts, ids) -> None:
    for r, p in parts.items():
        got = _records(p)
        if got != after["log"][r]:
            raise ReplayMismatch(
                step, label, f"{r}'s log is {got}, the spec says {after['log'][r]}"
            )
        cache = [
            {"epoch": e.epoch, "start": e.start_offset} for e in p.log.leader_epoch_cache.entries
        ]
        if cache != after["cache"][r]:
            raise ReplayMismatch(
                step, label, f"{r}'s epoch cache is {cache}, the spec says {after['cache'][r]}"
            )
        if after["epoch"][r] >= 0 and p.leader_epoch != after["epoch"][r]:
            raise ReplayMismatch(
                step,
                label,
                f"{r}'s leader epoch is {p.leader_epoch}, the spec says {after['epoch'][r]}",
            )
        if after["leader"][r] == r and sorted(p.isr) != sorted(ids[x] for x in after["isr"][r]):
            raise ReplayMismatch(
                step, label, f"{r}'s ISR is {p.isr}, the spec says {after['isr'][r]}"
            )
        if p.log.high_watermark != after["hw"][r]:
            raise ReplayMismatch(
                step, label, f"{r}'s HW is {p.log.high_watermark}, the spec says {after['hw'][r]}"
            )


def random_trace(module: str | Path, steps: int, seed: int) -> Trace:
    """A random walk of up to `steps` steps through a spec (its MC_*.tla with a
    ConstInit): a trace to replay when the spec has no counterexample to offer."""
    return load_trace(random_walk(module, steps, seed))


def random_walk(module: str | Path, steps: int, seed: int) -> dict:
    """The same random walk as an ITF document (TLA+ values kept exact)."""
    import random

    from kafkalab.specs.tla import load_module, solve_constants
    from kafkalab.specs.tla.itf import trace_to_itf

    mod = load_module(str(module))
    constants = solve_constants(mod, "ConstInit", None)
    rng = random.Random(seed)
    state = rng.choice(mod.initial_states("Init", constants))
    states = [state]
    for _ in range(steps):
        options = mod.successors(state, "Next", constants)
        if not options:
            break
        state = rng.choice(options)[1]
        states.append(state)
    doc = trace_to_itf(mod.variables, states, source=Path(module).name)
    doc["#meta"]["constants"] = {k: v for k, v in constants.items() if isinstance(v, str | int)}
    return doc


# -- transactions ---------------------------------------------------------------------------


def _txn_log(log: UnifiedLog) -> list[dict]:
    """A partition as the transactions spec writes it: data (epoch, seq, id) and markers."""
    from kafkalab.records.control_record import ControlRecordType, control_record_type

    if log.log_end_offset == log.log_start_offset:
        return []
    out = []
    for b in iter_batches(log.read(log.log_start_offset, 1 << 24).read_bytes()):
        h = b.header
        if h.is_control_batch:
            kind = control_record_type(b.records[0])
            out.append(
                {
                    "kind": "commit" if kind == ControlRecordType.COMMIT else "abort",
                    "epoch": h.producer_epoch,
                }
            )
        else:
            for i, r in enumerate(b.records):
                out.append(
                    {
                        "kind": "data",
                        "epoch": h.producer_epoch,
                        "seq": h.base_sequence + i,
                        "id": int(r.value),
                    }
                )
    return out


def _spec_txn_log(entries: list[dict]) -> list[dict]:
    return [
        {"kind": "data", "epoch": e["epoch"], "seq": e["seq"], "id": e["id"]}
        if e["kind"] == "data"
        else {"kind": e["kind"], "epoch": e["epoch"]}
        for e in entries
    ]


def kafka_17754_trace(version: int) -> dict:
    """KAFKA-17754 in the transactions spec under transaction version `version`
    (MC_transactions_delayed_v1 / _v2), as an ITF document: the checker's
    shortest way to transaction 2 Ongoing with a record in t0 while transaction
    1's EndTxn (its first attempt) is still held in the network, then the step
    where that request arrives."""
    from kafkalab.specs.runner import SPECS_DIR
    from kafkalab.specs.tla import check, load_module, solve_constants
    from kafkalab.specs.tla.itf import trace_to_itf

    module = str(SPECS_DIR / "transactions" / f"MC_transactions_delayed_v{version}.tla")
    there = (
        '~(delayed # {} /\\ coordinator.state = "Ongoing" /\\ 2 \\in coordinator.txns'
        ' /\\ DataOffsets("t0", 2) # {})'
    )
    result = check(module, invariants=[there], cinit="ConstInit")
    if result.verdict != "violation":
        raise AssertionError(f"the scenario is not reachable in {module}: {result.summary()}")
    mod = load_module(module)
    constants = solve_constants(mod, "ConstInit", None)
    (arrives,) = [
        s for _, s in mod.successors(result.trace[-1], "Next", constants) if not s["delayed"]
    ]
    doc = trace_to_itf(mod.variables, [*result.trace, arrives], source=Path(module).name)
    doc["#meta"]["constants"] = {k: v for k, v in constants.items() if isinstance(v, str | int)}
    return doc


class TransactionVersionNotServed(RuntimeError):
    """The trace is of transaction version 2 (KIP-890 part 2: the epoch bumped at
    every EndTxn) and kafkalab's TransactionStateMachine offers no version-2 mode
    (no `transaction_version` parameter on its EndTxn) to replay it on."""


def _transaction_version(trace: Trace) -> int:
    # traces saved before the spec had the switch are of version 1
    return int((trace.meta.get("constants") or {}).get("TransactionVersion", 1))


def coordinator_serves_transaction_version(version: int) -> bool:
    """Whether TransactionStateMachine can be built for `version` (1 always)."""
    import inspect

    from kafkalab.coordinator.transaction import TransactionStateMachine

    return (
        version == 1
        or "transaction_version" in inspect.signature(TransactionStateMachine.end_txn).parameters
    )


def replay_transactions(
    source: str | Path | dict | Trace, bump_epoch_on_init: bool | None = None
) -> ReplayReport:
    """Replay a KafkaTransactions trace against kafkalab's TransactionStateMachine
    (the coordinator) and real UnifiedLogs (the partitions, whose producer state
    fences old epochs and drops duplicates). After every step the coordinator's
    state, epoch, partitions and pending markers, and every partition's batches,
    must be what the spec says; and so must what a read_committed consumer sees:
    each log's last stable offset and the data below it that the broker's read
    path (the LSO, the aborted transactions from the `.txnindex`) leaves visible,
    against the spec's own `Lso(p)` and `Visible(p)`, evaluated in the trace's
    state. The spec has one replica, so the HW is the log end offset."""
    trace = source if isinstance(source, Trace) else load_trace(source)
    bump = (
        bump_epoch_on_init
        if bump_epoch_on_init is not None
        else bool(_constant(trace, "BumpEpochOnInit"))
    )
    version = _transaction_version(trace)
    if not coordinator_serves_transaction_version(version):
        raise TransactionVersionNotServed(
            f"the trace is of transaction version {version}: kafkalab's "
            "TransactionStateMachine.end_txn takes no transaction_version to replay it on"
        )
    report = ReplayReport(f"BumpEpochOnInit={bump}, TransactionVersion={version}")
    spec = _transactions_module()
    constants = {
        k: v for k, v in (trace.meta.get("constants") or {}).items() if k in spec.constants
    }
    with tempfile.TemporaryDirectory(prefix="kafkalab-replay-txn-") as tmp:
        replay = _TransactionsReplay(Path(tmp), sorted(trace.states[0]["log"]), bump, version)
        try:
            for step in range(1, len(trace.states)):
                b, a = trace.states[step - 1], trace.states[step]
                did = replay.step(step, b, a)
                _compare_txn(step, did, replay.machine, a["coordinator"], replay.logs, a)
                _compare_read_committed(step, did, replay.logs, a, spec, constants)
                report.steps.append({"step": step, "action": did})
        finally:
            for log in replay.logs.values():
                log.close()
    return report


class _TransactionsReplay:
    """The coordinator and the partitions a KafkaTransactions trace is replayed on:
    `step` finds the spec action that leads from one state to the next and does it
    to them, one method per action; returns what it did."""

    PID = 1000

    def __init__(self, tmp: Path, partitions: list[str], bump: bool, version: int = 1) -> None:
        self.bump = bump
        self.version = version
        self.machine = self.new_machine()
        self.logs = {p: UnifiedLog(tmp / f"{p}-0") for p in partitions}

    def new_machine(self):
        from kafkalab.coordinator.transaction import TransactionStateMachine

        return TransactionStateMachine(self.PID, bump_epoch_on_init=self.bump)

    @property
    def speaks(self) -> dict:
        """The transaction version a request's version says the client speaks (as
        EndTxn v5+ and Produce v12+ do): passed to version-2 calls only."""
        return {"transaction_version": self.version} if self.version >= 2 else {}

    def step(self, step: int, b: dict, a: dict) -> str:
        bc, ac = b["coordinator"], a["coordinator"]
        changed = [i for i in sorted(b["producer"]) if b["producer"][i] != a["producer"][i]]
        grown = [p for p in self.logs if len(a["log"][p]) > len(b["log"][p])]
        delivered = [m for m in b.get("delayed", []) if m not in a.get("delayed", [])]
        if delivered:
            return self.deliver_end_txn(delivered[0])
        if grown and a["log"][grown[0]][-1]["kind"] != "data":
            return self.write_marker(grown[0])
        if grown:
            return self.write(grown[0], b, a, changed)
        if bc["state"] in ("PrepareCommit", "PrepareAbort") and ac["state"].startswith("Complete"):
            self.machine.complete()
            return f"CompleteTxn: {ac['state']}"
        if changed and a["producer"][changed[0]]["status"] == "fenced":
            return self.fenced(step, changed[0], b)
        if (
            changed
            and b["producer"][changed[0]]["status"] != "inTxn"
            and a["producer"][changed[0]]["status"] == "ready"
        ):
            return f"InitProducerId({changed[0]}) -> {self.machine.init_producer_id()}"
        if (
            not changed
            and ac["state"] == "Empty"
            and bc["state"] in ("CompleteCommit", "CompleteAbort")
        ):
            # an instance that was ready already asks again: with the epoch kept
            # (the broken coordinator) only the coordinator's state moves
            got = self.machine.init_producer_id()
            return f"InitProducerId({a['owner']}) -> {got}, the instance unchanged"
        if ac["state"] == "PrepareAbort" and bc["state"] == "Ongoing" and not changed:
            return self.abort_open(bc, ac)
        if changed:
            return self.producer_step(step, changed[0], b, a)
        if a["failovers"] > b["failovers"]:
            saved = self.machine.current
            self.machine = self.new_machine()  # a new coordinator from the persisted state
            self.machine.current = saved
            return "coordinator failover: state reloaded"
        return "nothing changes"

    def deliver_end_txn(self, m: dict) -> str:
        """The held first attempt of an EndTxn reaches the coordinator: it carries
        only the producer id, its epoch and commit or abort."""
        what = f"the held EndTxn({'commit' if m['commit'] else 'abort'}) of txn {m['txn']}"
        try:
            self.machine.end_txn(m["epoch"], m["commit"], **self.speaks)
        except KafkaError as e:
            return f"{what} arrives, refused: {e}"
        return f"{what} arrives with epoch {m['epoch']}: the coordinator is {self.machine.current.state}"

    def write_marker(self, p: str) -> str:
        from kafkalab.records.control_record import ControlRecordType, build_end_txn_marker_batch
        from kafkalab.storage.unified_log import AppendOrigin

        m = self.machine
        marker = ControlRecordType.COMMIT if m.marker == "COMMIT" else ControlRecordType.ABORT
        epoch = m.current.producer_epoch
        self.logs[p].append_as_leader(
            build_end_txn_marker_batch(self.PID, epoch, marker, 0), 0, AppendOrigin.COORDINATOR
        )
        m.marker_written(p)
        return f"WriteMarker({p}): {m.marker} with epoch {epoch}"

    def write(self, p: str, b: dict, a: dict, changed: list[str]) -> str:
        e = a["log"][p][-1]
        # the writer: its sequence moved, or (a retry) it has this epoch
        i = (
            changed
            or [
                j
                for j in sorted(b["producer"])
                if b["producer"][j]["epoch"] == e["epoch"] and b["producer"][j]["status"] == "inTxn"
            ]
        )[0]
        self._append_data(p, str(e["id"]).encode(), b["producer"][i]["epoch"], e["seq"])
        return f"Write({i}, {p}): id {e['id']} epoch {e['epoch']} seq {e['seq']}"

    def _append_data(self, p: str, value: bytes, epoch: int, sequence: int) -> None:
        batch = build_batch(
            [SimpleRecord(value)],
            producer_id=self.PID,
            producer_epoch=epoch,
            base_sequence=sequence,
            is_transactional=True,
        )
        self.logs[p].append_as_leader(batch)

    def fenced(self, step: int, i: str, b: dict) -> str:
        from kafkalab.storage.errors import StorageError

        epoch = b["producer"][i]["epoch"]
        try:
            if epoch < self.machine.current.producer_epoch:
                self.machine.add_partitions(epoch, [])
            else:
                p = next(q for q in self.logs if b["pstate"][q]["epoch"] > epoch)
                self._append_data(p, b"zombie", epoch, 0)
        except (KafkaError, StorageError) as e:
            return f"{i} fenced: {e}"
        raise ReplayMismatch(step, "fenced", f"{i} (epoch {epoch}) was not fenced")

    def abort_open(self, bc: dict, ac: dict) -> str:
        if ac["epoch"] > bc["epoch"]:
            self.machine.timeout_abort()
            return "the open transaction is aborted with a new epoch"
        try:
            self.machine.init_producer_id()
        except KafkaError as e:
            return f"InitProducerId aborts the open transaction: {e}"
        return "nothing changes"

    def producer_step(self, step: int, i: str, b: dict, a: dict) -> str:
        before, now = b["producer"][i], a["producer"][i]
        if before["status"] == "ready" and now["status"] == "inTxn":
            return f"BeginTxn({i})"
        if before["status"] == "inTxn" and now["status"] == "ready":
            if a["coordinator"] == b["coordinator"]:
                return f"EndTxn({i}) of an empty transaction"
            commit = a["coordinator"]["state"] == "PrepareCommit"
            self.machine.end_txn(before["epoch"], commit, **self.speaks)
            held = len(a.get("delayed", [])) > len(b.get("delayed", []))
            return f"EndTxn({i}, {'commit' if commit else 'abort'})" + (
                ", its first attempt held in the network" if held else ""
            )
        added = set(now["parts"]) - set(before["parts"])
        if added:
            (p,) = added
            self.machine.add_partitions(before["epoch"], [p], **self.speaks)
            return f"AddPartitionsToTxn({i}, {p})"
        raise ReplayMismatch(step, "?", f"no action of the spec explains {i}")


def _compare_txn(step, did, machine, ac, logs, after) -> None:
    s = machine.current
    ours = {
        "state": s.state,
        "epoch": s.producer_epoch,
        "partitions": sorted(s.partitions),
        "pending": sorted(s.pending_markers),
    }
    spec = {
        "state": ac["state"],
        "epoch": ac["epoch"],
        "partitions": sorted(ac["partitions"]),
        "pending": sorted(ac["pending"]),
    }
    if ours != spec:
        raise ReplayMismatch(step, did, f"the coordinator is {ours}, the spec says {spec}")
    for p, log in logs.items():
        got, want = _txn_log(log), _spec_txn_log(after["log"][p])
        if got != want:
            raise ReplayMismatch(step, did, f"partition {p} holds {got}, the spec says {want}")


def _transactions_module():
    from kafkalab.specs.runner import SPECS_DIR
    from kafkalab.specs.tla.module import load_module

    return load_module(str(SPECS_DIR / "transactions" / "KafkaTransactions.tla"))


def read_committed_offsets(log: UnifiedLog) -> list[int]:
    """The offsets a read_committed consumer returns from `log`, read as the broker
    serves them: batches below the last stable offset, with the aborted
    transactions of that range (from the `.txnindex`); the consumer drops a
    producer's batches from an aborted transaction's first offset to its marker,
    and never returns control batches."""
    lso = log.last_stable_offset
    if lso <= log.log_start_offset:
        return []
    data = log.read(log.log_start_offset, 1 << 24, max_offset=lso).read_bytes()
    aborted = log.collect_aborted_transactions(log.log_start_offset, lso)
    out = []
    for batch in iter_batches(data):
        h = batch.header
        if h.is_control_batch or any(
            t.producer_id == h.producer_id and t.first_offset <= h.base_offset <= t.last_offset
            for t in aborted
        ):
            continue
        out += [r.offset for r in batch.records if r.offset < lso]
    return out


def _compare_read_committed(step, did, logs, after, spec, constants) -> None:
    state = {v: after[v] for v in spec.variables}
    for p, log in logs.items():
        log.update_high_watermark(log.log_end_offset)  # one replica: HW = LEO
        spec_lso = spec.evaluate(f'Lso("{p}")', constants=constants, state=state)
        if log.last_stable_offset != spec_lso:
            raise ReplayMismatch(
                step,
                did,
                f"partition {p}: the LSO is {log.last_stable_offset}, the spec's Lso is {spec_lso}",
            )
        visible = read_committed_offsets(log)
        spec_visible = sorted(spec.evaluate(f'Visible("{p}")', constants=constants, state=state))
        if visible != spec_visible:
            raise ReplayMismatch(
                step,
                did,
                f"partition {p}: read_committed returns offsets {visible}, the spec's "
                f"Visible is {spec_visible}",
            )
