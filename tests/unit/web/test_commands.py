"""Commands: what a command needs is checked before anything is sent, the probe sees every
thread with its stack, and an app refuses partition commands it cannot carry out."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from conveyor import App, Consumer, NotAssignedError
from conveyor.errors import ConfigurationError
from conveyor.web.commands import check_command
from conveyor.web.process.probe import thread_stacks


@pytest.mark.parametrize(
    ("command", "process", "args", "named"),
    [
        ("reboot", "p", {}, "command"),
        ("quiet", None, {}, "process"),
        ("probe", "*", {}, "process"),
        ("pause", None, {"partition": 0}, "topic"),
        ("pause", None, {"topic": "t", "partition": -1}, "partition"),
        ("pause", None, {"topic": "t", "partition": True}, "partition"),
        ("pause", None, {"topic": "t", "partition": 0, "until": "tomorrow"}, "until"),
        ("pause", None, {"topic": "t", "partition": 0, "until": "2026-11-24T10:00"}, "until"),
        ("seek", None, {"topic": "t", "partition": 0}, "offset"),
        ("seek", None, {"topic": "t", "partition": 0, "offset": 1, "time": "x"}, "offset"),
        ("seek", None, {"topic": "t", "partition": 0, "offset": -3}, "offset"),
        ("seek", None, {"topic": "t", "partition": 0, "time": "noon"}, "time"),
    ],
)
def test_a_bad_command_is_refused_before_it_is_sent(
    command: str, process: str | None, args: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        check_command(command, process, args)
    assert refused.value.setting == named


def test_good_commands_are_sent_as_json_ready_arguments() -> None:
    assert check_command("probe", "host:1:ab", {}) == {}
    when = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
    assert check_command("pause", None, {"topic": "t", "partition": 1, "until": when}) == {
        "topic": "t",
        "partition": 1,
        "until": "2026-11-24T10:00:00+00:00",
    }
    assert check_command("seek", "p", {"topic": "t", "partition": 0, "offset": 0}) == {
        "topic": "t",
        "partition": 0,
        "offset": 0,
    }
    assert check_command(
        "seek", None, {"topic": "t", "partition": 0, "time": "2026-11-24T10:00:00+01:00"}
    )["time"] == ("2026-11-24T10:00:00+01:00")


def test_the_probe_sees_every_thread_and_where_it_waits() -> None:
    parked = threading.Event()

    def park_here() -> None:
        parked.wait(10)

    thread = threading.Thread(target=park_here, name="parked-for-the-probe")
    thread.start()
    try:
        stacks = {entry["name"]: entry for entry in thread_stacks()}
    finally:
        parked.set()
        thread.join(10)
    assert "park_here" in stacks["parked-for-the-probe"]["stack"]
    assert "test_the_probe_sees_every_thread" in stacks[threading.current_thread().name]["stack"]


def test_partition_commands_need_a_running_app_and_good_arguments() -> None:
    app = App(client_id="steer", kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    app.routes.topic("orders", Consumer)
    with pytest.raises(NotAssignedError, match="not running"):
        app.pause("orders", 0)
    with pytest.raises(ConfigurationError) as refused:
        app.pause("orders", 0, until=datetime(2026, 11, 24, 10, 0))  # naive
    assert refused.value.setting == "until"
    with pytest.raises(ConfigurationError) as refused:
        app.seek("orders", 0, -1)
    assert refused.value.setting == "to"
