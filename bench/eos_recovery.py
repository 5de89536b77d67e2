"""Recovery of an exactly-once copy after a SIGKILL that leaves offsets in an open transaction.

A `conveyor server` copies a 3-partition topic in transactions (bench/_eos_app.py) and is
killed right after a transaction added its offsets (a fault injected after send_offsets); a
new process starts at once. The figure is the time from the kill to the new process's first
committed transaction. With the slot's stable transactional.id the new process fences the
crashed one's transaction (Kafka aborts it at once) and waits about the session timeout (6 s,
for the dead member to leave the group); with a transactional.id of its own (the behaviour
before, run here as UNFENCED=1) it waits for the broker to abort the transaction after
transaction.timeout.ms (60 s by default), because its offset fetch is answered
UNSTABLE_OFFSET_COMMIT until then. No bare baseline: the comparison is the two variants.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from baselines import fill_topic
from harness import Bench, Figure

HERE = Path(__file__).resolve().parent


def start(
    topic: str, output: str, group: str, bootstrap: str, **extra: str
) -> subprocess.Popen[str]:
    env = dict(os.environ, TOPIC=topic, OUTPUT=output, GROUP=group,
               KAFKA_BOOTSTRAP_SERVERS=bootstrap, **extra)  # fmt: skip
    env["PYTHONPATH"] = str(HERE) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen(
        [sys.executable, "-m", "conveyor", "server", "--app", "_eos_app:app", "--log-level", "ERROR"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env=env, cwd=HERE,
    )  # fmt: skip


def first_batch(process: subprocess.Popen[str], timeout: float) -> float | None:
    """When ``process`` printed its first committed batch (monotonic), or None."""
    seen: list[float] = []
    printed = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("batch ") and not seen:
                seen.append(time.monotonic())
                printed.set()

    threading.Thread(target=read, daemon=True).start()
    printed.wait(timeout)
    return seen[0] if seen else None


def recovery(bench: Bench, unfenced: bool) -> float:
    topic, output = bench.create_topic(partitions=3), bench.create_topic(partitions=3)
    fill_topic(bench.bootstrap, topic, 30_000, b"x" * 100, partitions=3)
    group = f"eos-recovery-{uuid.uuid4().hex[:8]}"
    extra = {"UNFENCED": "1"} if unfenced else {}
    crashing = start(topic, output, group, bench.bootstrap, KILL_AFTER_OFFSETS="20", **extra)
    crashing.wait(120)
    killed = time.monotonic()
    successor = start(topic, output, group, bench.bootstrap, **extra)
    try:
        committed = first_batch(successor, 180)
    finally:
        successor.kill()
        successor.wait(30)
        if crashing.stdout is not None:
            crashing.stdout.close()
    if committed is None:
        raise RuntimeError("the restarted process committed nothing within 180 s")
    return committed - killed


def main() -> None:
    bench = Bench(
        "eos_recovery",
        __doc__.splitlines()[0],
        lambda parser: parser.add_argument(
            "--fenced-only", action="store_true",
            help="skip the minute-long run without the fence (the tests' quick form)",
        ),
    )  # fmt: skip
    fenced = [recovery(bench, unfenced=False) for _ in range(bench.repeats)]
    # a minute each: one run tells
    unfenced = [] if bench.args.fenced_only else [recovery(bench, unfenced=True)]
    bench.record(
        Figure(bench.name, "kill with offsets pending -> first commit after restart, fenced",
               "s", fenced, unfenced, higher_is_better=False,
               note="baseline: a transactional.id of each process's own (one run)")
    )  # fmt: skip
    bench.report()


if __name__ == "__main__":
    main()
