"""`conveyor swarm` against the real broker: three nodes share a 6-partition topic and process
every message once; a node killed with SIGKILL is replaced and nothing is lost (duplicates
only of what the killed node had processed and not committed); SIGTERM to the supervisor
stops every node gracefully and it exits 0; a node past its memory limit is replaced; bad
input is refused with a message."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from conveyor import Admin, Producer
from conveyor.web import WebTopics
from helpers import ServerProcess, conveyor_argv

HERE = Path(__file__).parent


class Swarm(ServerProcess):
    """A `conveyor swarm` subprocess and what its supervisor says (stderr, line by line)."""

    def __init__(self, topic: str, bootstrap: str, processed: Path, *args: str, **env: str) -> None:
        environment = dict(
            os.environ, TOPIC=topic, GROUP=f"g-{topic}", KAFKA_BOOTSTRAP_SERVERS=bootstrap,
            PROCESSED_DIR=str(processed),
            PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""), **env,
        )  # fmt: skip
        argv = conveyor_argv("swarm", "--app", "swarm_app:app", "--log-level", "WARNING", *args)
        super().__init__(argv, env=environment, cwd=HERE, read=("stderr",))

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 90, join: float = 90) -> int:
        """SIGTERM to the supervisor; its exit code once it and its output have ended."""
        return super().stop(sig, timeout, join)

    def pids(self) -> dict[int, int]:
        """Node number -> its current pid, as the supervisor announced them."""
        found: dict[int, int] = {}
        for line in self.lines:
            match = re.search(r"node (\d+) started \(pid (\d+)\)", line)
            if match:
                found[int(match.group(1))] = int(match.group(2))
        return found


def processed(directory: Path) -> list[tuple[int, int, int]]:
    """(pid, partition, offset) of every message the nodes processed."""
    rows = []
    for path in directory.glob("*.txt"):
        for line in path.read_text().splitlines():
            pid, partition, offset = map(int, line.split())
            rows.append((pid, partition, offset))
    return rows


def wait_processed(directory: Path, expected: set[tuple[int, int]], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not expected <= {(p, o) for _, p, o in processed(directory)}:
        assert time.monotonic() < deadline, len(
            expected - {(p, o) for _, p, o in processed(directory)}
        )
        pause.wait(0.2)  # other processes write the files: nothing to wait on but them


def wait_members(bootstrap: str, group: str, count: int, timeout: float = 90) -> None:
    """Until the group is stable with ``count`` members, each with partitions."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        while True:
            try:
                info = admin.describe_consumer_group(group)
                if info.state == "STABLE" and sum(1 for m in info.members if m.assignment) == count:
                    return
            except Exception:  # the group is forming
                pass
            assert time.monotonic() < deadline, f"the group never had {count} members"
            pause.wait(0.2)  # the broker knows: nothing to wait on here


