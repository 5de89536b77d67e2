"""The log-bucketed histogram: exact count, mean and max; quantiles within a bucket."""

from __future__ import annotations

import random

import pytest

from conveyor.tracing import Histogram


def test_an_empty_histogram_reads_zero() -> None:
    summary = Histogram().summary()
    assert (summary.count, summary.mean, summary.p50, summary.max) == (0, 0.0, 0.0, 0.0)


def test_quantiles_are_within_five_percent_of_the_exact_ones() -> None:
    rng = random.Random(7)
    values = [rng.lognormvariate(-7, 1.5) for _ in range(20_000)]
    histogram = Histogram()
    for value in values:
        histogram.record(value)
    values.sort()
    for q in (0.5, 0.9, 0.99):
        exact = values[int(q * len(values)) - 1]
        assert histogram.quantile(q) == pytest.approx(exact, rel=0.05), q
    summary = histogram.summary()
    assert summary.count == len(values)
    assert summary.max == values[-1]
    assert summary.mean == pytest.approx(sum(values) / len(values))


def test_weights_negatives_and_tiny_values() -> None:
    histogram = Histogram()
    histogram.record(0.002, count=9)
    histogram.record(-1.0)  # a clock step backwards counts as zero
    histogram.record(1e-9)
    assert histogram.count == 11
    assert histogram.quantile(0.5) == pytest.approx(0.002, rel=0.05)
    assert histogram.quantile(0.01) < 1e-6, "the sub-microsecond bucket"
    assert histogram.minimum == 0.0
