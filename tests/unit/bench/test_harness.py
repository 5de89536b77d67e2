"""The benchmark harness reports medians and same-run ratios."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[3] / "bench"))

from harness import Figure, percentile


def test_figure_reports_medians_and_their_ratio() -> None:
    figure = Figure(
        "b", "f", "msgs/s", runs=[90.0, 120.0, 100.0], baseline_runs=[200.0, 180.0, 250.0]
    )
    assert figure.value == 100.0
    assert figure.baseline == 200.0
    assert figure.ratio == 0.5
    line = figure.as_json()
    assert line["bench"] == "b"
    assert line["figure"] == "f"
    assert (line["value"], line["baseline"], line["ratio"]) == (100.0, 200.0, 0.5)


def test_figure_without_baseline_has_no_ratio() -> None:
    figure = Figure("b", "f", "ms", runs=[1.0])
    assert figure.ratio is None
    assert figure.as_json()["baseline"] is None


def test_percentile_by_nearest_rank() -> None:
    samples = [float(value) for value in range(1, 101)]
    assert percentile(samples, 0.5) == 50.0
    assert percentile(samples, 0.99) == 99.0
    assert percentile([3.0], 0.999) == 3.0
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 0.5)
