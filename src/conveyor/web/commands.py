"""Commands to running processes over ``conveyor_consumers_commands``: ``quiet``, ``stop``,
``probe`` (every thread's stack), and per partition ``pause``, ``resume`` and ``seek``.

Both ways go over the one topic, as JSON: a request (``"type": "command"``) names the process
it is for (its web UI id, or ``"*"`` for a partition command: whichever process has the
partition acts) and the issuer's ``id`` for it; the process answers with a result
(``"type": "result"``, same ``id``): ``done`` (with what it did), or ``refused`` with the
reason. An issuer that hears nothing in time reports ``timed out``.

In a process, :class:`CommandHandler` (started by ``app.web.enable()``) reads the topic from
its end while the app runs; :class:`Commander` (``conveyor ctl``, the web UI) sends and waits.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor.driver.consumers import ConsumerClient
from conveyor.errors import ConfigurationError, ConveyorError
from conveyor.serialization import json_dumps, json_loads
from conveyor.web.reading.data import reader_settings
from conveyor.web.topics import LABEL, WebTopics

if TYPE_CHECKING:
    from conveyor.producer import Producer

__all__ = [
    "ANY_PROCESS",
    "COMMANDS",
    "PARTITION_COMMANDS",
    "CommandResult",
    "Commander",
    "check_command",
    "parse_command_time",
    "read_commands",
    "tail_commands",
]

_log = logging.getLogger("conveyor.web.commands")

PROCESS_COMMANDS = ("quiet", "stop", "probe")
PARTITION_COMMANDS = ("pause", "resume", "seek")
COMMANDS = PROCESS_COMMANDS + PARTITION_COMMANDS
ANY_PROCESS = "*"


@dataclass(frozen=True)
class CommandResult:
    """How a command ended: ``status`` is ``done``, ``refused`` or ``timed out``; ``result``
    holds what the process reported (the threads of a probe, the offset of a seek)."""

    id: str
    command: str
    status: str
    process: str | None = None
    reason: str = ""
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.status == "done"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "command": self.command,
            "status": self.status,
            "process": self.process,
            "reason": self.reason,
            "result": self.result,
        }


def check_command(command: str, process: str | None, args: Mapping[str, Any]) -> dict[str, Any]:
    """The command's arguments as sent, or a ConfigurationError naming what is wrong."""
    if command not in COMMANDS:
        raise ConfigurationError(
            f"unknown command {command!r}; commands: {', '.join(COMMANDS)}", "command"
        )
    if command in PROCESS_COMMANDS:
        if not process or process == ANY_PROCESS:
            raise ConfigurationError(f"{command} needs the id of one process", "process")
        return {}
    topic, partition = args.get("topic"), args.get("partition")
    if not isinstance(topic, str) or not topic:
        raise ConfigurationError(f"{command} needs a topic", "topic")
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise ConfigurationError(
            f"{command} needs a partition >= 0, not {partition!r}", "partition"
        )
    checked: dict[str, Any] = {"topic": topic, "partition": partition}
    group = args.get("group")
    if group is not None:
        if not isinstance(group, str) or not group:
            raise ConfigurationError(
                f"group must be a consumer group's name, not {group!r}", "group"
            )
        checked["group"] = group
    if command == "pause" and args.get("until") is not None:
        checked["until"] = parse_command_time(args["until"], "until").isoformat()
    if command == "seek":
        offset, when = args.get("offset"), args.get("time")
        if (offset is None) == (when is None):
            raise ConfigurationError("seek needs an offset or a time (one of them)", "offset")
        if offset is not None:
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
                raise ConfigurationError(f"offset must be >= 0, not {offset!r}", "offset")
            checked["offset"] = offset
        else:
            checked["time"] = parse_command_time(when, "time").isoformat()
    return checked


def parse_command_time(value: Any, name: str) -> datetime:
    """An aware datetime from a datetime or an ISO 8601 text with a time zone."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ConfigurationError(
                f"{name} {value!r} is not an ISO 8601 time (like 2026-11-24T10:00:00+00:00)", name
            ) from None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ConfigurationError(f"{name} needs a time zone (like +00:00): {value!r}", name)
    return value


def tail_commands(kafka: Mapping[str, Any], topic: str, name: str) -> ConsumerClient:
    """A reader of every partition of ``topic`` from its current end (what comes next)."""
    client = ConsumerClient(reader_settings(kafka, name))
    try:
        partitions = client.partitions(topic)
        if not partitions:
            raise ConveyorError(
                f"the commands topic {topic} does not exist: run `conveyor web install --app ...`"
            )
        client.assign(
            [
                (topic, partition, client.query_watermarks(topic, partition)[1])
                for partition in partitions
            ]
        )
    except BaseException:
        client.close()
        raise
    return client


def read_commands(client: ConsumerClient, timeout: float) -> list[dict[str, Any]]:
    """The JSON objects among what the next poll brings (anything else is skipped)."""
    found = []
    for raw in client.poll_batch(timeout, 100):
        if raw.error() is not None:
            client.fetch_error(raw)
            continue
        try:
            message = json_loads(raw.value())
        except (ValueError, TypeError):
            continue
        if isinstance(message, dict):
            found.append(message)
    return found


class Commander:
    """Sends commands and waits for their results (``conveyor ctl``, the web UI's actions).

    Example::

        commander = Commander(app.settings.kafka, app.web.topics, app.producer)
        result = commander.send("probe", process="host:4242:ab12")
        for thread in result.result["threads"]: ...
    """

    def __init__(self, kafka: Mapping[str, Any], topics: WebTopics, producer: Producer) -> None:
        self.kafka = dict(kafka)
        self.topics = topics
        self.producer = producer

    def send(
        self,
        command: str,
        *,
        process: str | None = None,
        by: str = "conveyor ctl",
        timeout: float = 10.0,
        **args: Any,
    ) -> CommandResult:
        """Send ``command`` (with ``topic``/``partition`` and ``until``, ``offset`` or ``time``
        for the partition commands) to ``process`` (a partition command without one goes to
        whichever process has the partition) and wait up to ``timeout`` seconds for the
        result. Bad arguments raise ConfigurationError before anything is sent."""
        checked = check_command(command, process, args)
        target = process or ANY_PROCESS
        command_id = uuid.uuid4().hex
        request = {
            "type": "command",
            "id": command_id,
            "command": command,
            "process": target,
            "args": checked,
            "by": by,
            "sent_at": time.time(),
        }
        client = tail_commands(self.kafka, self.topics.commands, "conveyor-commander")
        try:
            self.producer.produce_sync(
                topic=self.topics.commands, key=target, payload=json_dumps(request), label=LABEL
            )
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0:
                for message in read_commands(client, min(left, 0.5)):
                    if message.get("type") == "result" and message.get("id") == command_id:
                        return CommandResult(
                            id=command_id,
                            command=command,
                            status=str(message.get("status")),
                            process=message.get("process"),
                            reason=str(message.get("reason") or ""),
                            result=dict(message.get("result") or {}),
                        )
        finally:
            client.close()
        who = f"process {target}" if target != ANY_PROCESS else "any process"
        return CommandResult(
            id=command_id,
            command=command,
            status="timed out",
            process=process,
            reason=(
                f"no answer from {who} within {timeout:g} s (is it running, with the web UI "
                "enabled, and does it have the partition?)"
                if target == ANY_PROCESS
                else f"no answer from {who} within {timeout:g} s (is it running, with the web "
                "UI enabled?)"
            ),
        )
