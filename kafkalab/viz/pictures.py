"""graphviz pictures of a log: segments, their batches and the index entries
that point into them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import graphviz

from kafkalab.viz.log_files import batches_table, index_entries


def segments_graph(directory: str | Path, max_batches: int = 8) -> graphviz.Digraph:
    """Draw each segment of a partition directory as a row of its batches, with
    an arrow from each offset-index entry to the batch at its position.

    Only the first `max_batches` batches of a segment are drawn; the rest are
    summarised, so the picture stays readable for large segments.
    """
    graph = graphviz.Digraph(graph_attr={"rankdir": "LR", "fontname": "Helvetica"})
    graph.attr("node", shape="record", fontname="Helvetica", fontsize="10")
    for log in sorted(Path(directory).glob("*.log")):
        base = log.name.split(".", 1)[0]
        batches = batches_table(log)
        cells = []
        for i, row in enumerate(batches.head(max_batches).itertuples(index=False)):
            row = row._asdict()
            if "last_offset" in row and row.get("status") == "ok":
                label = f"{row['base_offset']}..{row['last_offset']}\\n@{row['position']}"
            else:
                label = f"@{row['position']}\\n{row['status']}"
            cells.append(f"<b{i}> {label}")
        if len(batches) > max_batches:
            cells.append(f"… {len(batches) - max_batches} more")
        size = log.stat().st_size
        title = f"{base}.log\\n{size} bytes"
        graph.node(f"log{base}", "{" + title + "|{" + ("|".join(cells) or "empty") + "}}")
        index_path = log.with_suffix(".index")
        if index_path.exists():
            entries = index_entries(index_path)
            positions = {int(p): i for i, p in enumerate(batches.get("position", []))}
            rows = [
                f"<e{i}> {int(e.offset)} → {int(e.position)}"
                for i, e in enumerate(entries.head(max_batches).itertuples(index=False))
            ]
            label = "{" + f"{base}.index" + "|" + ("|".join(rows) or "no entries") + "}"
            graph.node(f"idx{base}", label, style="filled", fillcolor="lightyellow")
            for i, e in enumerate(entries.head(max_batches).itertuples(index=False)):
                batch = positions.get(int(e.position))
                if batch is not None and batch < max_batches:
                    graph.edge(f"idx{base}:e{i}", f"log{base}:b{batch}")
    return graph


TAKEN = {"color": "#d62728", "fontcolor": "#d62728", "penwidth": "2.5"}
NOT_TAKEN = {"color": "#bbbbbb", "fontcolor": "#999999"}


def state_machine_graph(
    states: dict[str, str],
    edges: Iterable[tuple[str, str, str, str]],
    path: Sequence[tuple[str, str, str]],
    initial: str | None = None,
    title: str | None = None,
) -> graphviz.Digraph:
    """A state machine with a path taken through it, the one picture the labs draw of
    every state machine (a group, a transaction, a transactional producer).

    `states`: name -> fill colour, in drawing order; `edges`: (from, to, label,
    style) for every allowed transition, drawn grey (style "solid" or "dashed");
    `path`: the steps taken, (from, to, the step's label), their edges drawn thick
    and red with the labels of every step that took them; the current state, the
    last step's target (`initial` before any step; None: none), is drawn bold."""
    taken: dict[tuple[str, str], list[str]] = {}
    for src, dst, step in path:
        taken.setdefault((src, dst), []).append(step)
    current = path[-1][1] if path else initial
    g = graphviz.Digraph(graph_attr={"rankdir": "LR", "fontname": "Helvetica"})
    g.attr("node", shape="box", style="rounded,filled", fontname="Helvetica")
    g.attr("edge", fontname="Helvetica", fontsize="9")
    if title:
        g.attr(label=title, labelloc="t")
    for state, colour in states.items():
        g.node(state, state, fillcolor=colour, penwidth="3" if state == current else "1")
    for src, dst, label, style in edges:
        steps = taken.get((src, dst))
        if steps:
            text = ", ".join(steps) + (f": {label}" if label else "")
            g.edge(src, dst, label=text, **TAKEN)
        else:
            g.edge(src, dst, label=label, style=style, **NOT_TAKEN)
    return g
