"""Views the labs use: pandas tables, graphviz pictures, hex dumps.

Nothing in kafkalab imports this package; it may import anything. Every view
reads the real files or bytes it is given, so what a student sees is what is
on disk, not a model of it.
"""

from kafkalab.viz.hexdump import annotated_batch_header, hexdump
from kafkalab.viz.log_files import batches_table, index_entries, log_files_table
from kafkalab.viz.pictures import segments_graph

__all__ = [
    "annotated_batch_header",
    "batches_table",
    "hexdump",
    "index_entries",
    "log_files_table",
    "segments_graph",
]
