"""Counterexample traces as tables (pandas) and pictures (graphviz).

replication_table(trace)            # a row per step and replica
replication_graph(trace, step=-1)   # one step: logs, HW, epochs, ISR
kraft_table(trace, steps)           # a row per step and voter of a KafkaRaft trace
kraft_picture(trace, steps)         # the same as a grid: voters x steps (matplotlib)
transactions_table(trace)           # a row per step of a transactions trace
"""

from __future__ import annotations

from kafkalab.specs.trace import Trace
from kafkalab.specs.trace_actions import action_label

_EPOCH_COLOURS = ["#dbe9f6", "#fde2c8", "#d9f0d3", "#f3d1e6", "#fff3b0", "#e0e0e0"]


def _log_text(log: list[dict]) -> str:
    return " ".join(f"{r['id']}@e{r['epoch']}" for r in log) or "—"


def replication_table(trace: Trace):
    """One row per step and replica of a KafkaReplication trace: the action that
    led to the step, what the replica believes (leader, epoch, ISR), its log as
    record@epoch, LEO, HW and epoch cache; and the controller's quorum state."""
    import pandas as pd

    rows = []
    for step, state in enumerate(trace.states):
        action = action_label(trace, step)
        q = state["quorum"]
        for r in sorted(state["log"]):
            rows.append(
                {
                    "step": step,
                    "action": action or "",
                    "replica": r,
                    "believes leader": state["leader"][r],
                    "epoch": state["epoch"][r],
                    "log": _log_text(state["log"][r]),
                    "LEO": len(state["log"][r]),
                    "HW": state["hw"][r],
                    "epoch cache": " ".join(
                        f"{e['epoch']}@{e['start']}" for e in state["cache"][r]
                    ),
                    "ISR it knows": ",".join(state["isr"][r]),
                    "controller": f"{q['leader']} e{q['epoch']} isr={','.join(q['isr'])}",
                }
            )
    return pd.DataFrame(rows).set_index(["step", "replica"])


def kraft_table(trace: Trace, steps: list[str] | None = None):
    """One row per step and voter of a KafkaRaft trace: the step's name (from
    `steps`, e.g. follow_counterexample's, else the trace's own), the voter's
    role, epoch, vote, known leader, log (the epoch of each record), LEO and HW."""
    import pandas as pd

    rows = []
    for step, state in enumerate(trace.states):
        if step == 0:
            action = ""
        elif steps is not None:
            action = steps[step - 1]
        else:
            action = trace.actions[step] or ""
        for v in sorted(state["log"]):
            rows.append(
                {
                    "step": step,
                    "action": action,
                    "voter": v,
                    "role": state["role"][v],
                    "epoch": state["epoch"][v],
                    "voted for": state["votedFor"][v],
                    "leader": state["leader"][v],
                    "log": " ".join(f"e{e}" for e in state["log"][v]),
                    "LEO": len(state["log"][v]),
                    "HW": state["hw"][v],
                }
            )
    return pd.DataFrame(rows).set_index(["step", "voter"])


_ROLE_COLOURS = {
    "unattached": "#f0f0f0",
    "candidate": "#fde2c8",
    "leader": "#b7dfb0",
    "follower": "#dbe9f6",
    "resigned": "#e0d4ec",
}


