"""asyncio-native Conveyor beside aiokafka and FastStream (and a bare confluent-kafka loop).

Each side runs in a process of its own (``bench/_asyncio_sides.py``), alternating, three
times per figure, against the same broker in the same run; every variant gets topics of its
own with the same layout. aiokafka and FastStream are not Conveyor's dependencies: the
benchmark installs them in an environment of its own (``.venv-bench-peers``, made once).
Every producer acknowledges with ``acks=all`` and idempotence and lingers 0 ms (Conveyor's
defaults, set on the peers and the bare loops alike).

(a) sequential awaited produce: ``await producer.produce_async(...)`` one at a time, p50 and
    p99, beside Conveyor's ``produce_sync``, aiokafka's ``send_and_wait`` and a bare
    produce + flush;
(b) 100,000 messages, 1,000 awaits in flight: msgs/s, in two shapes. A coroutine per message
    that sends and awaits its delivery, 1,000 gathered (the same code on every side: aiokafka
    ``await (await send())``, FastStream ``await broker.publish()``), beside a bare produce
    loop; and what each library's send returns, 1,000 of them gathered (Conveyor's handles,
    aiokafka's ``send`` futures, FastStream's ``publish(no_confirm=True)`` futures);
(c) consume-transform-produce, one awaited produce per message, 8 partitions: an
    ``async def consume()`` (one lane per partition, and 4 virtual partitions per partition)
    beside an aiokafka consumer + producer loop and a FastStream subscriber that publishes its
    return value, and a bare loop that flushes once per batch;
(d) the event loop's lag p99 while (c) runs: a task on the loop that sleeps 5 ms and records
    how late it woke.

Targets (issue 36): (a) p50 <= 1.1x produce_sync and <= aiokafka's; (b) >= 3x aiokafka;
(c) >= 3x the faster of aiokafka and FastStream; (d) p99 <= 5 ms.

The script is not ``bench/asyncio.py``: Python puts a script's folder first on ``sys.path``,
and a file of that name there would stand in for the standard library's asyncio in every
benchmark of the folder.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

from _peers import peers_python
from baselines import fill_topic
from harness import Bench, Figure

HERE = Path(__file__).resolve().parent
PEER_SIDES = {"aiokafka", "faststream"}

SEQUENTIAL = 1_000
INFLIGHT = 100_000
TRANSFORM = 4_000
PARTITIONS = 8
LANES = 4  # virtual partitions per partition in (c)'s second Conveyor variant


class Sides:
    """Runs one side of one figure in its own process and reads its JSON line."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.peers = peers_python()

    def run(self, side: str, figure: str, count: int, **options: str) -> dict[str, float]:
        python = self.peers if side in PEER_SIDES else sys.executable
        command = [python, str(HERE / "_asyncio_sides.py"), side, figure,
                   "--bootstrap", self.bench.bootstrap, "--count", str(count)]  # fmt: skip
        for name, value in options.items():
            command += [f"--{name}", value]
        env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src")}
        if side in PEER_SIDES:
            env.pop("PYTHONPATH")  # the peers' environment has no Conveyor
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=900, env=env, cwd=HERE, check=False
        )
        if done.returncode != 0:
            raise SystemExit(f"{side} {figure} failed:\n{done.stderr[-3000:]}")
        result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
        self.bench.console.print(f"  {figure} {side}: {result}", highlight=False)
        return result


def _figure(bench: Bench, name: str, unit: str, runs: list[float], baseline: list[float],
            higher_is_better: bool, note: str) -> Figure:  # fmt: skip
    return bench.record(Figure(bench.name, name, unit, runs, baseline, higher_is_better, note))


