"""`conveyor server` runs an app as a process: it survives a SIGKILL without losing a
message, commits on a graceful stop, and shares partitions with a second process — under
both consumer group protocols (classic, and KIP-848's consumer)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conveyor import Admin, Producer
from helpers import ServerProcess, conveyor_argv

HERE = Path(__file__).parent
PROTOCOLS = pytest.mark.parametrize("protocol", ["classic", "consumer"])


class Server(ServerProcess):
    """One `conveyor server` subprocess (or a ``command`` of its own, a script: its traceback
    among the lines) running ``app`` on ``topic`` in ``group``, its output lines collected."""

    def __init__(
        self,
        topic: str,
        group: str,
        bootstrap: str,
        slow: float = 0.0,
        app: str = "reporting_app:app",
        command: list[str] | None = None,
        **extra: str,
    ) -> None:
        env = dict(
            os.environ,
            TOPIC=topic,
            GROUP=group,
            KAFKA_BOOTSTRAP_SERVERS=bootstrap,
            SLOW=str(slow),
            **extra,
        )
        env["PYTHONPATH"] = str(HERE) + os.pathsep + env.get("PYTHONPATH", "")
        super().__init__(
            command or conveyor_argv("server", "--app", app, "--log-level", "WARNING"),
            env=env,
            cwd=HERE,
            stderr=subprocess.STDOUT if command else subprocess.DEVNULL,  # a script's traceback
        )

    def batches(self) -> list[tuple[int, int, int]]:
        return [
            tuple(map(int, line.split()[1:]))
            for line in list(self.lines)
            if line.startswith("batch ")
        ]  # type: ignore[misc]


def processed(batches: list[tuple[int, int, int]]) -> dict[int, set[int]]:
    seen: dict[int, set[int]] = {}
    for partition, first, last in batches:
        seen.setdefault(partition, set()).update(range(first, last + 1))
    return seen


def covers(batches: list[tuple[int, int, int]], per_partition: dict[int, int]) -> bool:
    seen = processed(batches)
    return all(len(seen.get(p, ())) >= count for p, count in per_partition.items())


@pytest.fixture
def stream(kafka_bootstrap: str, new_topic) -> tuple[str, dict[int, int]]:
    topic = new_topic(partitions=4)
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": topic, "payload": b"%d" % i, "partition": i % 4} for i in range(8_000)]
        )
    return topic, {p: 2_000 for p in range(4)}


@PROTOCOLS
def test_a_killed_server_loses_nothing_after_restart(
    kafka_bootstrap: str, stream, protocol: str
) -> None:
    topic, counts = stream
    group = f"crash-{uuid.uuid4().hex[:8]}"
    first = Server(topic, group, kafka_bootstrap, slow=0.02, GROUP_PROTOCOL=protocol)
    try:
        assert first.wait_for(lambda lines: sum(line.startswith("batch") for line in lines) >= 8)
    finally:
        first.process.kill()
        first.process.wait(30)
    first_batches = first.batches()
    assert not covers(first_batches, counts), "the kill came mid-stream"

    second = Server(topic, group, kafka_bootstrap, GROUP_PROTOCOL=protocol)
    assert second.wait_for(lambda _lines: covers(first_batches + second.batches(), counts))
    assert second.stop() == 0
    both = first_batches + second.batches()
    assert covers(both, counts), "every message processed at least once"
    for partition in counts:
        # Within each run, a partition's batches go forward; the second run resumes at or
        # before where the first stopped (duplicates from the uncommitted window, no gap).
        for run in (first_batches, second.batches()):
            firsts = [b[1] for b in run if b[0] == partition]
            assert firsts == sorted(firsts)
        done_before = max((b[2] for b in first_batches if b[0] == partition), default=-1)
        resumed_at = min(
            (b[1] for b in second.batches() if b[0] == partition), default=done_before + 1
        )
        assert resumed_at <= done_before + 1


@PROTOCOLS
def test_a_graceful_stop_commits_so_a_restart_reads_nothing_twice(
    kafka_bootstrap: str, stream, protocol: str
) -> None:
    topic, counts = stream
    group = f"graceful-{uuid.uuid4().hex[:8]}"
    first = Server(topic, group, kafka_bootstrap, GROUP_PROTOCOL=protocol)
    assert first.wait_for(lambda _lines: covers(first.batches(), counts))
    assert first.stop(signal.SIGTERM) == 0
    assert any(line.startswith("shutdown") for line in first.lines)

    second = Server(topic, group, kafka_bootstrap, GROUP_PROTOCOL=protocol)
    assert second.wait_for(lambda lines: any(line.startswith("assigned") for line in lines))
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        marker = producer.produce_sync(topic=topic, payload=b"marker", partition=0)
    assert second.wait_for(lambda _lines: bool(second.batches()))
    assert second.stop() == 0
    assert second.batches() == [(0, marker.offset, marker.offset)]


def test_ctrl_c_stops_app_run_as_gracefully_as_stop(
    kafka_bootstrap: str, stream, kafka_admin: Admin
) -> None:
    """A script's ``app.run()`` interrupted by Ctrl-C stops the app gracefully (the
    consumers' ``shutdown()``, the offsets committed), then lets the interrupt go on."""
    topic, counts = stream
    group = f"interrupted-{uuid.uuid4().hex[:8]}"
    # A script started from a terminal gets Python's KeyboardInterrupt handler; one started by
    # a shell's background job (a `make test &`) inherits SIGINT ignored, and so does this
    # child unless an earlier test in the worker set a handler of its own: it then never sees
    # the Ctrl-C. The script takes the terminal's case, and says what it found (a hang prints it).
    script = [sys.executable, "-X", "faulthandler", "-c",
              "import signal; print('sigint', signal.getsignal(signal.SIGINT), flush=True); "
              "signal.signal(signal.SIGINT, signal.default_int_handler); "
              "import reporting_app; reporting_app.app.run()"]  # fmt: skip
    run = Server(topic, group, kafka_bootstrap, command=script)
    assert run.wait_for(lambda lines: "running" in lines and covers(run.batches(), counts))
    try:
        assert run.stop(signal.SIGINT) != 0, "the KeyboardInterrupt reaches the script"
    except subprocess.TimeoutExpired:
        status = Path(f"/proc/{run.process.pid}/status").read_text().splitlines()
        masks = [line for line in status if line.startswith(("Sig", "Shd"))]
        run.process.send_signal(signal.SIGABRT)  # faulthandler writes every thread's stack
        run.process.wait(30)
        run.wait_for(lambda lines: "<eof>" in lines, timeout=10)
        raise AssertionError(
            f"app.run() did not end (signal masks then: {masks}):\n" + "\n".join(run.lines[-200:])
        ) from None
    assert any(line.startswith("shutdown") for line in run.lines)
    lags = [lag for lag in kafka_admin.read_lags([group]) if lag.topic == topic]
    assert sorted((lag.partition, lag.committed) for lag in lags) == [
        (partition, count) for partition, count in sorted(counts.items())
    ]


