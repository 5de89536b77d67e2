"""Background jobs: Conveyor's jobs on Kafka beside Celery and Dramatiq on Redis.

Each side runs its own worker process with 4 workers, each library as it runs by default:
Conveyor one process with 4 worker threads (``concurrency=4``, a queue of 4 partitions),
Celery its prefork pool of 4 processes (``-c 4``), Dramatiq one process of 4 threads. Redis is
Debian's ``redis-server``, started by the benchmark on a port of its own (no persistence) and
stopped after; Celery 5.5.3 and Dramatiq 1.17.1 live in the peers' environment
(``.venv-bench-peers``). Every job is the same no-op that appends when it ran and when it was
enqueued to a file (``_jobs_record.py``); each run has queues of its own.

- **enqueue -> start**: a worker running, jobs enqueued one by one as a user would
  (``enqueue``, ``delay``, ``send``) at a steady 1,000 a second for 5 s: p50 and p99 of the
  time from the enqueue call to the job's start (the same clock, one machine).
- **throughput**: 100,000 no-op jobs enqueued first, then the worker started: jobs a second
  from the 10,000th job to the last.

Targets (issue 38): enqueue -> start p50 <= Celery's; throughput >= 3x Celery's. Dramatiq's
figures are printed beside, and a bare confluent-kafka side (``_jobs_bare.py``: a produce and
flush per job, one consumer loop that decodes each message and records it) for the cost of
the job layer itself.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _peers import peers_python
from harness import Bench, Figure

HERE = Path(__file__).resolve().parent
REDIS = os.environ.get("CONVEYOR_REDIS_SERVER", "/usr/bin/redis-server")
RATE = 1_000.0
SIDES = ("conveyor", "bare", "celery", "dramatiq")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def _no_redis() -> Iterator[str]:
    yield ""


@contextmanager
def redis_server() -> Iterator[str]:
    """Debian's redis-server on a port of its own, no persistence; its URL."""
    if not os.access(REDIS, os.X_OK):
        raise SystemExit(
            f"the jobs benchmark needs {REDIS}: run tools/ensure-redis (make bench does)"
        )
    port = _free_port()
    folder = tempfile.mkdtemp(prefix="bench-redis-")
    process = subprocess.Popen(
        [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", folder, "--loglevel", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
                    connection.sendall(b"PING\r\n")
                    if connection.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit("redis-server did not start")
            threading.Event().wait(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(30)
        shutil.rmtree(folder, ignore_errors=True)


class Run:
    """One side's run: its queue, its output file, its worker, its enqueuer."""

    def __init__(self, bench: Bench, side: str, peers: str, redis: str) -> None:
        self.side = side
        suffix = uuid.uuid4().hex[:8]
        self.out = Path(tempfile.mkdtemp(prefix="bench-jobs-")) / "done.txt"
        self.out.touch()
        self.python = sys.executable if side in ("conveyor", "bare") else peers
        self.env = {
            **os.environ, "JOBS_OUT": str(self.out), "JOBS_QUEUE": f"bench-{suffix}",
            "JOBS_GROUP": f"bench-jobs-{suffix}", "JOBS_SCHEDULES": f"bench-schedules-{suffix}",
            "JOBS_REDIS": redis, "KAFKA_BOOTSTRAP_SERVERS": bench.bootstrap,
            "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent / "src")]),
        }  # fmt: skip
        if side not in ("conveyor", "bare"):
            self.env["PYTHONPATH"] = str(HERE)  # the peers' environment has no Conveyor
        self.worker: subprocess.Popen[bytes] | None = None
        if side in ("conveyor", "bare"):
            self._run("migrate", "0")

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            [self.python, str(HERE / f"_jobs_{self.side}.py"), *args], env=self.env, cwd=HERE,
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"{self.side} {args[0]} failed:\n{done.stderr[-3000:]}")

    def start_worker(self) -> None:
        bin_dir = Path(self.python).parent
        command = {
            "conveyor": [self.python, "-m", "conveyor", "server", "--app", "_jobs_conveyor:app",
                         "--log-level", "ERROR"],
            "bare": [self.python, str(HERE / "_jobs_bare.py"), "worker"],
            "celery": [str(bin_dir / "celery"), "-A", "_jobs_celery", "worker", "-c", "4",
                       "-P", "prefork", "--loglevel", "ERROR", "-Q", self.env["JOBS_QUEUE"],
                       "--without-gossip", "--without-mingle", "--without-heartbeat"],
            "dramatiq": [str(bin_dir / "dramatiq"), "_jobs_dramatiq", "--processes", "1",
                         "--threads", "4", "--queues", self.env["JOBS_QUEUE"]],
        }[self.side]  # fmt: skip
        self.worker = subprocess.Popen(
            command, env=self.env, cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def stop_worker(self) -> None:
        if self.worker is not None:
            self.worker.terminate()
            try:
                self.worker.wait(60)
            except subprocess.TimeoutExpired:
                self.worker.kill()
                self.worker.wait(30)

    def enqueue(self, what: str, count: int, rate: float | None = None) -> None:
        self._run(what, str(count), *([] if rate is None else [str(rate)]))

    def lines(self) -> list[tuple[float, float]]:
        rows = []
        for line in self.out.read_text().splitlines():
            done, enqueued = line.split()
            rows.append((float(done), float(enqueued)))
        return rows

    def wait_for(self, count: int, timeout: float) -> list[tuple[float, float]]:
        deadline = time.monotonic() + timeout
        pause = threading.Event()
        while True:
            rows = self.lines()
            if len(rows) >= count:
                return rows
            if time.monotonic() > deadline:
                raise SystemExit(f"{self.side}: {len(rows)} of {count} jobs ran in {timeout:g} s")
            if self.worker is not None and self.worker.poll() is not None:
                raise SystemExit(f"{self.side}'s worker ended ({self.worker.returncode})")
            pause.wait(0.2)


def latency(bench: Bench, side: str, peers: str, redis: str, count: int) -> tuple[float, float]:
    """p50 and p99 (ms) from enqueue to start at a steady RATE, a worker running."""
    run = Run(bench, side, peers, redis)
    run.start_worker()
    try:
        run.enqueue("steady", 1, RATE)  # the worker is up once this one ran
        run.wait_for(1, 120)
        run.out.write_text("")
        run.enqueue("steady", count, RATE)
        rows = run.wait_for(count, 120)
    finally:
        run.stop_worker()
    waits = sorted((done - enqueued) * 1000 for done, enqueued in rows)
    return statistics.median(waits), waits[min(len(waits) - 1, int(len(waits) * 0.99))]


def throughput(bench: Bench, side: str, peers: str, redis: str, count: int) -> float:
    """Jobs a second, ``count`` enqueued first, from the 10 % mark to the last."""
    run = Run(bench, side, peers, redis)
    run.enqueue("fill", count)
    run.start_worker()
    try:
        rows = run.wait_for(count, 900)
    finally:
        run.stop_worker()
    finished = sorted(done for done, _ in rows)
    start = max(1, count // 10)
    return (count - start) / (finished[-1] - finished[start - 1])


def _arguments(parser: object) -> None:
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs in the throughput runs")  # type: ignore[attr-defined]
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of steady enqueues")  # type: ignore[attr-defined]
    parser.add_argument(
        "--sides",
        default=",".join(SIDES),  # type: ignore[attr-defined]
        help="the sides to run (the tests' short run: conveyor alone)",
    )


def main() -> None:
    bench = Bench("jobs", __doc__ or "", _arguments)
    sides = [side for side in bench.args.sides.split(",") if side]
    if not set(sides) <= set(SIDES) or sides[0] != "conveyor":
        raise SystemExit(f"--sides: conveyor first, then any of {', '.join(SIDES[1:])}")
    peers = peers_python() if set(sides) & {"celery", "dramatiq"} else sys.executable
    steady = int(RATE * bench.args.seconds)
    p50: dict[str, list[float]] = {side: [] for side in sides}
    p99: dict[str, list[float]] = {side: [] for side in sides}
    rates: dict[str, list[float]] = {side: [] for side in sides}
    with redis_server() if set(sides) & {"celery", "dramatiq"} else _no_redis() as redis:
        for attempt in range(1, bench.repeats + 1):
            for side in sides:
                median, tail = latency(bench, side, peers, redis, steady)
                p50[side].append(median)
                p99[side].append(tail)
            for side in sides:
                rates[side].append(throughput(bench, side, peers, redis, bench.args.jobs))
            bench.console.print(
                f"  run {attempt}/{bench.repeats}: "
                + "; ".join(
                    f"{side} p50 {p50[side][-1]:.2f} ms p99 {p99[side][-1]:.2f} ms "
                    f"{rates[side][-1]:,.0f} jobs/s"
                    for side in sides
                )
            )
    for peer in sides[1:]:
        target = peer == "celery"
        if peer == "bare":
            bench.record(Figure(bench.name, "enqueue -> start p50 vs bare produce + consume loop",
                                "ms", p50["conveyor"], p50[peer], False, "the job layer's cost"))  # fmt: skip
            bench.record(Figure(bench.name, "no-op throughput vs bare consume loop", "jobs/s",
                                rates["conveyor"], rates[peer], True, "decode + record, commit async"))  # fmt: skip
            continue
        bench.record(Figure(bench.name, f"enqueue -> start p50 vs {peer}"
                            + (" (target <= 1x)" if target else ""), "ms", p50["conveyor"],
                            p50[peer], False, f"steady {RATE:,.0f} jobs/s for {bench.args.seconds:g} s"))  # fmt: skip
        bench.record(Figure(bench.name, f"enqueue -> start p99 vs {peer}", "ms", p99["conveyor"],
                            p99[peer], False, ""))  # fmt: skip
        bench.record(Figure(bench.name, f"no-op throughput vs {peer}"
                            + (" (target >= 3x)" if target else ""), "jobs/s", rates["conveyor"],
                            rates[peer], True, f"{bench.args.jobs:,} jobs, 4 workers each"))  # fmt: skip
    bench.report()


if __name__ == "__main__":
    main()
