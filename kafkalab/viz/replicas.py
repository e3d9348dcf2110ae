"""Pictures and tables of a partition's replicas: each replica's log, LEO, HW, ISR.

Used by labs/03_replication and labs/04_epochs on Partition objects stepped by
hand; a record is drawn as its offset and value, coloured by the leader epoch
that wrote it, so diverging logs are easy to spot.
"""

from __future__ import annotations

import graphviz
import pandas as pd

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


def replicas_graph(partitions: list[Partition], title: str = "") -> graphviz.Digraph:
    """Each replica's log as a row of records; HW and LEO marked; colours are epochs."""
    g = graphviz.Digraph(
        graph_attr={"rankdir": "LR", "label": title, "labelloc": "t", "fontname": "Helvetica"},
        node_attr={"fontname": "Helvetica", "fontsize": "10"},
    )
    for p in partitions:
        cells = []
        hw, leo = p.log.high_watermark, p.log.log_end_offset
        for offset, epoch, value in replica_records(p):
            colour = _EPOCH_COLOURS[epoch % len(_EPOCH_COLOURS)] if epoch >= 0 else "white"
            border = ' BORDER="2"' if offset < hw else ""
            cells.append(f'<TD BGCOLOR="{colour}"{border}>{offset}<BR/>{value[:8]}</TD>')
        cells.append(f'<TD BORDER="0">LEO={leo}<BR/>HW={hw}</TD>')
        role = {"leader": "leader", "follower": "follower"}.get(p.role, p.role)
        label = (
            f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0"><TR>'
            f'<TD BORDER="0"><B>broker {p.local_broker_id}</B><BR/>{role}, '
            f"epoch {p.leader_epoch}</TD>{''.join(cells)}</TR></TABLE>>"
        )
        g.node(f"b{p.local_broker_id}", label=label, shape="plaintext")
    return g