@PROTOCOLS
def test_two_servers_share_partitions_and_the_survivor_takes_over(
    kafka_bootstrap: str, stream, protocol: str
) -> None:
    topic, _counts = stream
    group = f"share-{uuid.uuid4().hex[:8]}"
    first = Server(topic, group, kafka_bootstrap, slow=0.05, GROUP_PROTOCOL=protocol)
    second = None
    try:
        assert first.wait_for(
            lambda lines: any(line == "assigned 0,1,2,3" or line.count(",") == 3 for line in lines)
        )
        second = Server(topic, group, kafka_bootstrap, slow=0.05, GROUP_PROTOCOL=protocol)
        assert second.wait_for(
            lambda lines: any(
                line.startswith("assigned ") and line != "assigned " for line in lines
            )
        )
        assert first.wait_for(lambda lines: any(line.startswith("revoked") for line in lines))
        assigned_to_second = {
            int(p)
            for line in second.lines
            if line.startswith("assigned ")
            for p in line.split()[1].split(",")
            if p
        }
        assert 0 < len(assigned_to_second) < 4, "the partitions are shared"
        before_leaving = len(first.lines)
        assert second.stop() == 0
        second = None

        # The survivor gets the partitions of the one that left (all of them again under the
        # classic protocol's eager rebalance, only the freed ones under KIP-848's incremental one)
        def took_over(lines: list[str]) -> bool:
            gained = {
                int(p)
                for line in lines[before_leaving:]
                if line.startswith("assigned ")
                for p in line.split()[1].split(",")
                if p
            }
            return gained >= assigned_to_second

        assert first.wait_for(took_over)
    finally:
        if second is not None:
            second.stop(signal.SIGKILL)
        assert first.stop() == 0