def assert_listed_under_the_supervisor(
    swarm: Swarm, topic: str, bootstrap: str, prefix: str
) -> None:
    """`conveyor info --processes` lists each node with its supervisor and node number."""
    deadline = time.monotonic() + 60
    expected = {
        f"supervisor {swarm.process.pid} · node {node}": pid for node, pid in swarm.pids().items()
    }
    while True:
        done = subprocess.run(
            [sys.executable, "-m", "conveyor", "info", "--app", "swarm_app:app", "--processes"],
            cwd=HERE, capture_output=True, text=True, timeout=60, check=False,
            env=dict(os.environ, TOPIC=topic, GROUP=f"g-{topic}", KAFKA_BOOTSTRAP_SERVERS=bootstrap,
                     PROCESSED_DIR="/tmp", WEB_PREFIX=prefix, COLUMNS="250",
                     PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        rows = [line for line in done.stdout.splitlines() if "supervisor" in line]
        listed = {
            label: pid
            for label, pid in expected.items()
            if any(label in row and f"/ {pid}" in row for row in rows)
        }
        if listed == expected:
            return
        assert time.monotonic() < deadline, done.stdout
        threading.Event().wait(0.5)  # the nodes report every 0.5 s


def produce(bootstrap: str, topic: str, count: int, payload: bytes = b"x") -> None:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": topic, "partition": n % 6, "payload": payload} for n in range(count)]
        )


def ends(bootstrap: str, topic: str) -> set[tuple[int, int]]:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        return {
            (partition, offset)
            for partition in range(6)
            for offset in range(admin.read_watermark_offsets(topic, partition)[1])
        }


def test_three_nodes_share_a_topic_a_killed_node_is_replaced_and_sigterm_stops_all(
    kafka_bootstrap: str, new_topic, tmp_path: Path, web_topics: WebTopics
) -> None:
    topic = new_topic(partitions=6)
    prefix = web_topics.reports.removesuffix("_consumers_reports")
    swarm = Swarm(topic, kafka_bootstrap, tmp_path, "--nodes", "3", "--liveness", "15",
                  WEB_PREFIX=prefix)  # fmt: skip
    try:
        assert swarm.wait_for(lambda lines: len(Swarm.pids(swarm)) == 3, 60), swarm.lines
        wait_members(kafka_bootstrap, f"g-{topic}", 3)
        assert_listed_under_the_supervisor(swarm, topic, kafka_bootstrap, prefix)
        produce(kafka_bootstrap, topic, 600)
        wait_processed(tmp_path, ends(kafka_bootstrap, topic))
        first = processed(tmp_path)
        assert len({pid for pid, _, _ in first}) >= 2, "the partitions are spread over nodes"
        assert not [k for k, n in Counter((p, o) for _, p, o in first).items() if n > 1]

        victim_node, victim = next(iter(swarm.pids().items()))
        os.kill(victim, signal.SIGKILL)
        assert swarm.wait_for(
            lambda lines: any(f"node {victim_node} exited" in line for line in lines), 30
        ), swarm.lines
        assert swarm.wait_for(lambda lines: Swarm.pids(swarm)[victim_node] != victim, 30)
        wait_members(kafka_bootstrap, f"g-{topic}", 3)
        produce(kafka_bootstrap, topic, 600)
        wait_processed(tmp_path, ends(kafka_bootstrap, topic))
    finally:
        code = swarm.stop()
    assert code == 0, swarm.lines
    assert sum("stopped (0)" in line for line in swarm.lines) == 3, swarm.lines
    rows = processed(tmp_path)
    counts = Counter((p, o) for _, p, o in rows)
    duplicated = {key for key, n in counts.items() if n > 1}
    by_victim = {(p, o) for pid, p, o in rows if pid == victim}
    assert duplicated <= by_victim, "duplicates only of what the killed node had processed"
    for pid in swarm.pids().values():
        assert not Path(f"/proc/{pid}").exists(), f"node {pid} outlived its supervisor"


def test_a_node_past_its_memory_limit_is_replaced(
    kafka_bootstrap: str, new_topic, tmp_path: Path
) -> None:
    topic = new_topic(partitions=6)
    swarm = Swarm(topic, kafka_bootstrap, tmp_path, "--nodes", "1", "--memory-limit", "250MB",
                  LEAK_MB="300")  # fmt: skip
    try:
        assert swarm.wait_for(lambda lines: len(Swarm.pids(swarm)) == 1, 60)
        [first] = swarm.pids().values()
        produce(kafka_bootstrap, topic, 1, payload=b"leak")
        assert swarm.wait_for(lambda lines: any("over the limit" in line for line in lines), 60), (
            swarm.lines
        )
        assert swarm.wait_for(lambda lines: Swarm.pids(swarm)[1] != first, 60), swarm.lines
    finally:
        swarm.stop()


def test_a_stuck_node_stops_beating_and_is_replaced(
    kafka_bootstrap: str, new_topic, tmp_path: Path
) -> None:
    topic = new_topic(partitions=6)
    swarm = Swarm(topic, kafka_bootstrap, tmp_path, "--nodes", "1", "--liveness", "3",
                  CONSUMING_TTL="1")  # fmt: skip
    try:
        assert swarm.wait_for(lambda lines: len(Swarm.pids(swarm)) == 1, 60)
        [first] = swarm.pids().values()
        produce(kafka_bootstrap, topic, 1, payload=b"hang")
        assert swarm.wait_for(
            lambda lines: any("sent no heartbeat" in line for line in lines), 60
        ), swarm.lines
        assert swarm.wait_for(lambda lines: Swarm.pids(swarm)[1] != first, 30), swarm.lines
        wait_processed(tmp_path, ends(kafka_bootstrap, topic))  # the new node processed it
        assert {pid for pid, _, _ in processed(tmp_path)} == {swarm.pids()[1]}
    finally:
        swarm.stop()


def test_bad_input_is_refused_with_a_message(kafka_bootstrap: str) -> None:
    for args, protocol, code, message in (
        (["--nodes", "0"], "classic", 2, "at least one node"),  # a usage error
        (["--memory-limit", "lots"], "classic", 2, "is not a size"),
        ([], "consumer", 1, "session.timeout.ms is not a client setting"),  # the app's own
    ):
        done = subprocess.run(
            [sys.executable, "-m", "conveyor", "swarm", "--app", "swarm_app:app", *args],
            cwd=HERE, capture_output=True, text=True, timeout=60, check=False,
            env=dict(os.environ, TOPIC="t", GROUP="g", KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap,
                     PROCESSED_DIR="/tmp", GROUP_PROTOCOL=protocol,
                     PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")),
        )  # fmt: skip
        assert done.returncode == code, done.stderr
        assert message in done.stderr
        assert "Traceback" not in done.stderr
