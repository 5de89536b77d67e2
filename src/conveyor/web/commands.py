"""Commands to running processes over ``conveyor_consumers_commands``: ``quiet``, ``stop``,
``probe`` (every thread's stack), and per partition ``pause``, ``resume``, ``seek`` and
``rebuild`` (its state stores, from their changelogs).

Both ways go over the one topic, as JSON: a request (``"type": "command"``) names the process
it is for (its web UI id, or ``"*"``) and the issuer's ``id`` for it; the process answers
with a result (``"type": "result"``, same ``id``, its own process id): ``done`` (with what it
did), or ``refused`` with the reason. An issuer that hears nothing in time reports
``timed out``.

``"*"`` means, for a partition command, whichever process has the partition (it alone
answers); for ``quiet`` and ``stop``, every process (with ``"group"`` in the arguments: every
process with a listener in that consumer group), each answering for itself: one request, its
answers gathered per process (:meth:`Commander.send_all`), and the processes the reports know
that did not answer listed as timed out.

In a process, :class:`CommandHandler` (started by ``app.web.enable()``) reads the topic from
its end while the app runs; :class:`Commander` (``conveyor ctl``, the web UI) sends and waits.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor.driver.consumers import ConsumerClient
from conveyor.errors import ConfigurationError, ConveyorError
from conveyor.iterator.scan import reader_settings
from conveyor.serialization import json_dumps, json_loads
from conveyor.web.aggregation.fold import process_status
from conveyor.web.signing import HEADER, CommandSigner
from conveyor.web.topics import LABEL, WebTopics

if TYPE_CHECKING:
    from conveyor.producer import Producer

__all__ = [
    "ANY_PROCESS",
    "COMMANDS",
    "FLEET_COMMANDS",
    "PARTITION_COMMANDS",
    "QUERY_COMMANDS",
    "CommandResult",
    "Commander",
    "FleetResult",
    "Received",
    "check_command",
    "consumer_groups",
    "encode_signed",
    "fleet_members",
    "fleet_scope",
    "parse_command_time",
    "read_commands",
    "tail_commands",
]

_log = logging.getLogger("conveyor.web.commands")

PROCESS_COMMANDS = ("quiet", "stop", "probe")
PARTITION_COMMANDS = ("pause", "resume", "seek", "rebuild")
COMMANDS = PROCESS_COMMANDS + PARTITION_COMMANDS
QUERY_COMMANDS = ("lookup",)
"""Reads the process with a partition answers: ``lookup``, a key of one of its stores
(``app.stores.get``). Not actions of the web UI."""
FLEET_COMMANDS = ("quiet", "stop")
"""The process commands that may go to every process at once (``process: "*"``)."""
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


@dataclass(frozen=True)
class FleetResult:
    """How a command to every process (of a consumer group, when ``group`` is given) ended:
    one :class:`CommandResult` per process, by process id — each that answered, and each
    that the reports knew as running but did not answer in time (``timed out``)."""

    id: str
    command: str
    group: str | None
    results: tuple[CommandResult, ...]

    @property
    def scope(self) -> str:
        """Who the command was for, in words (``every process of consumer group orders``)."""
        return fleet_scope(self.group)

    @property
    def done(self) -> bool:
        """Whether some process answered and every one is ``done``."""
        return bool(self.results) and all(result.done for result in self.results)

    @property
    def status(self) -> str:
        """``done``; ``refused`` when a process refused; else ``timed out`` (a process did
        not answer, or none did)."""
        if self.done:
            return "done"
        if any(result.status == "refused" for result in self.results):
            return "refused"
        return "timed out"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "command": self.command,
            "process": ANY_PROCESS,
            "group": self.group,
            "scope": self.scope,
            "status": self.status,
            "results": [result.to_dict() for result in self.results],
        }


def consumer_groups(state: Mapping[str, Any]) -> set[str]:
    """The consumer groups a process's reported state has listeners in."""
    return {
        str(listener["consumer_group"])
        for listener in state.get("listeners", ())
        if listener.get("consumer_group")
    }