def sequential(bench: Bench, sides: Sides) -> None:
    names = ("conveyor", "conveyor-sync", "aiokafka", "bare")
    results: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    topics = {name: bench.create_topic() for name in names}
    for _ in range(bench.repeats):
        for name in names:
            results[name].append(sides.run(name, "sequential", SEQUENTIAL, topic=topics[name]))

    def runs(name: str, key: str) -> list[float]:
        return [result[key] for result in results[name]]

    for key in ("p50", "p99"):
        for name, note in (("conveyor-sync", "target p50 <= 1.1x"), ("aiokafka", "target p50 <= 1x"),
                           ("bare", "produce + flush")):  # fmt: skip
            _figure(bench, f"(a) awaited produce {key} vs {name}", "ms", runs("conveyor", key),
                    runs(name, key), False, note if key == "p50" else "")  # fmt: skip


def inflight(bench: Bench, sides: Sides) -> None:
    names = ("conveyor", "aiokafka", "faststream", "bare")
    results: dict[str, list[float]] = {name: [] for name in names}
    gathered: dict[str, list[float]] = {name: [] for name in names[:3]}
    topics = {name: bench.create_topic() for name in names}
    for _ in range(bench.repeats):
        for name in names:
            results[name].append(sides.run(name, "inflight", INFLIGHT, topic=topics[name])["rate"])
        for name, runs in gathered.items():
            runs.append(sides.run(name, "gathered", INFLIGHT, topic=topics[name])["rate"])
    for name, note in (("aiokafka", "target >= 3x"), ("faststream", ""), ("bare", "produce loop")):
        _figure(bench, f"(b) 1,000 awaits in flight, a coroutine each, vs {name}", "msgs/s",
                results["conveyor"], results[name], True, note)  # fmt: skip
    for name, note in (("aiokafka", "send + gather"), ("faststream", "publish(no_confirm)")):
        _figure(bench, f"(b) 1,000 in flight, what produce returns gathered, vs {name}",
                "msgs/s", gathered["conveyor"], gathered[name], True, note)  # fmt: skip


def transform(bench: Bench, sides: Sides) -> None:
    # "conveyor": one lane per partition, as the peers' one loop; "conveyor-lanes": the same
    # consumer with LANES virtual partitions per partition (per-key order kept), what a
    # Conveyor user adds for more awaits in flight.
    names = ("conveyor", "conveyor-lanes", "aiokafka", "faststream", "bare")
    results: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    payload = json.dumps({"order": 1, "items": ["a", "b"], "total": 12.5}).encode()
    for _ in range(bench.repeats):
        for name in names:
            source = bench.create_topic(partitions=PARTITIONS)
            fill_topic(bench.bootstrap, source, TRANSFORM, payload, partitions=PARTITIONS)
            out = bench.create_topic(partitions=PARTITIONS)
            group = f"bench-asyncio-{uuid.uuid4().hex[:8]}"
            side, extra = (
                ("conveyor", {"lanes": str(LANES)}) if name == "conveyor-lanes" else (name, {})
            )
            results[name].append(
                sides.run(side, "transform", TRANSFORM, topic=source, out=out, group=group, **extra)
            )

    def rates(name: str) -> list[float]:
        return [result["rate"] for result in results[name]]

    faster = max(("aiokafka", "faststream"), key=lambda name: statistics.median(rates(name)))
    for ours, label in (("conveyor", "8 partitions"), ("conveyor-lanes", f"{LANES} lanes each")):
        for name in ("aiokafka", "faststream", "bare"):
            note = "target >= 3x" if name == faster else ""
            if name == "bare":
                note = "flush per batch"
            _figure(bench, f"(c) consume-transform-produce, {label}, vs {name}", "msgs/s",
                    rates(ours), rates(name), True, note)  # fmt: skip
    for name in ("conveyor", "conveyor-lanes", "aiokafka", "faststream"):
        lags = [result["lag_p99"] for result in results[name]]
        _figure(bench, f"(d) loop lag p99 during (c), {name}", "ms", lags, [], False,
                "target <= 5 ms" if name.startswith("conveyor") else "")  # fmt: skip


def main() -> None:
    bench = Bench("asyncio_peers", __doc__.splitlines()[0])
    sides = Sides(bench)
    sequential(bench, sides)
    inflight(bench, sides)
    transform(bench, sides)
    bench.report()


if __name__ == "__main__":
    main()
