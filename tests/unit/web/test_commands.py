"""Commands: what a command needs is checked before anything is sent, the probe sees every
thread with its stack, and an app refuses partition commands it cannot carry out; quiet and
stop to every process (of a group) reach the processes the reports show running, each process
acts on them when it is in the group, and the gathered answers tell done, refused and timed
out apart."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

import pytest

from conveyor import App, Consumer, NotAssignedError
from conveyor.errors import ConfigurationError
from conveyor.web import WebTopics
from conveyor.web.commands import (
    Commander,
    CommandResult,
    FleetResult,
    check_command,
    fleet_members,
)
from conveyor.web.process.command_handler import CommandHandler
from conveyor.web.process.probe import thread_stacks


@pytest.mark.parametrize(
    ("command", "process", "args", "named"),
    [
        ("reboot", "p", {}, "command"),
        ("quiet", None, {}, "process"),
        ("probe", "*", {}, "process"),
        ("stop", None, {}, "process"),
        ("quiet", "*", {"group": ""}, "group"),
        ("stop", "*", {"group": 7}, "group"),
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
    assert check_command("quiet", "*", {}) == {}, "every process"
    assert check_command("stop", "*", {"group": "orders"}) == {"group": "orders"}
    assert check_command("stop", "host:1:ab", {"group": "orders"}) == {}, "one process: no group"
    assert check_command("pause", None, {"topic": "t", "partition": 1, "group": "g"}) == {
        "topic": "t",
        "partition": 1,
        "group": "g",
    }
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


def running(
    pid: str, *groups: str, state: str = "running", reported_at: float = 99.0
) -> dict[str, Any]:
    return {"id": pid, "state": state, "interval": 5.0, "reported_at": reported_at,
            "listeners": [{"name": f"l-{g}", "consumer_group": g} for g in groups]}  # fmt: skip


def test_every_process_means_those_the_reports_show_running_and_a_group_narrows_it() -> None:
    states = {
        "a": running("a", "orders"),
        "b": running("b", "orders", "billing"),
        "c": running("c", "billing", state="quiet"),
        "dead": running("dead", "orders", reported_at=50.0),  # silent for 3 intervals and more
        "gone": running("gone", "orders", state="stopped"),
    }
    assert fleet_members(states, 100.0) == ["a", "b", "c"]
    assert fleet_members(states, 100.0, "orders") == ["a", "b"]
    assert fleet_members(states, 100.0, "billing") == ["b", "c"]
    assert fleet_members(states, 100.0, "nobody") == []


def test_a_fleet_result_is_done_only_when_every_process_is() -> None:
    def one(process: str, status: str) -> CommandResult:
        return CommandResult("1", "quiet", status, process)

    assert FleetResult("1", "quiet", None, (one("a", "done"), one("b", "done"))).status == "done"
    late = FleetResult("1", "quiet", "g", (one("a", "done"), one("b", "timed out")))
    assert (late.done, late.status) == (False, "timed out")
    assert late.scope == "every process of consumer group g"
    refused = FleetResult("1", "quiet", None, (one("a", "refused"), one("b", "timed out")))
    assert refused.status == "refused"
    nobody = FleetResult("1", "stop", None, ())
    assert (nobody.done, nobody.status) == (False, "timed out"), "no answer is no success"
    assert nobody.to_dict() == {
        "id": "1", "command": "stop", "process": "*", "group": None, "scope": "every process",
        "status": "timed out", "results": [],
    }  # fmt: skip


def test_a_fleet_command_goes_through_send_all_and_only_quiet_and_stop_go_to_every_process() -> (
    None
):
    commander = Commander({"bootstrap.servers": "127.0.0.1:1"}, WebTopics(), cast(Any, None))
    with pytest.raises(ConfigurationError, match="send_all"):
        commander.send("quiet", process="*")
    with pytest.raises(ConfigurationError) as refused:
        commander.send_all("probe")
    assert refused.value.setting == "command"
    with pytest.raises(ConfigurationError) as refused:
        commander.send_all("stop", group="")
    assert refused.value.setting == "group"


def test_a_process_acts_on_its_own_commands_partition_commands_and_its_fleets() -> None:
    listeners = [SimpleNamespace(consumer_group="orders"), SimpleNamespace(consumer_group="audit")]
    host = SimpleNamespace(snapshot=lambda: SimpleNamespace(listeners=listeners))
    handler = CommandHandler(cast(Any, host), WebTopics(), "me")
    meant = handler._meant_for_me
    assert meant("me", "probe", {})
    assert not meant("other", "quiet", {})
    assert meant("*", "pause", {"topic": "t", "partition": 0}), "whoever has the partition"
    assert not meant("*", "probe", {}), "a probe names its process"
    assert meant("*", "quiet", {})
    assert meant("*", "stop", {})
    assert meant("*", "stop", {"group": "audit"})
    assert not meant("*", "quiet", {"group": "billing"}), "not in that group"
