"""The runner every benchmark uses: same-run baselines, repeats, medians, a table and JSON lines.

A benchmark measures a Conveyor variant and a bare confluent-kafka baseline in the
same process, alternating them ``repeats`` times so that both see the same machine
noise, and reports the median of each and their ratio. Besides a rich table it
prints one JSON line per figure on standard output::

    {"bench": "consume", "figure": "...", "value": 241000.0, "unit": "msgs/s",
     "baseline": 240000.0, "ratio": 1.004, "runs": [...], "baseline_runs": [...]}

so that runs can be compared across commits (``grep '^{' | jq``).

Usage in a script::

    bench = Bench("produce", "bare produce loops")
    topic = bench.create_topic(partitions=1)
    bench.compare("produce_async", candidate=lambda: run_ours(topic),
                  baseline=lambda: run_bare(topic), unit="msgs/s")
    bench.report()
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from conveyor import Admin

__all__ = ["Bench", "Figure", "RateMeter", "percentile"]

Measurement = Callable[[], float]


@dataclass
class Figure:
    """One reported number: the median of its runs, and its baseline's when it has one."""

    bench: str
    figure: str
    unit: str
    runs: list[float]
    baseline_runs: list[float] = field(default_factory=list)
    higher_is_better: bool = True
    note: str = ""
    difference: bool = False
    """A difference between two states (an added latency): near zero, and below it by chance."""

    @property
    def value(self) -> float:
        return statistics.median(self.runs)

    @property
    def baseline(self) -> float | None:
        return statistics.median(self.baseline_runs) if self.baseline_runs else None

    def spread(self) -> str:
        """Every run, with ``!`` after one that is off the median by more than half of it
        (an outlier the median hides: a run that was not settled, a noisy neighbour); not
        for a difference, whose median may be near zero."""
        median = self.value
        return " ".join(
            f"{run:,.3g}"
            f"{'!' if median and not self.difference and abs(run - median) > 0.5 * median else ''}"
            for run in self.runs
        )

    @property
    def ratio(self) -> float | None:
        """value / baseline (for latencies, below 1 is better)."""
        baseline = self.baseline
        if baseline is None or baseline == 0:
            return None
        return self.value / baseline

    def as_json(self) -> dict[str, Any]:
        ratio = self.ratio
        return {
            "bench": self.bench,
            "figure": self.figure,
            "value": round(self.value, 4),
            "unit": self.unit,
            "baseline": None if self.baseline is None else round(self.baseline, 4),
            "ratio": None if ratio is None else round(ratio, 4),
            "runs": [round(run, 4) for run in self.runs],
            "baseline_runs": [round(run, 4) for run in self.baseline_runs],
            "difference": self.difference,
        }


