"""Recurring tasks against the real broker: two processes of one group run a task every two
seconds together, and each slot runs once; when the one running them stops, the other takes
over and no slot runs twice."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from conveyor import App, ConfigurationError


def test_two_processes_run_each_slot_once_and_hand_over(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=1, config={"cleanup.policy": "compact"})
    group = f"g-{uuid.uuid4().hex[:8]}"
    runs: list[tuple[str, float]] = []
    changed = threading.Condition()

    def app_named(name: str) -> App:
        app = App(client_id=name, kafka={"bootstrap.servers": kafka_bootstrap, "group.id": group,
                                         "session.timeout.ms": 6_000},
                  max_wait_time=0.2)  # fmt: skip

        def ran(event: Any) -> None:  # after each run: its slot
            with changed:
                runs.append((name, event["slot"]))
                changed.notify_all()

        app.monitor.subscribe("recurring.ran", ran)

        def tick() -> None:
            pass

        app.recurring("*/2 * * * * *", tick, name="tick", topic=topic)
        return app

    def wait_runs(count: int, timeout: float = 40) -> None:
        with changed:
            assert changed.wait_for(lambda: len(runs) >= count, timeout), runs

    apps = {"first": app_named("first"), "second": app_named("second")}
    for app in apps.values():
        app.start()
    try:
        # The first runs may come from either process while the group forms (the one that
        # joined first may run a slot before the other's join moves the partition).
        wait_runs(3)
        leaders = [name for name, app in apps.items() if app._recurring.leading]  # type: ignore[union-attr]
        assert len(leaders) == 1, leaders
        [leader] = leaders
        settled = len(runs)
        wait_runs(settled + 2)
        apps.pop(leader).stop_and_wait()  # the other takes the partition over
        handed_over = len(runs)
        wait_runs(handed_over + 3)
    finally:
        for app in apps.values():
            app.stop_and_wait()
    slots = [slot for _, slot in runs]
    assert len(slots) == len(set(slots)), f"a slot ran twice: {runs}"
    assert all(slot % 2 == 0 for slot in slots), "the even seconds"
    assert {name for name, _ in runs[settled:handed_over]} == {leader}, "one process ran them"
    assert {name for name, _ in runs[handed_over:]} == {name for name in apps}, "then the other"


@pytest.mark.parametrize(
    ("cron", "task", "name", "named"),
    [("61 * * * *", print, "b", "cron"), ("* * * * *", "print", "c", "task"),
     ("* * * * *", print, "a", "name")],
)  # fmt: skip
def test_a_bad_recurring_task_is_refused(cron: str, task: Any, name: str, named: str) -> None:
    app = App(kafka={"bootstrap.servers": "127.0.0.1:1"})
    app.recurring("* * * * *", print, name="a")
    with pytest.raises(ConfigurationError) as refused:
        app.recurring(cron, task, name=name)
    assert refused.value.setting == named
