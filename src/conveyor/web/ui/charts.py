"""Charts as inline SVG, drawn on the server: no charting library, no CDN, nothing to load.

Each chart carries its numbers in ``data-series`` (JSON), so scripts and tests can read what
is drawn; time labels carry ``data-ts`` and are shown in the browser's zone by conveyor.js.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from html import escape

__all__ = ["bar_chart", "line_chart"]

_WIDTH, _HEIGHT = 640, 180
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 12, 12, 24
_COLOURS = ("#2f6fdf", "#e0702a", "#2a9d5c", "#b23a8f", "#6b5fd3", "#c8a020", "#3aa0b2", "#8a8a8a")

Point = tuple[float, float]


def _number(value: float) -> str:
    if value >= 1e9:
        return f"{value / 1e9:.1f}G"
    if value >= 1e6:
        return f"{value / 1e6:.1f}M"
    if value >= 1e4:
        return f"{value / 1e3:.0f}k"
    if value >= 100 or value == int(value):
        return f"{value:.0f}"
    return f"{value:.3g}"


def _clock(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%H:%M")


def line_chart(title: str, series: Mapping[str, Sequence[Point]], unit: str = "") -> str:
    """Lines over time, one per named series of ``(epoch seconds, value)`` points (``unit``
    is carried in ``data-unit``; the caption names it)."""
    data = {name: [[t, round(v, 4)] for t, v in points] for name, points in series.items()}
    head = (
        f'<svg class="chart" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" aria-label="{escape(title)}" '
        f"data-series='{escape(json.dumps(data), quote=True)}' data-unit=\"{escape(unit)}\">"
        f"<title>{escape(title)}</title>"
    )
    everything = [p for points in series.values() for p in points]
    if not everything:
        return (
            head
            + f'<text class="empty" x="{_WIDTH / 2}" y="{_HEIGHT / 2}" text-anchor="middle">no data yet</text></svg>'
        )
    first = min(t for t, _ in everything)
    last = max(t for t, _ in everything)
    top = max(v for _, v in everything) * 1.1 or 1.0
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM

    def x(t: float) -> float:
        return _LEFT + (plot_w * (t - first) / (last - first) if last > first else plot_w / 2)

    def y(v: float) -> float:
        return _TOP + plot_h * (1 - v / top)

    parts = [head]
    for step in range(5):
        value = top * step / 4
        parts.append(
            f'<line class="grid" x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{y(value):.1f}" y2="{y(value):.1f}"/>'
            f'<text class="axis" x="{_LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{_number(value)}</text>'
        )
    ends = ((first, "start"), (last, "end")) if last > first else ((first, "middle"),)
    for t, anchor in ends:
        parts.append(
            f'<text class="axis" x="{x(t):.1f}" y="{_HEIGHT - 6}" text-anchor="{anchor}" data-ts="{t}">{_clock(t)}</text>'
        )
    for index, (name, points) in enumerate(series.items()):
        colour = _COLOURS[index % len(_COLOURS)]
        coordinates = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in sorted(points))
        parts.append(
            f'<polyline class="line" fill="none" stroke="{colour}" stroke-width="2" points="{coordinates}">'
            f"<title>{escape(name)}</title></polyline>"
        )
        if len(points) == 1:
            t, v = points[0]
            parts.append(f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}"/>')
    parts.append("</svg>")
    if len(series) > 1:
        parts.append(
            '<ul class="legend">'
            + "".join(
                f'<li><span style="background:{_COLOURS[i % len(_COLOURS)]}"></span>{escape(name)}</li>'
                for i, name in enumerate(series)
            )
            + "</ul>"
        )
    return "".join(parts)


def bar_chart(title: str, bars: Sequence[tuple[str, float]], unit: str = "") -> str:
    """Vertical bars, one per ``(label, value)``."""
    data = [[label, round(value, 4)] for label, value in bars]
    head = (
        f'<svg class="chart" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" aria-label="{escape(title)}" '
        f"data-series='{escape(json.dumps(data), quote=True)}'><title>{escape(title)}</title>"
    )
    if not bars:
        return (
            head
            + f'<text class="empty" x="{_WIDTH / 2}" y="{_HEIGHT / 2}" text-anchor="middle">no partitions</text></svg>'
        )
    top = max(value for _, value in bars) * 1.1 or 1.0
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM
    slot = plot_w / len(bars)
    parts = [head]
    for step in range(5):
        value = top * step / 4
        level = _TOP + plot_h * (1 - value / top)
        parts.append(
            f'<line class="grid" x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{level:.1f}" y2="{level:.1f}"/>'
            f'<text class="axis" x="{_LEFT - 6}" y="{level + 4:.1f}" text-anchor="end">{_number(value)}</text>'
        )
    for index, (label, value) in enumerate(bars):
        height = plot_h * value / top
        left = _LEFT + index * slot + slot * 0.15
        parts.append(
            f'<rect class="bar" x="{left:.1f}" y="{_TOP + plot_h - height:.1f}" width="{slot * 0.7:.1f}" height="{height:.1f}" fill="{_COLOURS[0]}">'
            f"<title>{escape(label)}: {_number(value)}{escape(unit)}</title></rect>"
        )
        if len(bars) <= 48:
            parts.append(
                f'<text class="axis" x="{left + slot * 0.35:.1f}" y="{_HEIGHT - 6}" text-anchor="middle">{escape(label)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)
