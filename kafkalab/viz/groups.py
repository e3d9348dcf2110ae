"""Consumer groups as pictures: the classic group state machine with the path a
group took, who owned which partition after each rebalance, and a rebalance
timeline measured on real consumers. Used by labs/06_groups.

    group_state_graph(group.transitions)          # graphviz: GroupState and its edges
    assignment_grid(steps, partitions, ax=None)   # matplotlib: partition x step, coloured by owner
    rebalance_timeline_plot(samples, ax=None)     # matplotlib: one row per member over time
    unowned_intervals(samples, partitions)        # when partitions had no owner

The state machine is drawn from the coordinator's own data: the states of
`GroupState` and the edges of `VALID_PREVIOUS_STATES` (every transition
`ClassicGroup.transition_to` accepts), so the picture cannot disagree with
the code. The path is `ClassicGroup.transitions`: (time ms, from, to) triples.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import graphviz

from kafkalab.coordinator.group.classic_group import VALID_PREVIOUS_STATES, GroupState
from kafkalab.viz.pictures import state_machine_graph

TopicPartition = tuple[str, int]

_STATE_COLOURS = {
    GroupState.EMPTY: "#eeeeee",
    GroupState.PREPARING_REBALANCE: "#fde2c8",
    GroupState.COMPLETING_REBALANCE: "#fff3b0",
    GroupState.STABLE: "#d9f0d3",
    GroupState.DEAD: "#f3d1d1",
}
_MEMBER_COLOURS = [
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
]


def group_state_graph(
    transitions: Iterable[tuple[int, GroupState, GroupState]] = (),
    title: str | None = None,
) -> graphviz.Digraph:
    """Every state of a classic group and every allowed transition (grey); the
    transitions taken drawn thick and red, labelled with their step numbers and
    times; the state the group is in now (the last transition's target) bold."""
    path = [
        (src.value, dst.value, f"{step}@{at_ms}ms")
        for step, (at_ms, src, dst) in enumerate(transitions, start=1)
    ]
    edges = [
        (src.value, dst.value, "", "dashed" if dst is GroupState.DEAD else "solid")
        for dst, sources in VALID_PREVIOUS_STATES.items()
        for src in sorted(sources, key=lambda s: s.value)
        if src is not dst
    ]
    return state_machine_graph(
        {state.value: _STATE_COLOURS[state] for state in GroupState},
        edges,
        path,
        GroupState.EMPTY.value,
        title,
    )


def member_colours(members: Iterable[str]) -> dict[str, str]:
    """A fixed colour per member, in the order given."""
    return {m: _MEMBER_COLOURS[i % len(_MEMBER_COLOURS)] for i, m in enumerate(members)}


def assignment_grid(
    steps: Sequence[tuple[str, Mapping[str, Iterable[TopicPartition]]]],
    partitions: Sequence[TopicPartition],
    ax=None,
    title: str = "",
):
    """A heat grid: one row per partition, one column per step (label, {member:
    partitions}); a cell is coloured by the member that owns the partition after
    that step (white: nobody), and marked with a dot where the owner changed from
    the step before."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    members: list[str] = []
    for _, owners in steps:
        for m in owners:
            if m not in members:
                members.append(m)
    colours = member_colours(members)
    index = {m: i + 1 for i, m in enumerate(members)}
    grid = [[0] * len(steps) for _ in partitions]
    row_of = {tp: r for r, tp in enumerate(partitions)}
    for col, (_, owners) in enumerate(steps):
        for m, parts in owners.items():
            for tp in parts:
                grid[row_of[tp]][col] = index[m]
    if ax is None:
        _, ax = plt.subplots(figsize=(1.2 + 1.1 * len(steps), 0.3 * len(partitions) + 1.2))
    cmap = ListedColormap(["#ffffff"] + [colours[m] for m in members])
    ax.imshow(grid, cmap=cmap, vmin=0, vmax=len(members), aspect="auto")
    for r in range(len(partitions)):
        for col in range(1, len(steps)):
            if grid[r][col] != grid[r][col - 1] and grid[r][col - 1] != 0:
                ax.plot(col, r, "o", color="black", markersize=4)
    ax.set_xticks(range(len(steps)), [label for label, _ in steps], rotation=20, ha="right")
    ax.set_yticks(range(len(partitions)), [f"{t}-{p}" for t, p in partitions], fontsize=8)
    ax.set_xticks([x - 0.5 for x in range(1, len(steps))], minor=True)
    ax.grid(which="minor", axis="x", color="white", lw=2)
    ax.tick_params(which="minor", length=0)
    ax.set_title(title)
    ax.legend(
        handles=[Patch(color=colours[m], label=m) for m in members],
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        fontsize=8,
    )
    return ax


def unowned_intervals(
    samples: Mapping[str, Sequence[tuple[float, frozenset]]],
    partitions: Iterable[TopicPartition],
    end: float,
) -> list[tuple[float, float, int]]:
    """From each member's assignment samples [(t, partitions it holds from t on)],
    the intervals (start, end, how many) during which some partitions had no owner
    at all, up to `end`. Before a member's first sample it holds nothing."""
    every = set(partitions)
    times = sorted({t for series in samples.values() for t, _ in series})
    out: list[tuple[float, float, int]] = []
    for i, t in enumerate(times):
        owned: set = set()
        for series in samples.values():
            held = frozenset()
            for at, parts in series:
                if at <= t:
                    held = parts
            owned |= held
        missing = len(every - owned)
        stop = times[i + 1] if i + 1 < len(times) else end
        if missing and stop > t:
            out.append((t, stop, missing))
    return out


def rebalance_timeline_plot(
    samples: Mapping[str, Sequence[tuple[float, frozenset]]],
    partitions: Sequence[TopicPartition],
    end: float,
    ax=None,
    title: str = "",
    events: Sequence[tuple[float, str]] = (),
):
    """One row per member: a bar for each stretch of time it held partitions,
    labelled with those partition numbers; below them a red row where partitions
    had no owner (the stop-the-world gap of an eager rebalance). `samples` maps a
    member to [(seconds, frozenset of (topic, partition))] in time order, each
    sample the member's assignment from that time on; `events` are vertical
    markers (seconds, label), e.g. "c joins"."""
    import matplotlib.pyplot as plt

    members = list(samples)
    colours = member_colours(members)
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 0.6 * len(members) + 1.6))
    rows = len(members)
    for row, m in enumerate(members):
        y = rows - row
        series = list(samples[m])
        for i, (t, parts) in enumerate(series):
            stop = series[i + 1][0] if i + 1 < len(series) else end
            if not parts or stop <= t:
                continue
            ax.broken_barh([(t, stop - t)], (y - 0.35, 0.7), color=colours[m], alpha=0.85)
            if stop - t > 0.04 * end:  # room for a label
                label = ",".join(str(p) for _, p in sorted(parts))
                ax.text(t + 0.01 * end, y, label, va="center", fontsize=8, color="white")
    gaps = unowned_intervals(samples, partitions, end)
    for t, stop, n in gaps:
        ax.broken_barh(
            [(t, stop - t)], (-0.35, 0.7), color="#d62728", alpha=0.3 + 0.7 * n / len(partitions)
        )
    for t, label in events:
        ax.axvline(t, color="black", lw=0.8, ls="--")
        ax.text(t, rows + 0.6, label, fontsize=8, ha="left", va="bottom")
    ax.set_yticks(
        range(0, rows + 1), ["no owner"] + [str(m) for m in reversed(members)], fontsize=9
    )
    ax.set_ylim(-0.7, rows + 1.2)
    ax.set_xlim(0, end)
    ax.set_xlabel("seconds")
    ax.set_title(title)
    ax.figure.tight_layout()
    return ax
