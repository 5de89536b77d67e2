"""Metrics: Prometheus counters, histograms and gauges of an app (``app.metrics``, extra
``conveyor[prometheus]``), and the librdkafka statistics worth a gauge."""

from conveyor.metrics.prometheus import CONTENT_TYPE, Metrics
from conveyor.metrics.statistics import gauges_of

__all__ = ["CONTENT_TYPE", "Metrics", "gauges_of"]
