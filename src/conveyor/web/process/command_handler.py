"""The process side of the commands (``conveyor ctl``, the web UI's actions): a thread that
reads the commands topic from its end while the app runs, carries out what is meant for this
process (quiet, stop, probe, pause, resume, seek) and answers on the same topic."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor.errors import ConveyorError, NotAssignedError
from conveyor.instrumentation import events as ev
from conveyor.web.commands import (
    ANY_PROCESS,
    FLEET_COMMANDS,
    PARTITION_COMMANDS,
    QUERY_COMMANDS,
    Received,
    check_command,
    encode_signed,
    parse_command_time,
    read_commands,
    tail_commands,
)
from conveyor.web.process.probe import thread_stacks
from conveyor.web.signing import CLOCK_SKEW, KEY_ENV
from conveyor.web.topics import LABEL

if TYPE_CHECKING:
    from conveyor.host import Host
    from conveyor.web.signing import CommandSigner
    from conveyor.web.topics import WebTopics

__all__ = ["CommandHandler"]

_log = logging.getLogger("conveyor.web.commands")
_RECHECK = 60.0  # seconds between looks for a missing commands topic


class CommandHandler:
    """Carries out the commands for this process while the app runs (on a thread of its own,
    reading the commands topic from its end) and answers each."""

    def __init__(
        self, app: Host, topics: WebTopics, process_id: str, signer: CommandSigner | None = None
    ) -> None:
        self.app = app
        self.topics = topics
        self.id = process_id
        self.signer = signer
        """With a key: only requests signed with it are carried out, and answers go signed."""
        self._listening_since = 0.0  # wall clock: compared with the requests' sent_at
        self.refused = 0
        """Requests for this process refused for their signature (unsigned, wrong, expired or
        replayed)."""
        self._stopped = threading.Event()
        self._listening = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._warned = False

    def attach(self) -> None:
        self._unsubscribe = self.app.monitor.subscribe(ev.APP_RUNNING, lambda _e: self.start())

    def start(self) -> None:
        if self._thread is not None:
            return
        if self.signer is None:  # told as the process starts taking commands, not by CLIs
            _log.warning(
                "commands to this process are not signed: anyone who can write %s can quiet, "
                "stop, seek or probe it (set %s, and the topic's ACLs: `conveyor acls`)",
                self.topics.commands,
                KEY_ENV,
            )
        self._thread = threading.Thread(target=self._run, name="conveyor-web-commands", daemon=True)
        self._thread.start()

    def wait_listening(self, timeout: float) -> bool:
        """Whether the handler reads the topic (commands sent from now on reach it)."""
        return self._listening.wait(timeout)

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(10)
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                client = tail_commands(
                    self.app.settings.kafka, self.topics.commands, "conveyor-commands"
                )
            except Exception as error:  # a missing topic, the broker away: look again later
                if not self._warned:
                    self._warned = True
                    _log.warning("commands to this process cannot reach it: %s", error)
                self._stopped.wait(_RECHECK)
                continue
            if not self._listening.is_set():
                self._listening_since = time.time()  # what it reads was sent after this
            self._listening.set()
            try:
                while not self._stopped.is_set():
                    for received in read_commands(client, 0.5):
                        if received.message.get("type") == "command":
                            self._handle(received)
            except Exception as error:  # the reader failed: a new one, from the end
                _log.warning("reading commands failed (%s); reading again", error)
                self._stopped.wait(1.0)
            finally:
                client.close()

    def _meant_for_me(self, target: Any, command: Any, args: Mapping[str, Any]) -> bool:
        """Whether this process acts on a request: its own, a partition command for any
        process (the one with the partition answers), or quiet/stop for every process (of
        ``args["group"]``, when given: this process has a listener in it)."""
        if target == self.id:
            return True
        if target != ANY_PROCESS:
            return False
        if command in PARTITION_COMMANDS or command in QUERY_COMMANDS:
            return True
        if command not in FLEET_COMMANDS:
            return False
        group = args.get("group")
        return group is None or any(
            listener.consumer_group == group for listener in self.app.snapshot().listeners
        )

    def _handle(self, received: Received) -> None:
        request = received.message
        target, command = request.get("process"), request.get("command")
        args = request.get("args") or {}
        if not isinstance(args, Mapping) or not self._meant_for_me(target, command, args):
            return
        refusal = (
            ""
            if self.signer is None
            else self.signer.refusal(
                request, received.payload, received.headers, self._listening_since - CLOCK_SKEW
            )
        )
        result: dict[str, Any] = {}
        if refusal:  # reported as an error event (logged, counted), not carried out
            self._refuse(str(command), refusal, request)
            status, reason = "refused", refusal
        else:
            outcome = self._outcome(str(command), target, args)
            if outcome is None:
                return  # another process has the partition: it answers
            status, reason, result = outcome
            _log.info(
                "command %s %s from %s: %s%s",
                command,
                _describe(target, args),
                request.get("by", "?"),
                status,
                f" ({reason})" if reason else "",
            )
        answer = {
            "type": "result",
            "id": request.get("id"),
            "command": command,
            "process": self.id,
            "status": status,
            "reason": reason,
            "result": result,
            "at": time.time(),
        }
        try:
            payload, headers = encode_signed(answer, self.signer)
            self.app.producer.produce_async(
                topic=self.topics.commands,
                key=self.id,
                payload=payload,
                headers=headers,
                label=LABEL,
            )
        except Exception as error:
            _log.warning("could not answer command %s: %s", command, error)
        if command == "stop" and status == "done":
            self.app.stop()  # after the answer is queued: the producer flushes it on close

    def _outcome(
        self, command: str, target: Any, args: Mapping[str, Any]
    ) -> tuple[str, str, dict[str, Any]] | None:
        """Carry ``command`` out: (status, reason, result), or ``None`` when this process
        does not have the partition a command for any process names."""
        try:
            return "done", "", self._carry_out(command, target, args)
        except NotAssignedError as error:
            if target == ANY_PROCESS and (
                command in PARTITION_COMMANDS or command in QUERY_COMMANDS
            ):
                return None
            return "refused", str(error), {}
        except ConveyorError as error:  # a bad argument, a listener that did not get to it
            return "refused", str(error), {}
        except Exception as error:  # a command never takes the process down
            return "refused", f"{type(error).__name__}: {error}", {}

    def _refuse(self, command: str, reason: str, request: Mapping[str, Any]) -> None:
        """Count a request refused for its signature, and report it (an error event: the
        logs, the web UI's errors and the ``conveyor_errors`` metric see it)."""
        self.refused += 1
        monitor = self.app.monitor
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(
                ev.ERROR_OCCURRED,
                type="command.refused",
                error=ConveyorError(reason),
                command=command,
                by=str(request.get("by", "?")),
            )

    def _carry_out(self, command: str, target: Any, args: Mapping[str, Any]) -> dict[str, Any]:
        checked = check_command(command, target, args)
        app = self.app
        if command == "quiet":
            app.quiet()
            return {"state": app.state}
        if command == "stop":
            return {"state": "stopping"}
        if command == "probe":
            return {"threads": thread_stacks()}
        topic, partition, group = checked["topic"], checked["partition"], checked.get("group")
        if command == "lookup":
            return app.stores.answer(topic, partition, checked["store"], checked["key"], group)
        if command == "rebuild":
            return app.stores.rebuild(topic, partition, store=checked.get("store"), group=group)
        if command == "pause":
            until = checked.get("until")
            app.pause(
                topic,
                partition,
                until=None if until is None else parse_command_time(until, "until"),
                group=group,
            )
            return {"topic": topic, "partition": partition, "until": until}
        if command == "resume":
            app.resume(topic, partition, group=group)
            return {"topic": topic, "partition": partition}
        to: int | datetime = (
            checked["offset"]
            if "offset" in checked
            else parse_command_time(checked["time"], "time")
        )
        offset = app.seek(topic, partition, to, group=group)
        return {"topic": topic, "partition": partition, "offset": offset}


def _describe(target: Any, args: Mapping[str, Any]) -> str:
    if "topic" not in args:
        if target != ANY_PROCESS:
            return ""
        return (
            f"to every process of group {args['group']}" if "group" in args else "to every process"
        )
    extra = "".join(
        f" {name} {args[name]}" for name in ("group", "until", "offset", "time") if name in args
    )
    return f"{args['topic']}/{args['partition']}{extra}"
