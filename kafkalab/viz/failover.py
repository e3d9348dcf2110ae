"""Failovers as pictures (matplotlib): one failover's phases on a time line, and
the distribution of many.

    failover_timeline_plot(timeline)      # kafkalab.cluster.failover.FailoverTimeline
    failover_histogram(timelines)
    controller_failover_plot(timeline)    # kafkalab.cluster.controller_failover's
"""

from __future__ import annotations

from kafkalab.cluster import controller_failover
from kafkalab.cluster.failover import PHASES

_COLOURS = dict(zip(PHASES, ["#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc", "#fc9272"], strict=True))
_CONTROLLER_COLOURS = dict(
    zip(
        controller_failover.PHASES,
        ["#9ecae1", "#fdae6b", "#fdd0a2", "#a1d99b", "#c7e9c0", "#bcbddc", "#fcbba1", "#fc9272"],
        strict=True,
    )
)


def _phase_bars(ax, table, phases, colours) -> None:
    """One bar per phase (the rows of a timeline's phases()), labelled with its duration."""
    for row, phase in enumerate(reversed(phases)):
        r = table.set_index("phase").loc[phase]
        if r["ms"] is None or r["ms"] != r["ms"]:  # missing (NaN)
            continue
        ax.broken_barh([(r["start ms"], max(r["ms"], 1))], (row - 0.4, 0.8), color=colours[phase])
        label = f"{r['ms']:.0f} ms" if r["ms"] >= 1 else "<1 ms"
        ax.text(r["end ms"] + 5, row, label, va="center", fontsize=9)
    ax.set_yticks(range(len(phases)), list(reversed(phases)))
    ax.axvline(0, color="black", lw=1)


def failover_timeline_plot(timeline, ax=None):
    """One bar per phase, from the kill (0 ms) to the first acknowledged record,
    each labelled with its duration."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(9, 2.8))
    _phase_bars(ax, timeline.phases(), PHASES, _COLOURS)
    ax.set_xlabel("ms after the SIGKILL")
    ax.set_title(
        f"{timeline.topic}-{timeline.partition}: broker {timeline.killed} killed, "
        f"broker {timeline.new_leader} leads (epoch {timeline.leader_epoch}); "
        f"first ack after {timeline.total_ms:.0f} ms"
    )
    ax.figure.tight_layout()
    return ax


def failover_histogram(timelines, ax=None, bins: int = 20):
    """How long failovers took: a histogram of kill -> first ack, with the median."""
    import statistics

    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3))
    totals = [t.total_ms for t in timelines if t.total_ms is not None]
    ax.hist(totals, bins=bins, color="#9ecae1", edgecolor="white")
    median = statistics.median(totals)
    ax.axvline(median, color="black", linestyle="--", lw=1)
    ax.text(median, ax.get_ylim()[1] * 0.9, f" median {median:.0f} ms", fontsize=9)
    ax.set_xlabel("kill -> first acknowledged record (ms)")
    ax.set_ylabel("failovers")
    ax.set_title(f"{len(totals)} failovers")
    ax.figure.tight_layout()
    return ax


def controller_failover_plot(timeline, ax=None):
    """A controller failover's phases, from the SIGKILL of the active controller (0 ms)
    to the first record acknowledged in a topic created under the new one."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(9, 3.4))
    phases = controller_failover.PHASES
    _phase_bars(ax, timeline.phases(), phases, _CONTROLLER_COLOURS)
    ax.set_xlabel("ms after the SIGKILL of the active controller")
    total = (
        "no record acknowledged"
        if timeline.total_ms is None
        else (f"first record after {timeline.total_ms:.0f} ms")
    )
    ax.set_title(
        f"controller {timeline.killed} (epoch {timeline.old_epoch}) killed, "
        f"{timeline.new_leader} leads epoch {timeline.epoch}; {total}"
    )
    ax.figure.tight_layout()
    return ax
