"""Failovers as pictures (matplotlib): one failover's phases on a time line, and
the distribution of many.

    failover_timeline_plot(timeline)      # kafkalab.cluster.failover.FailoverTimeline
    failover_histogram(timelines)
"""

from __future__ import annotations

from kafkalab.cluster.failover import PHASES

_COLOURS = dict(zip(PHASES, ["#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc", "#fc9272"], strict=True))


def failover_timeline_plot(timeline, ax=None):
    """One bar per phase, from the kill (0 ms) to the first acknowledged record,
    each labelled with its duration."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(9, 2.8))
    table = timeline.phases()
    for row, phase in enumerate(reversed(PHASES)):
        r = table.set_index("phase").loc[phase]
        if r["ms"] is None or r["ms"] != r["ms"]:  # missing (NaN)
            continue
        ax.broken_barh([(r["start ms"], max(r["ms"], 1))], (row - 0.4, 0.8), color=_COLOURS[phase])
        label = f"{r['ms']:.0f} ms" if r["ms"] >= 1 else "<1 ms"
        ax.text(r["end ms"] + 5, row, label, va="center", fontsize=9)
    ax.set_yticks(range(len(PHASES)), list(reversed(PHASES)))
    ax.set_xlabel("ms after the SIGKILL")
    ax.axvline(0, color="black", lw=1)
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
