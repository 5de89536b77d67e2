"""Scaling with processes: a swarm of 1, 2 and 4 `conveyor swarm` nodes beside as many bare
confluent-kafka processes in one consumer group, on an 8-partition topic, each message
costing 50 µs of pure-Python CPU.

One Python process runs one thread of Python at a time, so CPU-bound consumers scale with
processes, not threads: the target is >= 1.7x the 1-node throughput with 2 nodes on a 2-core
machine (the broker shares the cores), and the curve beyond the core count is documented, not
promised. Every variant has its own topic, filled only once its group is stable with every
member holding partitions; every process logs its batches (time, messages) and the throughput
is counted across them the way harness.RateMeter counts it (from 10 % of the messages to the
last). The bare processes use the listener's fetch.queue.backoff.ms=10, like for like.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from baselines import fill_topic
from conveyor import Admin
from harness import Bench, Figure

HERE = Path(__file__).resolve().parent
PAYLOAD = b"x" * 100


def wait_stable(admin: Admin, group: str, members: int, timeout: float = 90) -> None:
    """Until ``group`` is stable with ``members`` members, each holding partitions."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        try:
            info = admin.describe_consumer_group(group)
            holding = sum(1 for member in info.members if member.assignment)
            if info.state == "STABLE" and holding == members:
                return
        except Exception:  # the group is still forming
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"group {group} never had {members} members")
        pause.wait(0.2)  # the broker forms the group: nothing here to wait on


def logged(folder: Path) -> list[tuple[float, int]]:
    """Every batch every process logged, in time order."""
    rows = []
    for path in folder.glob("*.txt"):
        for line in path.read_text().splitlines():
            at, messages = line.split()
            rows.append((float(at), int(messages)))
    return sorted(rows)


def rate(rows: list[tuple[float, int]], count: int, warmup: float = 0.1) -> float:
    """msgs/s from the batch at which ``warmup`` of ``count`` had been processed to the one
    at which all had (harness.RateMeter's definition, across processes)."""
    seen = 0
    start: tuple[float, int] | None = None
    for at, messages in rows:
        seen += messages
        if start is None and seen >= count * warmup:
            start = (at, seen)
        if seen >= count:
            assert start is not None
            return (seen - start[1]) / (at - start[0]) if at > start[0] else float("inf")
    raise RuntimeError(f"only {seen} of {count} messages were processed")


def run(bench: Bench, admin: Admin, kind: str, nodes: int, count: int) -> float:
    """One run: ``nodes`` processes of ``kind`` (swarm or bare) on a fresh topic and group."""
    topic = bench.create_topic(partitions=8)
    group = f"bench-scaling-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as folder:
        env = dict(
            os.environ, KAFKA_BOOTSTRAP_SERVERS=bench.bootstrap, TOPIC=topic, GROUP=group,
            OUT_DIR=folder, PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        )  # fmt: skip
        if kind == "swarm":
            commands = [[sys.executable, "-m", "conveyor", "swarm", "--app", "_scaling_app:app",
                         "--nodes", str(nodes), "--log-level", "WARNING"]]  # fmt: skip
        else:
            commands = [[sys.executable, str(HERE / "_scaling_bare.py")]] * nodes
        processes = [
            subprocess.Popen(command, cwd=HERE, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for command in commands
        ]  # fmt: skip
        try:
            wait_stable(admin, group, nodes)
            fill_topic(bench.bootstrap, topic, count, PAYLOAD, partitions=8)
            deadline = time.monotonic() + 600
            pause = threading.Event()
            while sum(messages for _, messages in logged(Path(folder))) < count:
                if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                    raise RuntimeError(f"{kind} with {nodes} node(s) did not finish")
                pause.wait(0.25)  # other processes write the logs: nothing to wait on but them
            return rate(logged(Path(folder)), count)
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def main() -> None:
    bench = Bench(
        "scaling",
        __doc__ or "",
        lambda parser: (
            parser.add_argument("--messages", type=int, default=200_000),
            parser.add_argument("--nodes", default="1,2,4", help="node counts, 1 first"),
        ),
    )
    count: int = bench.args.messages
    counts = tuple(int(n) for n in bench.args.nodes.split(","))
    if counts[0] != 1:
        raise SystemExit("--nodes must start with 1 (the speed-ups are over one node)")
    cores = os.cpu_count() or 1
    admin = Admin({"bootstrap.servers": bench.bootstrap})
    swarm: dict[int, list[float]] = {n: [] for n in counts}
    bare: dict[int, list[float]] = {n: [] for n in counts}
    for attempt in range(1, bench.repeats + 1):
        for nodes in counts:
            bare[nodes].append(run(bench, admin, "bare", nodes, count))
            swarm[nodes].append(run(bench, admin, "swarm", nodes, count))
            bench.console.print(
                f"  run {attempt}/{bench.repeats}, {nodes} node(s): swarm "
                f"{swarm[nodes][-1]:,.0f}, bare {bare[nodes][-1]:,.0f} msgs/s"
            )
    note = f"{count:,} x 100 B over 8 partitions, 50 µs CPU each; {cores} cores"
    for nodes in counts:
        bench.record(
            Figure(bench.name, f"swarm, {nodes} node(s) vs bare, {nodes} process(es)",
                   "msgs/s", swarm[nodes], bare[nodes], note=note)
        )  # fmt: skip
    for nodes in counts[1:]:
        target = " (target >= 1.7x)" if nodes == 2 else ""
        speedup = Figure(bench.name, "", "msgs/s", swarm[nodes], swarm[1])
        bare_speedup = Figure(bench.name, "", "msgs/s", bare[nodes], bare[1])
        efficiency = (speedup.ratio or 0) / nodes
        bench.record(
            Figure(bench.name, f"swarm speed-up, {nodes} nodes over 1{target}", "msgs/s",
                   swarm[nodes], swarm[1],
                   note=f"{efficiency:.0%} per node; bare processes {bare_speedup.ratio or 0:.2f}x; "
                        f"{cores} cores")
        )  # fmt: skip
    admin.close()
    bench.report()


if __name__ == "__main__":
    main()