class Bench:
    """One benchmark script's run: its arguments, broker, topics and figures."""

    def __init__(
        self,
        name: str,
        description: str,
        arguments: Callable[[argparse.ArgumentParser], None] | None = None,
    ) -> None:
        parser = argparse.ArgumentParser(prog=f"bench/{name}.py", description=description)
        parser.add_argument(
            "--repeats", type=int, default=3, help="runs per variant (median reported)"
        )
        parser.add_argument(
            "--bootstrap",
            default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
            help="Kafka to measure against (default: $KAFKA_BOOTSTRAP_SERVERS or 127.0.0.1:9092)",
        )
        if arguments:
            arguments(parser)
        self.args = parser.parse_args()
        self.name = name
        self.bootstrap: str = self.args.bootstrap
        self.repeats: int = self.args.repeats
        self.figures: list[Figure] = []
        self.console = (
            Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=140)
        )
        self._admin = Admin({"bootstrap.servers": self.bootstrap})
        self._topics: list[str] = []
        atexit.register(self._delete_topics)

    # -- topics ---------------------------------------------------------------------------

    def create_topic(
        self, partitions: int = 1, config: dict[str, str] | None = None, name: str | None = None
    ) -> str:
        """A fresh topic for this run (named ``name``, or after the benchmark); deleted when
        the script exits."""
        topic = name or f"bench-{self.name}-{uuid.uuid4().hex[:8]}"
        self._admin.create_topic(topic, partitions, config=config)
        self._topics.append(topic)
        return topic

    def _delete_topics(self) -> None:
        for topic in self._topics:
            try:
                self._admin.delete_topic(topic)
            except Exception as exc:  # the run's figures matter more than its litter
                self.console.print(f"[yellow]could not delete a bench topic: {exc}")
        self._topics.clear()

    # -- measuring ------------------------------------------------------------------------

    def compare(
        self,
        figure: str,
        *,
        candidate: Measurement,
        baseline: Measurement,
        unit: str,
        higher_is_better: bool = True,
        note: str = "",
    ) -> Figure:
        """Run ``baseline`` and ``candidate`` alternately ``repeats`` times; record both medians."""
        result = Figure(self.name, figure, unit, [], [], higher_is_better, note)
        for attempt in range(1, self.repeats + 1):
            result.baseline_runs.append(
                self._timed(f"{figure} (baseline)", attempt, baseline, unit)
            )
            result.runs.append(self._timed(figure, attempt, candidate, unit))
        self.figures.append(result)
        return result

    def measure(
        self,
        figure: str,
        run: Measurement,
        *,
        unit: str,
        higher_is_better: bool = True,
        note: str = "",
    ) -> Figure:
        """Run ``run`` ``repeats`` times and record its median, with no baseline."""
        result = Figure(self.name, figure, unit, [], [], higher_is_better, note)
        for attempt in range(1, self.repeats + 1):
            result.runs.append(self._timed(figure, attempt, run, unit))
        self.figures.append(result)
        return result

    def record(self, figure: Figure) -> Figure:
        """Add a figure computed by the script itself (e.g. from samples of several runs)."""
        self.figures.append(figure)
        return figure

    def _timed(self, label: str, attempt: int, run: Measurement, unit: str) -> float:
        value = run()
        self.console.print(
            f"  {label} run {attempt}/{self.repeats}: {value:,.2f} {unit}", highlight=False
        )
        return value

    # -- reporting ------------------------------------------------------------------------

    def report(self) -> None:
        """Print the table (to stderr) and one JSON line per figure (to stdout)."""
        table = Table(
            title=f"bench {self.name} — median of {self.repeats} runs", title_justify="left"
        )
        for column in ("figure", "value", "baseline", "ratio", "runs", "note"):
            table.add_column(
                column, justify="right" if column in ("value", "baseline", "ratio") else "left"
            )
        for figure in self.figures:
            ratio = figure.ratio
            table.add_row(
                figure.figure,
                f"{figure.value:,.2f} {figure.unit}",
                "-" if figure.baseline is None else f"{figure.baseline:,.2f} {figure.unit}",
                "-" if ratio is None else f"{ratio:.2f}x",
                figure.spread(),
                figure.note,
            )
        self.console.print(table)
        for figure in self.figures:
            print(json.dumps(figure.as_json()), flush=True)


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The ``fraction`` (0..1) percentile by nearest rank."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))
    return ordered[index]


class RateMeter:
    """Throughput defined the same way for every variant: messages per second between the
    moment ``warmup`` of them had been handed over and the moment all ``count`` had.

    Starting the clock at the first batch would count that batch for free, and how much a
    variant gets at once (500 messages from a bare ``consume()``, a whole prefetched gulp
    from a framework's poll) would bias the result; past the warm-up both sides run in a
    steady state. Call :meth:`add` with each batch's size as the consumer sees it (from any
    thread); :attr:`done` is set when ``count`` were seen.
    """

    def __init__(self, count: int, warmup: float = 0.1) -> None:
        self.count = count
        self.threshold = max(1, int(count * warmup))
        self.seen = 0
        self._start: tuple[float, int] | None = None
        self._end: tuple[float, int] | None = None
        self._lock = threading.Lock()
        self.done = threading.Event()

    def add(self, messages: int) -> None:
        with self._lock:  # one lock per batch: workers of several partitions add at once
            self.seen += messages
            if self._start is None and self.seen >= self.threshold:
                self._start = (time.perf_counter(), self.seen)
            if self._end is None and self.seen >= self.count:
                self._end = (time.perf_counter(), self.seen)
                self.done.set()

    def rate(self) -> float:
        """Messages per second over the measured stretch."""
        if self._start is None or self._end is None:
            raise RuntimeError(f"only {self.seen:,} of {self.count:,} messages were seen")
        (started, first), (ended, last) = self._start, self._end
        if ended <= started:  # everything arrived in one batch: no stretch to measure
            raise RuntimeError("the warm-up and the end fell in one batch; use more messages")
        return (last - first) / (ended - started)


if __name__ == "__main__":
    sys.exit("harness.py is a library for the scripts beside it; run those instead.")
