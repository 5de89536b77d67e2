"""Commands over the web UI's commands topic, acting on a real `conveyor server` subprocess:
probe returns every thread's stack; pause stops fetching one partition while the other goes
on, resume brings it back; seek re-reads from an offset and from a time; quiet and stop act
and the stop's exit code is 0; bad commands are refused with the reason, a command to a
process that is gone times out with a message, and `conveyor ctl` does the same from a shell;
quiet and stop to every process (of one consumer group) reach those processes alone, each
answering for itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conveyor import App, Consumer, Producer
from conveyor.errors import ConfigurationError
from conveyor.web import WebTopics
from conveyor.web.aggregation.fold import process_status
from conveyor.web.commands import Commander, fleet_members
from conveyor.web.reading.data import WebData
from helpers import Record, running
from integration.web.test_browser import eventually

HERE = Path(__file__).parent


@dataclass
class Served:
    """A `conveyor server` subprocess with the web UI on, and what the test sees of it."""

    server: subprocess.Popen[bytes]
    process_id: str
    commander: Commander
    processed: Path
    env: dict[str, str]

    def seen(self) -> list[tuple[int, int]]:
        """(partition, offset) of every message the server processed, in order."""
        if not self.processed.exists():
            return []
        return [
            (int(p), int(o))
            for p, o in (line.split() for line in self.processed.read_text().splitlines())
        ]

    def wait_seen(self, predicate, timeout: float = 30) -> list[tuple[int, int]]:
        """Wait until the processed log satisfies ``predicate`` (another process writes it:
        there is nothing to wait on but the file)."""
        deadline = time.monotonic() + timeout
        while True:
            seen = self.seen()
            if predicate(seen):
                return seen
            if time.monotonic() > deadline:
                raise AssertionError(f"not seen in {timeout} s; processed: {seen}")
            time.sleep(0.05)


@dataclass
class Fleet:
    """Several `conveyor server` subprocesses of one app on one topic, and the viewer's data
    (the reports, folded) through which the test sees them."""

    servers: list[Served]
    data: WebData

    @property
    def commander(self) -> Commander:
        return self.servers[0].commander

    def expected(self, group: str | None = None) -> list[str]:
        """The processes the reports show running (of ``group``)."""
        return fleet_members(self.data.states(), time.time(), group)


@contextmanager
def serving(
    bootstrap: str, topic: str, web_topics: WebTopics, tmp_path: Path, groups: list[str]
) -> Iterator[Fleet]:
    """One `conveyor server` per entry of ``groups`` (its consumer group), each reporting
    running with its share of the topic's 2 partitions (the group's members hold all 2)."""
    servers = []
    for number, group in enumerate(groups):
        processed = tmp_path / f"processed-{number}.txt"
        env = dict(
            os.environ, KAFKA_BOOTSTRAP_SERVERS=bootstrap, TOPIC=topic, GROUP=group,
            WEB_PREFIX=web_topics.reports.removesuffix("_consumers_reports"), AGGREGATE="0",
            PROCESSED_FILE=str(processed),
            PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        )  # fmt: skip
        server = subprocess.Popen(
            [sys.executable, "-m", "conveyor", "server", "--app", "web_app:app", "--log-level", "INFO"],
            cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        servers.append((server, group, processed, env))
    viewer = App(client_id="viewer", kafka={"bootstrap.servers": bootstrap, "group.id": "viewer"})
    viewer.web.enable(topics=web_topics, aggregate=False, commands=False)
    aggregator = viewer.web.new_aggregator()
    aggregator.start()
    data = viewer.web.data

    def settled(d: WebData) -> bool:
        """Every server running, each with a share of the partitions its group holds whole."""
        by_pid = {s["pid"]: s for s in d.states().values() if process_status(s, d.now) == "running"}
        if any(server.pid not in by_pid for server, *_ in servers):
            return False
        held: dict[str, int] = {}
        for server, group, *_ in servers:
            count = len(by_pid[server.pid]["partitions"])
            if count == 0:
                return False
            held[group] = held.get(group, 0) + count
        return all(count == 2 for count in held.values())

    try:
        assert data.wait_for(settled, 90), "every server reports itself with its partitions"
        states = {s["pid"]: s for s in data.states().values()}
        yield Fleet(
            [
                Served(server, states[server.pid]["id"], viewer.web.commander(), processed, env)
                for server, _, processed, env in servers
            ],
            data,
        )
    finally:
        for server, *_ in servers:
            if server.poll() is None:
                server.kill()
                server.wait(30)
        aggregator.stop()
        data.stop()
        viewer.producer.close(5)


@contextmanager
def served(bootstrap: str, topic: str, web_topics: WebTopics, tmp_path: Path) -> Iterator[Served]:
    with serving(bootstrap, topic, web_topics, tmp_path, [f"g-{topic}"]) as fleet:
        [one] = fleet.servers
        yield one


def ctl(served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    """`conveyor ctl ARGS` from a shell, on the served app (wide tables)."""
    return subprocess.run(
        [sys.executable, "-m", "conveyor", "ctl", *args, "--app", "web_app:app"],
        cwd=HERE, env={**served.env, "COLUMNS": "250"}, capture_output=True, text=True,
        timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def produce(bootstrap: str, topic: str, partition: int, count: int) -> None:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": topic, "partition": partition, "payload": f"{i}"} for i in range(count)]
        )


def of(partition: int, seen: list[tuple[int, int]]) -> list[int]:
    return [offset for p, offset in seen if p == partition]


def test_probe_pause_resume_and_seek_act_on_a_running_server(
    kafka_bootstrap: str, new_topic, web_topics: WebTopics, tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    with served(kafka_bootstrap, topic, web_topics, tmp_path) as s:
        probe = s.commander.send("probe", process=s.process_id, timeout=20)
        assert probe.status == "done", probe
        names = [thread["name"] for thread in probe.result["threads"]]
        assert "MainThread" in names
        assert "conveyor-web-commands" in names, "the thread that answered is in the probe"
        assert any("listener" in name for name in names), names
        assert all(thread["stack"] for thread in probe.result["threads"])

        produce(kafka_bootstrap, topic, 0, 5)
        produce(kafka_bootstrap, topic, 1, 5)
        s.wait_seen(lambda seen: len(of(0, seen)) == 5 and len(of(1, seen)) == 5)

        # pause 0: its new messages are not processed while 1's are (the positive marker)
        paused = s.commander.send("pause", topic=topic, partition=0, timeout=20)
        assert (paused.status, paused.process) == ("done", s.process_id), paused
        produce(kafka_bootstrap, topic, 0, 5)
        produce(kafka_bootstrap, topic, 1, 5)
        seen = s.wait_seen(lambda seen: len(of(1, seen)) == 10)
        assert of(0, seen) == list(range(5)), "nothing of partition 0 while it is paused"

        resumed = s.commander.send("resume", topic=topic, partition=0, timeout=20)
        assert resumed.status == "done", resumed
        s.wait_seen(lambda seen: of(0, seen) == list(range(10)))

        # seek by offset: partition 1 is read again from 7, by the process that has it
        sought = s.commander.send(
            "seek", process=s.process_id, topic=topic, partition=1, offset=7, timeout=20
        )
        assert (sought.status, sought.result["offset"]) == ("done", 7), sought
        seen = s.wait_seen(lambda seen: of(1, seen) == [*range(10), 7, 8, 9])

        # seek by time: a time before everything re-reads from the start
        long_ago = datetime.now(UTC) - timedelta(hours=1)
        sought = s.commander.send("seek", topic=topic, partition=0, time=long_ago, timeout=20)
        assert (sought.status, sought.result["offset"]) == ("done", 0), sought
        s.wait_seen(lambda seen: of(0, seen) == [*range(10), *range(10)])

        # refused, with the reason: a partition it does not have, an offset past the end
        refused = s.commander.send(
            "pause", process=s.process_id, topic=topic, partition=7, timeout=20
        )
        assert refused.status == "refused"
        assert "not assigned" in refused.reason
        refused = s.commander.send(
            "seek", process=s.process_id, topic=topic, partition=1, offset=500, timeout=20
        )
        assert refused.status == "refused"
        assert "past the end" in refused.reason

        # the shell: `conveyor ctl probe` prints the threads
        shell = subprocess.run(
            [sys.executable, "-m", "conveyor", "ctl", "probe", s.process_id, "--app",
             "web_app:app", "--timeout", "20"],
            cwd=HERE, env=s.env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert shell.returncode == 0, shell.stderr
        assert "MainThread" in shell.stdout
        shell = subprocess.run(
            [sys.executable, "-m", "conveyor", "ctl", "pause", topic, "0", "--until", "tomorrow",
             "--app", "web_app:app"],
            cwd=HERE, env=s.env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert shell.returncode == 2
        assert "not an ISO 8601 time" in shell.stderr


def test_quiet_then_stop_and_the_server_exits_0(
    kafka_bootstrap: str, new_topic, web_topics: WebTopics, tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    with served(kafka_bootstrap, topic, web_topics, tmp_path) as s:
        quiet = s.commander.send("quiet", process=s.process_id, timeout=20)
        assert (quiet.status, quiet.result["state"]) == ("done", "quiet"), quiet
        stopped = s.commander.send("stop", process=s.process_id, timeout=20)
        assert stopped.status == "done", stopped
        assert s.server.wait(60) == 0, "a graceful stop"

        # the process is gone: a command times out, with a message, in about its timeout
        started = time.monotonic()
        gone = s.commander.send("probe", process=s.process_id, timeout=2)
        assert gone.status == "timed out"
        assert "no answer from process" in gone.reason
        assert time.monotonic() - started < 10, "nothing hangs"

        with pytest.raises(ConfigurationError, match="needs the id of one process"):
            s.commander.send("stop")
        with pytest.raises(ConfigurationError, match="time zone"):
            s.commander.send("pause", topic=topic, partition=0, until="2026-11-24T10:00:00")


def test_quiet_and_stop_every_process_or_every_process_of_one_group(
    kafka_bootstrap: str, new_topic, web_topics: WebTopics, tmp_path: Path
) -> None:
    """Two processes in group orders, one in group audit, all of one app on one topic: quiet
    to audit's processes (from the shell) reaches the audit one alone, and it takes nothing
    new while orders' processes take it all; quiet to every process reaches the three, and
    they take nothing more while another group reads what was sent meanwhile; stop to every
    process ends the three (exit 0); a process the reports know that does not answer is
    listed as timed out."""
    topic = new_topic(partitions=2)
    orders, audit = f"orders-{topic}", f"audit-{topic}"
    with serving(kafka_bootstrap, topic, web_topics, tmp_path, [orders, orders, audit]) as fleet:
        first, second, auditor = fleet.servers
        everyone = sorted(s.process_id for s in fleet.servers)
        assert fleet.expected() == everyone
        # From here the commands wait for the processes this test started: a report late
        # under load would drop one from the reports' view, not from the fleet.
        assert fleet.expected(audit) == [auditor.process_id]

        # the shell: every process of group audit, its answer listed
        shell = ctl(auditor, "quiet", "--group", audit, "--yes", "--timeout", "20")
        assert shell.returncode == 0, shell.stdout + shell.stderr
        assert "quiet to every process of consumer group " + audit in shell.stdout
        assert "1 of 1 done" in shell.stdout
        assert auditor.process_id in shell.stdout
        assert first.process_id not in shell.stdout, "group orders is not reached"
        refused = ctl(auditor, "quiet", auditor.process_id, "--all")
        assert refused.returncode == 2
        assert "not both" in refused.stderr

        # orders' processes take the new messages (the positive marker), audit's takes none
        produce(kafka_bootstrap, topic, 0, 5)
        produce(kafka_bootstrap, topic, 1, 5)
        first_five = [(p, o) for p in (0, 1) for o in range(5)]
        assert eventually(lambda: sorted(first.seen() + second.seen()) == first_five, 30)
        assert auditor.seen() == [], "a quiet process takes nothing new"

        # every process: one command, each answers for itself
        quiet = fleet.commander.send_all("quiet", expected=everyone, timeout=20)
        assert quiet.status == "done", quiet
        assert [r.process for r in quiet.results] == everyone
        assert {r.result["state"] for r in quiet.results} == {"quiet"}

        # nothing more is taken: another group reads what comes now (the marker), they don't
        produce(kafka_bootstrap, topic, 0, 5)
        produce(kafka_bootstrap, topic, 1, 5)
        control = Record()

        class Control(Consumer):
            def consume(self) -> None:
                control.add(*((m.partition, m.offset) for m in self.messages))

        reader = App(client_id="control", kafka={"bootstrap.servers": kafka_bootstrap,
                     "group.id": f"control-{topic}", "auto.offset.reset": "earliest"})  # fmt: skip
        reader.routes.topic(topic, Control)
        with running(reader):
            assert control.wait_for(lambda seen: len(set(seen)) == 20, 60), control.items

        stop = fleet.commander.send_all("stop", expected=everyone, timeout=20)
        assert stop.status == "done", stop
        assert [r.process for r in stop.results] == everyone
        for served_one in fleet.servers:
            assert served_one.server.wait(60) == 0, "a graceful stop"
        assert sorted(first.seen() + second.seen()) == first_five, "nothing taken while quiet"
        assert auditor.seen() == []

        # a process the reports know that does not answer: listed as timed out, in time
        started = time.monotonic()
        late = fleet.commander.send_all("quiet", expected=["ghost:1:x"], timeout=2)
        assert late.status == "timed out"
        assert [(r.process, r.status) for r in late.results] == [("ghost:1:x", "timed out")]
        assert time.monotonic() - started < 10
