"""Pictures and tables of a partition's replicas: each replica's log, LEO, HW, ISR.

Used by labs/03_replication and labs/04_epochs on Partition objects stepped by
hand, and on a running LocalCluster (cluster_replicas_graph); a record is drawn as its offset and value, coloured by the leader epoch
that wrote it, so diverging logs are easy to spot.
"""

from __future__ import annotations

import graphviz
import pandas as pd

from kafkalab.cluster.local_cluster import ProcessState
from kafkalab.records import iter_batches
from kafkalab.replication.partition import Partition

_EPOCH_COLOURS = ["#dbe9f6", "#fde2c8", "#d9f0d3", "#f3d1e6", "#fff3b0", "#e0e0e0"]


def replica_records(partition: Partition) -> list[tuple[int, int, str]]:
    """(offset, leader epoch, value) of every record in the replica's log."""
    log = partition.log
    if log.log_end_offset == log.log_start_offset:
        return []
    data = log.read(log.log_start_offset, 1 << 24).read_bytes()
    out = []
    for batch in iter_batches(data):
        for r in batch.records:
            value = (r.value or b"").decode("utf-8", "replace")
            out.append((r.offset, batch.header.partition_leader_epoch, value))
    return out


def replicas_table(partitions: list[Partition]) -> pd.DataFrame:
    """One row per replica: role, LEO, HW, leader epoch, the ISR as it knows it,
    and (on the leader) what it knows of each follower's LEO."""
    rows = []
    leader = next((p for p in partitions if p.role == "leader"), None)
    for p in partitions:
        known = None
        if leader is not None and p is not leader and p.local_broker_id in leader.remote:
            known = leader.remote[p.local_broker_id].log_end_offset
        rows.append(
            {
                "broker": p.local_broker_id,
                "role": p.role,
                "LEO": p.log.log_end_offset,
                "HW": p.log.high_watermark,
                "leader epoch": p.leader_epoch,
                "ISR": p.isr if p.role == "leader" else "",
                "LEO as the leader knows it": "" if known is None else known,
                "epochs (epoch@start)": " ".join(
                    f"{e.epoch}@{e.start_offset}" for e in p.log.leader_epoch_cache.entries
                ),
            }
        )
    return pd.DataFrame(rows).set_index("broker")


def _replica_node(
    g: graphviz.Digraph,
    broker: int,
    caption: str,
    records: list[tuple[int, int, str]],
    hw: int,
    leo: int,
) -> None:
    """One replica as a row of cells: offset and value, coloured by epoch; a thick
    border below the HW (committed)."""
    cells = []
    for offset, epoch, value in records:
        colour = _EPOCH_COLOURS[epoch % len(_EPOCH_COLOURS)] if epoch >= 0 else "white"
        border = ' BORDER="2"' if offset < hw else ""
        cells.append(f'<TD BGCOLOR="{colour}"{border}>{offset}<BR/>{value[:8]}</TD>')
    cells.append(f'<TD BORDER="0">LEO={leo}<BR/>HW={hw}</TD>')
    label = (
        f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0"><TR>'
        f'<TD BORDER="0"><B>broker {broker}</B><BR/>{caption}</TD>{"".join(cells)}</TR></TABLE>>'
    )
    g.node(f"b{broker}", label=label, shape="plaintext")


def _graph(title: str) -> graphviz.Digraph:
    return graphviz.Digraph(
        graph_attr={"rankdir": "LR", "label": title, "labelloc": "t", "fontname": "Helvetica"},
        node_attr={"fontname": "Helvetica", "fontsize": "10"},
    )


def replicas_graph(partitions: list[Partition], title: str = "") -> graphviz.Digraph:
    """Each replica's log as a row of records; HW and LEO marked; colours are epochs."""
    g = _graph(title)
    for p in partitions:
        _replica_node(
            g,
            p.local_broker_id,
            f"{p.role}, epoch {p.leader_epoch}",
            replica_records(p),
            p.log.high_watermark,
            p.log.log_end_offset,
        )
    return g


def cluster_replicas_graph(
    cluster, topic: str, partition: int = 0, title: str = "", last: int = 12
):
    """The same picture for a LocalCluster: each broker's log read from its files
    (its `last` records), HW and LEO from `cluster.describe()` (what each broker
    last reported)."""
    g = _graph(title or f"{topic}-{partition}")
    rows = cluster.describe(topic)
    for _, row in rows[rows.partition == partition].iterrows():
        path = cluster.broker_dir(int(row.broker)) / f"{topic}-{partition}"
        records = [
            (
                r.offset,
                batch.header.partition_leader_epoch,
                (r.value or b"").decode("utf-8", "replace"),
            )
            for log_path in sorted(path.glob("*.log"))
            for batch in iter_batches(log_path.read_bytes())
            for r in batch.records
        ]
        if len(records) > last:
            caption_more = f"<BR/>(last {last} of {len(records)})"
            records = records[-last:]
        else:
            caption_more = ""
        caption = f"{row.role}, epoch {row['leader epoch']}"
        if row.status != ProcessState.RUNNING:
            caption += f" ({row.status})"
        caption += caption_more
        _replica_node(g, int(row.broker), caption, records, int(row.HW), int(row.LEO))
    return g
