"""The bench graph run as segments (issue 25's model): ``Pipeline(workflow="SegmentRunWorkflow")``.

The graph is the bench's own four-I/O-node graph, unchanged; only where it runs differs, so
``graph_throughput_segments`` measures the model against the same peer as
``graph_throughput`` measures today's.
"""

from __future__ import annotations

from overseer.bench.user_graph.graph import build_four_io_graph
from overseer.pipelines import Pipeline

PIPELINE = Pipeline(name="bench_four_io_segments", graph=build_four_io_graph,
                    workflow="SegmentRunWorkflow",
                    description="the bench's four-I/O-node graph, one segment activity per run")
