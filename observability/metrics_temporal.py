"""The Temporal SDK's metrics in this process's registry, so each process is one scrape target.

:func:`temporal_runtime` makes the Temporal ``Runtime`` whose SDK metrics go to a
``MetricBuffer``; :class:`TemporalMetricsCollector` drains that buffer into the registry
served by ``/metrics``, with the workflow-side ``overseer_*`` counters (the wire names in
:mod:`observability.metrics`, counted through Temporal's replay-safe metric meter).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from observability.metrics import DURATION_BUCKETS_SECONDS, bounded_label

# --- Temporal SDK metrics: one scrape target per process -----------------------------------------


_temporal_runtime: Any = None


def temporal_runtime(registry: CollectorRegistry = REGISTRY, *, buffer_size: int = 100_000) -> Any:
    """A Temporal ``Runtime`` whose SDK metrics are served by this process's ``/metrics`` (idempotent).

    Chosen over ``PrometheusConfig(bind_address=...)`` so each process is one scrape target:
    the SDK writes into a ``MetricBuffer`` and :class:`TemporalMetricsCollector` exposes it
    from the same registry as Overseer's own metrics. Pass the runtime to
    ``Client.connect(runtime=...)``; workers made from that client report through it.
    """
    global _temporal_runtime
    if _temporal_runtime is not None:
        return _temporal_runtime
    from temporalio.runtime import MetricBuffer, MetricBufferDurationFormat, Runtime, TelemetryConfig

    buffer = MetricBuffer(buffer_size, MetricBufferDurationFormat.SECONDS)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    collector = TemporalMetricsCollector(buffer).start()
    registry.register(collector)
    _temporal_runtime = runtime
    return runtime


class TemporalMetricsCollector(Collector):
    """Exposes the Temporal SDK's metrics (and workflow-side ``overseer_*`` ones) from a MetricBuffer.

    Temporal's Rust core writes metric updates into a :class:`temporalio.runtime.MetricBuffer`;
    this collector drains it (on every scrape and from a background thread, so the buffer
    never fills) and keeps cumulative values: counters as ``<name>_total``, histograms of
    durations as ``<name>_seconds`` with :data:`DURATION_BUCKETS_SECONDS`, gauges as they
    are. Names that already follow Overseer's convention (``overseer_*``) pass unchanged.

    Args:
        buffer: the buffer given to ``TelemetryConfig(metrics=...)`` (durations in seconds).
        drain_interval_seconds: how often the background thread drains.
    """

    def __init__(self, buffer: Any, *, drain_interval_seconds: float = 1.0) -> None:
        self._buffer = buffer
        self._lock = threading.Lock()
        # name -> (kind, description, {labels_tuple: value | _Hist})
        self._series: dict[str, tuple[int, str, dict[tuple[tuple[str, str], ...], Any]]] = {}
        self._interval = drain_interval_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> TemporalMetricsCollector:
        """Start the background drain thread (daemon); returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="temporal-metrics-drain",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the drain thread."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.drain()

    def drain(self) -> None:
        """Fold all buffered updates into the cumulative series."""
        with self._lock:
            try:
                updates = self._buffer.retrieve_updates()
            except RuntimeError:  # the runtime is not created yet
                return
            for update in updates:
                metric = update.metric
                kind = int(metric.kind)
                name = _temporal_name(metric.name, kind, metric.unit)
                entry = self._series.get(name)
                if entry is None:
                    entry = (kind, metric.description or metric.name, {})
                    self._series[name] = entry
                labels = tuple(sorted((str(k), _label_value(v))
                                      for k, v in dict(update.attributes).items()
                                      if k != "service_name"))
                values = entry[2]
                if kind == 0:  # counter: deltas
                    values[labels] = values.get(labels, 0) + update.value
                elif kind == 1:  # gauge: last value
                    values[labels] = update.value
                else:
                    hist = values.get(labels)
                    if hist is None:
                        hist = values[labels] = _Hist()
                    hist.observe(float(update.value))

    def collect(self) -> Iterator[Metric]:
        """Prometheus collection: drain, then yield one family per metric name."""
        self.drain()
        with self._lock:
            for name, (kind, description, values) in sorted(self._series.items()):
                if kind == 0:
                    family = Metric(name[: -len("_total")], description, "counter")
                    for labels, value in values.items():
                        family.add_sample(name, dict(labels), float(value))
                elif kind == 1:
                    family = Metric(name, description, "gauge")
                    for labels, value in values.items():
                        family.add_sample(name, dict(labels), float(value))
                else:
                    family = Metric(name, description, "histogram")
                    for labels, hist in values.items():
                        hist.samples_into(family, name, dict(labels))
                yield family


class _Hist:
    __slots__ = ("counts", "sum", "count")

    def __init__(self) -> None:
        self.counts = [0] * len(DURATION_BUCKETS_SECONDS)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.sum += value
        self.count += 1
        for i, bound in enumerate(DURATION_BUCKETS_SECONDS):
            if value <= bound:
                self.counts[i] += 1
                break

    def samples_into(self, family: Metric, name: str, labels: dict[str, str]) -> None:
        running = 0
        for bound, n in zip(DURATION_BUCKETS_SECONDS, self.counts, strict=True):
            running += n
            family.add_sample(f"{name}_bucket", {**labels, "le": _float_str(bound)}, running)
        family.add_sample(f"{name}_bucket", {**labels, "le": "+Inf"}, self.count)
        family.add_sample(f"{name}_count", labels, self.count)
        family.add_sample(f"{name}_sum", labels, self.sum)


def _temporal_name(name: str, kind: int, unit: str | None) -> str:
    if kind == 0:
        return name if name.endswith("_total") else f"{name}_total"
    if kind == 2 and unit in ("s", "ms", "duration") and not name.endswith("_seconds"):
        return f"{name}_seconds"
    return name


def _float_str(value: float) -> str:
    return repr(float(value))


def _label_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return bounded_label(str(value))