def test_sigtstp_quiets_the_server(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=1)
    group = f"quiet-{uuid.uuid4().hex[:8]}"
    server = Server(topic, group, kafka_bootstrap)
    try:
        assert server.wait_for(lambda lines: any(line.startswith("assigned") for line in lines))
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            producer.produce_sync(topic=topic, payload=b"before")
            assert server.wait_for(lambda _lines: len(server.batches()) == 1)
            server.process.send_signal(signal.SIGTSTP)
            assert server.wait_for(lambda lines: "quiet" in lines)
            producer.produce_sync(topic=topic, payload=b"while quiet")
    finally:
        assert server.stop() == 0
    assert len(server.batches()) == 1, "a quiet server took nothing new until it stopped"
    # The positive marker: the next member of the group starts right at the message the quiet
    # one left alone (its offset was not committed), after the one it processed (committed).
    after = Server(topic, group, kafka_bootstrap)
    try:
        assert after.wait_for(lambda _lines: len(after.batches()) >= 1)
        assert after.batches()[0][1:] == (1, 1)
    finally:
        assert after.stop() == 0


def test_a_kill_before_the_dlq_acknowledged_the_copy_loses_nothing(
    kafka_bootstrap: str, new_topic, read_messages, kafka_admin: Admin
) -> None:
    """The DLQ loss window: the poison message's copy is sent asynchronously to a DLQ topic
    that will not take it (its max.message.bytes is below the copy's size, so the broker never
    acknowledges it), processing goes on and commits every 200 ms, then the server is killed.
    The commit must have stopped at the poison message, so that a restart (the DLQ topic
    fixed) reads it again and moves it."""
    topic = new_topic(partitions=1)
    dlq = new_topic(config={"max.message.bytes": "200"})  # the copy, with its headers, is larger
    values = [*range(50), -1, *range(50, 100)]
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync([{"topic": topic, "payload": {"n": n}} for n in values])
    group = f"dlq-kill-{uuid.uuid4().hex[:8]}"
    everything = set(range(len(values))) - {50}

    def committed() -> int | None:
        lags = [lag for lag in kafka_admin.read_lags([group]) if lag.topic == topic]
        return lags[0].committed if lags else None

    first = Server(topic, group, kafka_bootstrap, app="dlq_app:app", DLQ=dlq)
    try:
        assert first.wait_for(lambda lines: "dispatched 50" in lines)
        assert first.wait_for(lambda _: processed(first.batches()).get(0, set()) >= everything)
        # Everything else is processed and marked; the periodic commit (200 ms) would pass
        # offset 50 within a few rounds if nothing held it back. Polling the broker's view.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and (committed() or 0) <= 50:
            time.sleep(0.1)
        assert committed() == 50, "the commit waits for the DLQ's acknowledgement"
    finally:
        first.process.kill()
        first.process.wait(30)
    kafka_admin.alter_configs("topic", dlq, {"max.message.bytes": None})
    second = Server(topic, group, kafka_bootstrap, app="dlq_app:app", DLQ=dlq)
    assert second.wait_for(lambda lines: "dispatched 50" in lines), "read again and moved"
    # the rest is read again before the stop: a stop takes no new batch, and the commit would
    # rightly stop short of one not processed yet
    rest = everything - set(range(50))
    assert second.wait_for(lambda _: processed(second.batches()).get(0, set()) >= rest)
    assert second.stop() == 0
    moved = read_messages(dlq, 1)
    assert [m.value() for m in moved] == [b'{"n":-1}']
    assert committed() == len(values)