def fleet_scope(group: str | None) -> str:
    """``every process``, or ``every process of consumer group G``."""
    return "every process" if group is None else f"every process of consumer group {group}"


def fleet_members(
    states: Mapping[str, Mapping[str, Any]], now: float, group: str | None = None
) -> list[str]:
    """The ids of the processes the reports show alive (not dead, not stopped), with a
    listener in ``group`` when it is given: those a command to every process waits for."""
    return sorted(
        process_id
        for process_id, state in states.items()
        if process_status(state, now) not in ("dead", "stopped")
        and (group is None or group in consumer_groups(state))
    )


def _checked_group(args: Mapping[str, Any]) -> dict[str, Any]:
    group = args.get("group")
    if group is None:
        return {}
    if not isinstance(group, str) or not group:
        raise ConfigurationError(f"group must be a consumer group's name, not {group!r}", "group")
    return {"group": group}


def check_command(command: str, process: str | None, args: Mapping[str, Any]) -> dict[str, Any]:
    """The command's arguments as sent, or a ConfigurationError naming what is wrong."""
    if command not in COMMANDS and command not in QUERY_COMMANDS:
        raise ConfigurationError(
            f"unknown command {command!r}; commands: {', '.join(COMMANDS)}", "command"
        )
    if command in PROCESS_COMMANDS:
        if process == ANY_PROCESS and command in FLEET_COMMANDS:
            return _checked_group(args)
        if not process or process == ANY_PROCESS:
            every = f" (or {ANY_PROCESS!r}: every process)" if command in FLEET_COMMANDS else ""
            raise ConfigurationError(f"{command} needs the id of one process{every}", "process")
        return {}
    topic, partition = args.get("topic"), args.get("partition")
    if not isinstance(topic, str) or not topic:
        raise ConfigurationError(f"{command} needs a topic", "topic")
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise ConfigurationError(
            f"{command} needs a partition >= 0, not {partition!r}", "partition"
        )
    checked: dict[str, Any] = {"topic": topic, "partition": partition, **_checked_group(args)}
    if command == "lookup":
        store = args.get("store")
        if not isinstance(store, str) or not store or "key" not in args:
            raise ConfigurationError("lookup needs a store name and a key", "store")
        checked.update(store=store, key=args["key"])
    if command == "rebuild" and args.get("store") is not None:
        store = args["store"]
        if not isinstance(store, str) or not store:
            raise ConfigurationError(
                f"rebuild: store must be a store's name, not {store!r}", "store"
            )
        checked["store"] = store
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


@dataclass(frozen=True)
class Received:
    """One request or answer read from the commands topic: the JSON object, and the bytes and
    headers its signature is checked against."""

    message: dict[str, Any]
    payload: bytes
    headers: dict[str, bytes]


def read_commands(client: ConsumerClient, timeout: float) -> list[Received]:
    """The JSON objects among what the next poll brings (anything else is skipped)."""
    found = []
    for raw in client.poll_batch(timeout, 100):
        if raw.error() is not None:
            client.fetch_error(raw)
            continue
        payload = raw.value()
        try:
            message = json_loads(payload)
        except (ValueError, TypeError):
            continue
        if isinstance(message, dict):
            headers = {name: value for name, value in raw.headers() or () if value is not None}
            found.append(Received(message, bytes(payload), headers))
    return found


def encode_signed(
    message: Mapping[str, Any], signer: CommandSigner | None
) -> tuple[bytes, list[tuple[str, bytes]]]:
    """``message`` as sent: its JSON bytes, and the signature header when there is a key."""
    payload = json_dumps(dict(message))
    payload = payload if isinstance(payload, bytes) else payload.encode()
    return payload, [(HEADER, signer.signature(payload))] if signer is not None else []


