"""Server-drawn SVG charts: what is drawn is in ``data-series``, and every text is escaped."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest

from conveyor.web.ui.charts import bar_chart, line_chart

T0 = 1_000_000.0


def data_series(svg: str) -> Any:
    found = re.findall(r"data-series='([^']*)'", svg)
    assert len(found) == 1, svg
    return json.loads(html.unescape(found[0]))


def polylines(svg: str) -> list[str]:
    return re.findall(r'<polyline [^>]*points="([^"]*)"', svg)


# -- line charts ------------------------------------------------------------------------------


@pytest.mark.parametrize("series", [{}, {"messages": []}, {"a": [], "b": []}])
def test_a_line_chart_without_points_says_so(series: dict[str, list[tuple[float, float]]]) -> None:
    svg = line_chart("Throughput", series)
    assert "no data yet" in svg
    assert "<polyline" not in svg
    assert svg.startswith("<svg")
    assert svg.endswith("</svg>")


def test_a_line_chart_draws_one_line_per_series_and_carries_its_numbers() -> None:
    series = {
        "orders": [(T0, 1.5), (T0 + 60, 3.25), (T0 + 120, 0.0)],
        "payments": [(T0, 10.0), (T0 + 60, 20.0)],
        "refunds": [(T0 + 120, 7.0)],
    }
    svg = line_chart("Lag", series, unit="msg")
    assert "no data yet" not in svg
    lines = polylines(svg)
    assert len(lines) == 3
    assert [len(points.split()) for points in lines] == [3, 2, 1]
    assert data_series(svg) == {
        name: [[t, v] for t, v in points] for name, points in series.items()
    }
    assert svg.count("<circle") == 1  # a single point is drawn as a dot as well
    assert '<ul class="legend">' in svg
    for name in series:
        assert f"<title>{name}</title>" in svg


def test_line_points_lie_inside_the_plot_and_higher_values_are_higher() -> None:
    svg = line_chart("Rate", {"rate": [(T0, 0.0), (T0 + 60, 50.0), (T0 + 120, 100.0)]})
    (points,) = polylines(svg)
    xy = [tuple(map(float, pair.split(","))) for pair in points.split()]
    xs, ys = [x for x, _ in xy], [y for _, y in xy]
    assert xs == sorted(xs)
    assert ys[0] > ys[1] > ys[2]  # SVG's y grows downwards
    assert all(0 <= x <= 640 for x in xs)
    assert all(0 <= y <= 180 for y in ys)


def test_values_are_rounded_in_the_data_series() -> None:
    svg = line_chart("Rate", {"rate": [(T0, 1 / 3)]})
    assert data_series(svg) == {"rate": [[T0, 0.3333]]}


def test_a_flat_zero_line_is_drawn() -> None:
    svg = line_chart("Errors", {"errors": [(T0, 0.0), (T0 + 60, 0.0)]})
    assert len(polylines(svg)) == 1
    assert "nan" not in svg.lower()


def test_a_single_series_has_no_legend() -> None:
    assert '<ul class="legend">' not in line_chart("Lag", {"orders": [(T0, 1.0)]})


@pytest.mark.parametrize("points", [[], [(T0, 1.0)]])
def test_line_chart_titles_names_and_units_are_escaped(points: list[tuple[float, float]]) -> None:
    evil = "<script>alert('x')</script>"
    svg = line_chart(evil, {evil: points, "other": points}, unit='"><script>')
    assert "<script>" not in svg
    assert "&lt;script&gt;" in svg
    assert data_series(svg) == {evil: [list(p) for p in points], "other": [list(p) for p in points]}


def test_a_quote_in_a_series_name_does_not_end_the_attribute() -> None:
    name = "it's 'quoted'"
    svg = line_chart("Lag", {name: [(T0, 1.0)]})
    assert data_series(svg) == {name: [[T0, 1.0]]}


# -- bar charts -------------------------------------------------------------------------------


def test_a_bar_chart_draws_one_rect_per_bar() -> None:
    bars = [("0", 10.0), ("1", 25.0), ("2", 0.0), ("3", 5.5)]
    svg = bar_chart("Messages per partition", bars)
    rects = re.findall(r'<rect class="bar" [^>]*height="([^"]*)"', svg)
    assert len(rects) == len(bars)
    heights = [float(h) for h in rects]
    assert heights[1] == max(heights)
    assert heights[2] == 0.0
    assert data_series(svg) == [list(bar) for bar in bars]


def test_a_bar_chart_without_bars_says_so() -> None:
    svg = bar_chart("Messages per partition", [])
    assert "<rect" not in svg
    assert "no partitions" in svg


def test_bar_labels_and_titles_are_escaped() -> None:
    svg = bar_chart("<script>x</script>", [("<b>0</b>", 1.0)], unit="<i>")
    assert "<script>" not in svg
    assert "<b>" not in svg
    assert "<i>" not in svg
    assert svg.count('<rect class="bar"') == 1


def test_many_bars_drop_their_axis_labels() -> None:
    svg = bar_chart("Partitions", [(str(n), float(n)) for n in range(60)])
    assert svg.count('<rect class="bar"') == 60
    assert 'text-anchor="middle">59</text>' not in svg
