"""Pending schedules outlive a SIGKILLed dispatcher: a process that sent one schedule, loaded
a few more and committed its offset up to them is killed before they are due; the next one
sends each of them once (counted by payload over all the destination holds), and the
schedules topic then holds none pending."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

from conveyor import Admin, Producer
from conveyor.web.reading.schedules import ScheduleReader
from helpers import ServerProcess, conveyor_argv

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1]
COUNT = 6


def committed(admin: Admin, group: str, topic: str) -> int:
    """The group's committed offset of ``topic``'s partition 0 (-1: none)."""
    found = [lag.committed for lag in admin.read_lags([group]) if lag.topic == topic]
    return max([c for c in found if c is not None], default=-1)


class Server(ServerProcess):
    """One ``conveyor server`` running schedules_app, its output lines collected."""

    def __init__(self, env: dict[str, str]) -> None:
        argv = conveyor_argv("server", "--app", "schedules_app:app", "--log-level", "ERROR")
        super().__init__(argv, env=env, cwd=HERE, wait=90)

    def sent(self) -> list[str]:
        with self.changed:
            return [line.split()[1] for line in self.lines if line.startswith("sent ")]


def test_pending_schedules_survive_a_sigkilled_dispatcher(
    kafka_bootstrap: str, kafka_admin: Admin, new_topic, read_messages
) -> None:
    target = new_topic()
    schedules = new_topic(partitions=1, config={"cleanup.policy": "compact"})
    group = f"sched-kill-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "GROUP": group,
        "SCHEDULES": schedules, "TARGET": target,
        "PYTHONPATH": os.pathsep.join([str(HERE), str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }  # fmt: skip
    reader = ScheduleReader({"bootstrap.servers": kafka_bootstrap})
    payloads = {f"due-{n}-{uuid.uuid4().hex[:6]}" for n in range(COUNT)}
    first = Server(env)
    try:
        assert first.wait_for(lambda lines: "pending 0" in lines), "the first server runs"
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            early = producer.produce_at(time.time() - 1, topic=target, payload=b"early",
                                        schedules_topic=schedules)  # fmt: skip
            assert first.wait_for(lambda lines: f"sent {early}" in lines), "sent at once"
            due = time.time() + 6.0
            for n, payload in enumerate(sorted(payloads)):
                producer.produce_at(due + n * 0.2, topic=target, payload=payload.encode(),
                                    key=f"k{n}", schedules_topic=schedules)  # fmt: skip
        assert first.wait_for(lambda lines: f"pending {COUNT}" in lines, due - time.time()), (
            "loaded before they are due"
        )
        oldest = min(m.stored_offset for m in reader.pending(schedules).messages)
        deadline = time.monotonic() + due - time.time()
        while committed(kafka_admin, group, schedules) < oldest:  # up to the pending ones
            assert time.monotonic() < deadline, "the dispatcher committed before the kill"
            threading.Event().wait(0.1)
    finally:
        first.process.send_signal(signal.SIGKILL)
        killed_at = time.time()
        first.process.wait(30)
        first.join()
    assert killed_at < due, "killed before any was due"
    assert first.sent() == [early], "the first server sent only the early one"
    held = reader.pending(schedules, group)
    assert sorted(m.topic for m in held.messages) == [target] * COUNT, "still pending"

    second = Server(env)
    try:
        assert second.wait_for(lambda lines: len([x for x in lines if x.startswith("sent ")])
                               >= COUNT, 60), second.lines  # fmt: skip
    finally:
        assert second.stop() == 0
    assert sorted(second.sent()) == sorted(m.id for m in held.messages), "each sent, once"
    # Nothing runs any more: all the destination holds, to its end, is what was sent.
    end = kafka_admin.read_watermark_offsets(target, 0)[1]
    arrived = Counter(m.value().decode() for m in read_messages(target, end))
    assert set(arrived) == payloads | {"early"}
    assert set(arrived.values()) == {1}, f"exactly once each: {arrived}"
    assert reader.pending(schedules, group).messages == [], "none pending any more"
