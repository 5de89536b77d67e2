"""The records of the recurring tasks' topic (what the web UI writes and the process running
the tasks reads), folded the same way on both sides; the schedules' wire rules the web UI's
reader shares with the dispatcher."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from conveyor import App, ConfigurationError
from conveyor.schedules.records import (
    TaskRecords,
    fold_record,
    handled_message,
    result_message,
    run_message,
    split_key,
    state_message,
)
from conveyor.schedules.wire import cancels, schedule_message, scheduled_for


def fold(tasks: dict[str, TaskRecords], message: dict[str, Any]) -> tuple[str, str | None] | None:
    return fold_record(tasks, message["key"].encode(), message["payload"])


def test_each_kind_of_record_folds_into_its_tasks_state() -> None:
    tasks: dict[str, TaskRecords] = {}
    assert fold_record(tasks, b"report", json.dumps({"at": 60.0}).encode()) == ("report", None)
    fold_record(tasks, b"report", json.dumps({"at": 30.0}).encode())
    assert tasks["report"].last_slot == 60.0, "the newest slot"
    assert fold(tasks, state_message("t", "report", enabled=False, by="ana")) == ("report", "state")
    assert (tasks["report"].enabled, tasks["report"].changed_by) == (False, "ana")
    fold(tasks, state_message("t", "report", enabled=True, by="bo"))
    assert tasks["report"].enabled
    ended = result_message("t", "report", slot=60.0, started=61.0, duration=0.5,
                           error=ValueError("bad ledger"), manual=False)  # fmt: skip
    fold(tasks, ended)
    assert tasks["report"].result == {"slot": 60.0, "started": 61.0, "duration": 0.5, "ok": False,
                                      "manual": False, "error": "ValueError: bad ledger"}  # fmt: skip
    assert ended["partition"] == 0, "the topic's one partition"


def test_a_run_request_stays_until_the_record_that_it_was_taken() -> None:
    tasks: dict[str, TaskRecords] = {}
    first, request = run_message("t", "report", by="ana")
    fold(tasks, request)
    assert (tasks["report"].requested, tasks["report"].requested_by) == (first, "ana")
    second, again = run_message("t", "report", by="bo")
    fold(tasks, again)
    fold(tasks, handled_message("t", "report", first))
    assert tasks["report"].requested == second, "taking the first leaves the newer one"
    fold(tasks, handled_message("t", "report", second))
    assert tasks["report"].requested is None


def test_keys_of_other_kinds_and_bad_records_are_told_apart() -> None:
    assert split_key("report\x1fstate") == ("report", "state")
    assert split_key("report\x1fother") == ("report\x1fother", None), "not a kind: a slot"
    tasks: dict[str, TaskRecords] = {}
    assert fold_record(tasks, b"report", b"not json") is None
    assert fold_record(tasks, b"report", None) is None
    assert fold_record(tasks, b"report", b'{"no": "at"}') is None
    assert fold_record(tasks, b"\xff", b"{}") is None


def test_a_task_name_with_the_separator_is_refused() -> None:
    app = App(kafka={"bootstrap.servers": "127.0.0.1:1"})
    with pytest.raises(ConfigurationError) as refused:
        app.recurring("* * * * *", print, name="a\x1fresult")
    assert refused.value.setting == "name"


@dataclass
class _Raw:
    raw_key: bytes
    raw_value: bytes
    at: int

    def key(self) -> bytes:
        return self.raw_key

    def value(self) -> bytes:
        return self.raw_value

    def offset(self) -> int:
        return self.at


@dataclass
class _Message:
    _raw: _Raw


def test_the_running_process_skips_a_disabled_task_and_takes_run_requests() -> None:
    app = App(kafka={"bootstrap.servers": "127.0.0.1:1"})
    app.recurring("* * * * * *", print, name="tick")
    app.recurring("* * * * * *", print, name="tock")
    tasks = app.recurring_tasks
    assert tasks is not None
    disabled = state_message(tasks.topic, "tick", enabled=False, by="ana")
    request, run = run_message(tasks.topic, "tock", by="ana")
    tasks._load([_Message(_Raw(m["key"].encode(), m["payload"], n))
                 for n, m in enumerate([disabled, run])])  # fmt: skip
    assert not tasks.enabled("tick")
    assert tasks.enabled("tock")
    now = 1_000_000.0
    for task in tasks.tasks.values():
        task.next_at = now - 0.5
    due, _ = tasks._due(now)
    assert [task.name for task, _ in due] == ["tock"], "tick's slot is skipped"
    assert [(task.name, found) for task, found in tasks._requested()] == [("tock", request)]


def test_the_schedules_wire_rules() -> None:
    _, message = schedule_message(1234.5, topic="orders", payload=b"x", partition=2)
    headers = {name: value if isinstance(value, bytes) else str(value).encode()
               for name, value in message["headers"]}  # fmt: skip
    assert scheduled_for(headers) == (1234.5, "orders", 2)
    assert scheduled_for({}) is None, "malformed"
    assert cancels({"conveyor-schedule-state": b"cancelled"}, 7), "a cancellation ends any"
    sent = {"conveyor-schedule-state": b"dispatched", "conveyor-schedule-offset": b"7"}
    assert cancels(sent, 7)
    assert not cancels(sent, 9), "a newer schedule under the same id stays"
    assert not cancels(sent, None)