class Commander:
    """Sends commands and waits for their results (``conveyor ctl``, the web UI's actions).

    Example::

        commander = app.web.commander()   # signed with the commands key, when there is one
        result = commander.send("probe", process="host:4242:ab12")
        for thread in result.result["threads"]: ...
    """

    def __init__(
        self,
        kafka: Mapping[str, Any],
        topics: WebTopics,
        producer: Producer,
        signer: CommandSigner | None = None,
    ) -> None:
        self.kafka = dict(kafka)
        self.topics = topics
        self.producer = producer
        self.signer = signer
        """With a key: requests go signed, and only answers signed with it are heard."""

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
        result. Bad arguments raise ConfigurationError before anything is sent (quiet or stop
        to every process is :meth:`send_all`)."""
        checked = check_command(command, process, args)
        if process == ANY_PROCESS and command in FLEET_COMMANDS:
            raise ConfigurationError(
                f"{command} to every process: Commander.send_all({command!r})", "process"
            )
        target = process or ANY_PROCESS
        command_id, answers = self._exchange(command, target, checked, by, timeout, bool)
        if answers:
            return answers[0]
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

    def send_all(
        self,
        command: str,
        *,
        group: str | None = None,
        expected: Iterable[str] = (),
        by: str = "conveyor ctl",
        timeout: float = 10.0,
    ) -> FleetResult:
        """Send ``command`` (``quiet`` or ``stop``) to every process — with ``group``, to every
        process with a listener in that consumer group — as one request each of them acts on,
        and gather the answers for up to ``timeout`` seconds: until each of ``expected`` (the
        ids of the processes the reports show alive, see :func:`fleet_members`) answered, or
        for the whole ``timeout`` when none is expected. A process that answers is listed
        whether expected or not; an expected one that does not, as ``timed out``.

        Example::

            states = app.web.data.states()
            result = commander.send_all(
                "quiet", group="orders", expected=fleet_members(states, time.time(), "orders")
            )
            for answer in result.results: print(answer.process, answer.status)
        """
        if command not in FLEET_COMMANDS:
            raise ConfigurationError(
                f"{command!r} goes to one process; to every process: {', '.join(FLEET_COMMANDS)}",
                "command",
            )
        checked = check_command(command, ANY_PROCESS, {} if group is None else {"group": group})
        waiting = set(expected)

        def answered(answers: list[CommandResult]) -> bool:
            return bool(waiting) and waiting <= {answer.process for answer in answers}

        command_id, answers = self._exchange(command, ANY_PROCESS, checked, by, timeout, answered)
        heard = {answer.process for answer in answers}
        silent = [
            CommandResult(
                id=command_id,
                command=command,
                status="timed out",
                process=process_id,
                reason=f"no answer within {timeout:g} s from this process, which the reports "
                "show running (is it still, with the web UI's commands on?)",
            )
            for process_id in waiting - heard
        ]
        results = sorted([*answers, *silent], key=lambda result: str(result.process))
        return FleetResult(command_id, command, group, tuple(results))

    def _exchange(
        self,
        command: str,
        target: str,
        checked: dict[str, Any],
        by: str,
        timeout: float,
        enough: Callable[[list[CommandResult]], bool],
    ) -> tuple[str, list[CommandResult]]:
        """Send one request and gather its answers (one per process) until ``enough(answers)``
        or ``timeout`` seconds passed."""
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
        answers: list[CommandResult] = []
        client = tail_commands(self.kafka, self.topics.commands, "conveyor-commander")
        try:
            payload, headers = encode_signed(request, self.signer)
            self.producer.produce_sync(
                topic=self.topics.commands,
                key=target,
                payload=payload,
                headers=headers,
                label=LABEL,
            )
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0:
                for received in read_commands(client, min(left, 0.5)):
                    message = received.message
                    if self.signer is not None and not self.signer.signed(
                        received.payload, received.headers
                    ):
                        continue  # not from a process with the key: not an answer
                    if message.get("type") == "result" and message.get("id") == command_id:
                        answers.append(
                            CommandResult(
                                id=command_id,
                                command=command,
                                status=str(message.get("status")),
                                process=message.get("process"),
                                reason=str(message.get("reason") or ""),
                                result=dict(message.get("result") or {}),
                            )
                        )
                if enough(answers):
                    break
        finally:
            client.close()
        return command_id, answers