def kraft_picture(trace: Trace, steps: list[str] | None = None, title: str = "", ax=None):
    """A KafkaRaft trace as a grid, voters x steps (matplotlib): each cell is one
    voter after one step, coloured by its role, with its epoch, its vote (`v:`), the
    leader it knows (`l:`) and its log as the epochs of its records, a `|` where
    its HW is. A column is headed by the step's name (from `steps`, e.g.
    follow_counterexample's); a thick border marks the voters the step changed."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    voters = sorted(trace.states[0]["log"])
    n = len(trace.states)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.05 * n + 0.8, 1.1 * len(voters) + 1.6))
    for step, state in enumerate(trace.states):
        before = trace.states[step - 1] if step else None
        for row, v in enumerate(voters):
            y = len(voters) - 1 - row
            changed = before is not None and any(
                before[k][v] != state[k][v] for k in ("role", "epoch", "votedFor", "log", "hw")
            )
            ax.add_patch(
                Rectangle(
                    (step + 0.04, y + 0.04),
                    0.92,
                    0.92,
                    facecolor=_ROLE_COLOURS.get(state["role"][v], "white"),
                    edgecolor="black",
                    linewidth=2.2 if changed else 0.5,
                )
            )
            records = [f"{e}" for e in state["log"][v]]
            if state["hw"][v]:
                records.insert(state["hw"][v], "|")
            lines = [
                f"{state['role'][v][:4]} e{state['epoch'][v]}",
                f"v:{_short(state['votedFor'][v])} l:{_short(state['leader'][v])}",
                "log " + (" ".join(records) or "-"),
            ]
            ax.text(step + 0.5, y + 0.5, "\n".join(lines), ha="center", va="center", fontsize=7)
    labels = ["initial"] + [
        (steps[i - 1] if steps is not None else trace.actions[i] or "Next")
        .replace('"', "")
        .replace(", ", ",")
        for i in range(1, n)
    ]
    ax.set_xticks(
        [s + 0.5 for s in range(n)],
        [f"{s}: {lab}" for s, lab in enumerate(labels)],
        rotation=45,
        ha="right",
        fontsize=7,
    )
    ax.set_yticks([len(voters) - 1 - r + 0.5 for r in range(len(voters))], voters)
    ax.set_xlim(0, n)
    ax.set_ylim(0, len(voters))
    ax.set_frame_on(False)
    ax.tick_params(length=0)
    ax.set_title(title or "voters x steps (role, epoch; v: vote, l: leader; log epochs, | = HW)")
    ax.figure.tight_layout()
    return ax


def _short(name: str) -> str:
    return "-" if name == "none" else name


def replication_graph(trace: Trace, step: int = -1, title: str = ""):
    """Step `step` of a KafkaReplication trace: each replica's log as cells
    (record id, coloured by epoch; a thick border below its HW), what it believes,
    and the controller's leader, epoch and ISR."""
    import graphviz

    state = trace.states[step]
    number = step if step >= 0 else len(trace.states) + step
    action = action_label(trace, number)
    q = state["quorum"]
    g = graphviz.Digraph(
        graph_attr={
            "rankdir": "LR",
            "label": title or f"step {number}: {action or 'initial state'}",
            "labelloc": "t",
            "fontname": "Helvetica",
        },
        node_attr={"fontname": "Helvetica", "fontsize": "10", "shape": "plaintext"},
    )
    g.node(
        "controller",
        label=f"controller\\nleader {q['leader']}, epoch {q['epoch']}\\nISR {{{', '.join(q['isr'])}}}",
        shape="box",
    )
    committed = {(c[0], c[1]["id"]) for c in state.get("committed", [])}
    for r in sorted(state["log"]):
        cells = []
        for offset, record in enumerate(state["log"][r]):
            colour = _EPOCH_COLOURS[record["epoch"] % len(_EPOCH_COLOURS)]
            border = ' BORDER="3"' if offset < state["hw"][r] else ""
            mark = "*" if (offset, record["id"]) in committed else ""
            cells.append(
                f'<TD BGCOLOR="{colour}"{border}>{offset}: r{record["id"]}{mark}'
                f"<BR/>e{record['epoch']}</TD>"
            )
        cells.append(f'<TD BORDER="0">LEO={len(state["log"][r])}<BR/>HW={state["hw"][r]}</TD>')
        role = "leader" if state["leader"][r] == r else f"follows {state['leader'][r]}"
        label = (
            f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0"><TR>'
            f'<TD BORDER="0"><B>{r}</B><BR/>{role}, epoch {state["epoch"][r]}</TD>'
            f"{''.join(cells)}</TR></TABLE>>"
        )
        g.node(r, label=label)
        g.edge("controller", r, style="dotted", arrowhead="none")
    return g


def transactions_table(trace: Trace):
    """One row per step of a KafkaTransactions trace: each producer instance's
    epoch and status, the coordinator's state, epoch and partitions, every
    partition's log (d<id>@e<epoch> for data, COMMIT/ABORT@e<epoch> for markers),
    who owns the transactional.id and, when the trace has delayed requests, the
    EndTxns held in the network (EndTxn(commit|abort)@e<epoch> of txn <t>)."""
    import pandas as pd

    rows = []
    for step, state in enumerate(trace.states):
        row = {"step": step}
        for i, p in sorted(state["producer"].items()):
            row[i] = f"{p['status']} e{p['epoch']}" + (f" txn {p['txn']}" if p["txn"] else "")
        c = state["coordinator"]
        row["coordinator"] = f"{c['state']} e{c['epoch']} {{{', '.join(c['partitions'])}}}"
        for p, entries in sorted(state["log"].items()):
            row[p] = (
                " ".join(
                    f"d{e['id']}@e{e['epoch']}"
                    if e["kind"] == "data"
                    else f"{e['kind'].upper()}@e{e['epoch']}"
                    for e in entries
                )
                or "—"
            )
        row["owner"] = state["owner"]
        if "delayed" in state:
            row["held in the network"] = (
                ", ".join(
                    f"EndTxn({'commit' if m['commit'] else 'abort'})@e{m['epoch']} of txn {m['txn']}"
                    for m in state["delayed"]
                )
                or "—"
            )
        rows.append(row)
    return pd.DataFrame(rows).set_index("step")
