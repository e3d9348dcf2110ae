"""The checker's verdicts as pictures (matplotlib): one key's log order against
what each process saw of it, anomalies marked, and unseen over time.

    verdict = check(history)                   # kafkalab.cluster.checker
    key_order_plot(history, verdict, ("t", 0))
    unseen_plot(verdict)
    lag_plot(verdict)
"""

from __future__ import annotations

#: an op's outcome as its marker's colour (Jepsen's: ok plain, info orange, fail pink)
_TYPE_COLOURS = {"ok": "#4c72b0", "info": "#ff9f1c", "fail": "#f48fb1"}
_BAD = "#d62728"


def _bad_offsets(verdict, key) -> dict[int, list[str]]:
    """offset -> the anomalies at it, for one key."""
    order = verdict.version_orders.get(key)
    marks: dict[int, list[str]] = {}

    def mark(offset, name):
        if offset is not None:
            marks.setdefault(offset, []).append(name)

    def offset_of(value):
        if order is None or value not in order.by_value:
            return None
        return order.offsets[order.by_value[value]]

    for name, cases in verdict.anomalies.items():
        for case in cases:
            if case.get("key") != key:
                continue
            if "offsets" in case:
                for o in case["offsets"]:
                    mark(o, name)
            elif "offset" in case:
                mark(case["offset"], name)
            for value in case.get("skipped", []):
                mark(offset_of(value), name)
            if "skipped" not in case:
                # unseen lists every value it concerns; the others end with the
                # observation the anomaly was found at
                values = case.get("values", [])
                for value in values if name == "unseen" else values[-1:]:
                    mark(offset_of(value), name)
    return marks


def _runs(marks: dict[int, list[str]]) -> list[tuple[int, int, str]]:
    """(first offset, last offset, label) of each run of consecutive offsets with
    the same anomalies: one shaded span and one label each, however many offsets."""
    out: list[tuple[int, int, str]] = []
    for offset, names in sorted(marks.items()):
        label = "\n".join(sorted(set(names)))
        if out and out[-1][1] == offset - 1 and out[-1][2] == label:
            out[-1] = (out[-1][0], offset, label)
        else:
            out.append((offset, offset, label))
    return out


def key_order_plot(history, verdict, key, ax=None):
    """Offsets on x; on y the log as every observation put it together (top row)
    and one row per process: a square where it sent a value, a dot where it polled
    one, coloured by the op's outcome; offsets with an anomaly are shaded red and
    named (a run of consecutive offsets with the same anomalies once, with its
    first and last offset)."""
    import matplotlib.pyplot as plt

    processes: list[str] = []
    points = []  # (process, offset, kind, type)
    for op in history.ops:
        before = len(points)
        for offset, _ in op.read_pairs().get(key, []):
            points.append((op.process, offset, "o", op.type))
        for offset, _ in op.write_pairs().get(key, []):
            if offset is not None:
                points.append((op.process, offset, "s", op.type))
        if len(points) > before and op.process not in processes:
            processes.append(op.process)
    rows = {p: i + 1 for i, p in enumerate(processes)}
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 1.8 + 0.35 * (len(rows) + 1)))
    order = verdict.version_orders.get(key)
    if order is not None:
        ax.scatter(order.offsets, [0] * len(order.offsets), marker="|", s=200, color="black")
    for process, offset, kind, type_ in points:
        ax.scatter(
            [offset], [rows[process]], marker=kind, s=40, color=_TYPE_COLOURS[str(type_)], zorder=3
        )
    bottom = len(rows) + 0.5
    for first, last, label in _runs(_bad_offsets(verdict, key)):
        ax.axvspan(first - 0.4, last + 0.4, color=_BAD, alpha=0.18, zorder=1)
        text = label if first == last else f"{label}\n({first}–{last})"
        ax.text((first + last) / 2, bottom, text, color=_BAD, fontsize=7, ha="center", va="top")
    ax.set_yticks(range(len(rows) + 1), ["log", *processes])
    ax.set_ylim(bottom + 1.2, -0.5)  # the log on top, the anomalies' names below
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("offset")
    ax.set_title(
        f"{key}: the log against what each process saw\n"
        "■ sent, ● polled; blue ok, orange unknown, pink failed; red: an anomaly",
        fontsize=9,
    )
    ax.figure.tight_layout()
    return ax


def unseen_plot(verdict, ax=None):
    """Acknowledged values no ok poll had read yet, per key, after each op: it must
    fall to 0 once the final polls have caught up."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 2.8))
    keys = sorted({k for _, counts in verdict.unseen_series for k in counts}, key=str)
    times = [t for t, _ in verdict.unseen_series]
    for key in keys:
        ax.step(
            times, [c.get(key, 0) for _, c in verdict.unseen_series], where="post", label=str(key)
        )
    ax.set_xlabel("time")
    ax.set_ylabel("unseen")
    final = sum(verdict.unseen_series[-1][1].values()) if verdict.unseen_series else 0
    ax.set_title(f"acknowledged, not yet polled ({final} at the end)")
    if keys:
        ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax


def lag_plot(verdict, ax=None):
    """Jepsen's realtime lag: per process, the largest lag over its keys at each
    poll (how far behind the log's tail it was at least)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 2.8))
    worst: dict[str, dict[float, float]] = {}
    for point in verdict.lag_series:
        by_time = worst.setdefault(point["process"], {})
        by_time[point["time"]] = max(by_time.get(point["time"], 0.0), point["lag"])
    for process in sorted(worst):
        times = sorted(worst[process])
        ax.plot(times, [worst[process][t] for t in times], marker=".", label=process)
    ax.set_xlabel("time")
    ax.set_ylabel("lag")
    top = max((p["lag"] for p in verdict.lag_series), default=0)
    ax.set_title(f"realtime lag per process (worst {top:g})")
    if worst:
        ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax
