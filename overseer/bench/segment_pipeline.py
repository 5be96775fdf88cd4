"""The bench graph declared for each runtime: as segments and node by node.

The graph is the bench's own four-I/O-node graph, unchanged; only where it runs differs.
``graph_throughput_segments`` measures segments (what a plain graph in a ``langgraph.json``
gets by default since issue 25) and ``graph_throughput`` node by node (``GraphRunWorkflow``,
one activity per node), each against the same peer.
"""

from __future__ import annotations

from overseer.bench.user_graph.graph import build_four_io_graph
from overseer.pipelines import Pipeline

NODES_PIPELINE = Pipeline(name="bench_four_io", graph=build_four_io_graph,
                         workflow="GraphRunWorkflow",
                         description="the bench's four-I/O-node graph, one activity per node")
PIPELINE = Pipeline(name="bench_four_io_segments", graph=build_four_io_graph,
                    workflow="SegmentRunWorkflow",
                    description="the bench's four-I/O-node graph, one segment activity per run")
