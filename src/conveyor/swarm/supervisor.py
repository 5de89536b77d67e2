"""The swarm: one supervisor, N copies of ``conveyor server`` in one consumer group.

Python runs one thread of Python at a time; a swarm scales past that with processes, the
way Kafka scales a group: each node is a whole ``conveyor server`` (its own librdkafka
clients, made in its own process — nothing of librdkafka crosses a fork), and the group
spreads the partitions over them.

The supervisor starts the nodes, and each node writes a heartbeat on a pipe to it every
second while its app runs and its listeners poll. The supervisor replaces a node that exits,
one that stops beating for ``liveness`` seconds (killed), and one whose memory passes
``memory_limit`` (stopped gracefully, killed if it does not stop); too many replacements in a
minute stop the swarm with a non-zero exit. SIGTERM and SIGINT stop every node gracefully (a
second one kills them), SIGTSTP quiets them; the supervisor exits 0 once all stopped cleanly.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType

from conveyor.environment import NODE_ENV

__all__ = ["NODE_ENV", "Node", "Supervisor"]

HEARTBEAT_ENV = "CONVEYOR_SWARM_HEARTBEAT_FD"
SUPERVISOR_ENV = "CONVEYOR_SWARM_SUPERVISOR"
_LOOK = 0.5  # seconds between looks at the nodes (memory, silence) when nothing happens
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Node:
    """One node: its index in the swarm and its current process."""

    index: int
    process: subprocess.Popen[bytes]
    heartbeat: int  # the read end of its heartbeat pipe
    started: float = field(default_factory=time.monotonic)
    last_beat: float | None = None
    stopping_since: float | None = None  # asked to stop (over its memory), then killed

    @property
    def pid(self) -> int:
        return self.process.pid


def rss(pid: int) -> int | None:
    """The resident memory of process ``pid`` in bytes (``None`` when it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


class Supervisor:
    """Runs ``nodes`` copies of ``command`` (a ``conveyor server`` command line) and keeps them
    running; :meth:`run` returns the exit code."""

    def __init__(
        self,
        command: Sequence[str],
        nodes: int,
        *,
        liveness: float = 30.0,
        startup: float = 120.0,
        memory_limit: int | None = None,
        max_restarts: int = 5,
        shutdown_timeout: float = 60.0,
        say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    ) -> None:
        if nodes < 1:
            raise ValueError("a swarm needs at least one node")
        self.command = list(command)
        self.count = nodes
        self.liveness = liveness
        self.startup = startup
        self.memory_limit = memory_limit
        self.max_restarts = max_restarts
        self.shutdown_timeout = shutdown_timeout
        self.say = say
        self.nodes: dict[int, Node] = {}
        self._selector = selectors.DefaultSelector()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)
        self._selector.register(self._wake_read, selectors.EVENT_READ, None)
        self._signals: deque[int] = deque()
        self._restarts: deque[float] = deque()
        self._stopping = False
        self._forced = False
        self._failed = False

    # -- nodes --------------------------------------------------------------------------------

    def _start(self, index: int) -> Node:
        read, write = os.pipe()
        env = dict(
            os.environ,
            **{HEARTBEAT_ENV: str(write), NODE_ENV: str(index), SUPERVISOR_ENV: str(os.getpid())},
        )
        process = subprocess.Popen(self.command, env=env, pass_fds=(write,))
        os.close(write)
        os.set_blocking(read, False)
        node = Node(index, process, read)
        self._selector.register(read, selectors.EVENT_READ, node)
        self.nodes[index] = node
        self.say(f"node {index} started (pid {process.pid})")
        return node

    def _forget(self, node: Node) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(node.heartbeat)
        os.close(node.heartbeat)
        if self.nodes.get(node.index) is node:
            del self.nodes[node.index]

    def _replace(self, node: Node, why: str) -> None:
        """``node`` is gone (or made to go): start another in its place, within the budget."""
        if node.process.poll() is None:
            node.process.kill()
            node.process.wait()
        self._forget(node)
        if self._stopping:
            return
        now = time.monotonic()
        self._restarts.append(now)
        while self._restarts and self._restarts[0] < now - 60:
            self._restarts.popleft()
        if len(self._restarts) > self.max_restarts:
            self.say(
                f"node {node.index} {why}; more than {self.max_restarts} replacements in a "
                "minute: stopping the swarm"
            )
            self._failed = True
            self._stop_all(signal.SIGTERM)
            return
        self.say(f"node {node.index} {why}: replacing it")
        self._start(node.index)

    def _check(self, node: Node, now: float) -> None:
        code = node.process.poll()
        if code is not None:
            if not self._stopping:
                self._replace(node, f"exited with {code}")
            return
        if self._stopping:
            return
        if node.stopping_since is not None:  # asked to stop for its memory: killed if slow
            if now - node.stopping_since > self.shutdown_timeout:
                self._replace(node, "did not stop in time after passing the memory limit")
            return
        silent_since = node.last_beat if node.last_beat is not None else node.started
        limit = self.liveness if node.last_beat is not None else self.startup
        if now - silent_since > limit:
            self._replace(node, f"sent no heartbeat for {now - silent_since:.0f} s")
            return
        if self.memory_limit is not None:
            used = rss(node.pid)
            if used is not None and used > self.memory_limit:
                self.say(
                    f"node {node.index} (pid {node.pid}) uses {used >> 20} MiB, over the limit "
                    f"of {self.memory_limit >> 20} MiB: stopping it"
                )
                node.stopping_since = now
                node.process.send_signal(signal.SIGTERM)

    # -- signals ------------------------------------------------------------------------------

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if signum != signal.SIGCHLD:  # a child exited: only wake the loop, which looks
            self._signals.append(signum)
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_write, b"s")

    def _handle_signals(self) -> None:
        while self._signals:
            signum = self._signals.popleft()
            if signum == signal.SIGTSTP:
                self.say("SIGTSTP: quieting every node")
                for node in list(self.nodes.values()):
                    with contextlib.suppress(ProcessLookupError):
                        node.process.send_signal(signal.SIGTSTP)
            elif self._stopping:
                self.say("second signal: killing every node")
                self._forced = True
                self._stop_all(signal.SIGKILL)
            else:
                self.say(f"{signal.Signals(signum).name}: stopping every node gracefully")
                self._stop_all(signal.SIGTERM)

    def _stop_all(self, how: signal.Signals) -> None:
        self._stopping = True
        for node in list(self.nodes.values()):
            with contextlib.suppress(ProcessLookupError):
                node.process.send_signal(how)

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> int:
        """Start the nodes and supervise them until the swarm stops; the exit code: 0 after a
        clean stop, 1 when nodes kept dying or one did not stop cleanly, 2 when forced."""
        previous = {
            signum: signal.signal(signum, self._on_signal)
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGTSTP, signal.SIGCHLD)
        }
        clean = True
        try:
            for index in range(1, self.count + 1):
                self._start(index)
            stop_deadline: float | None = None
            while self.nodes:
                for key, _events in self._selector.select(_LOOK):
                    if key.data is None:
                        with contextlib.suppress(BlockingIOError):
                            os.read(self._wake_read, 4096)
                        continue
                    node: Node = key.data
                    try:
                        beats = os.read(node.heartbeat, 4096)
                    except BlockingIOError:
                        continue
                    if beats:
                        node.last_beat = time.monotonic()
                    else:  # its end closed: it exited (the check below sees it); stop looking
                        with contextlib.suppress(KeyError, ValueError):
                            self._selector.unregister(node.heartbeat)
                self._handle_signals()
                now = time.monotonic()
                for node in list(self.nodes.values()):
                    self._check(node, now)
                if self._stopping:
                    if stop_deadline is None:
                        stop_deadline = now + self.shutdown_timeout
                    for node in list(self.nodes.values()):
                        code = node.process.poll()
                        if code is not None:
                            if code != 0:
                                clean = False
                            self.say(f"node {node.index} stopped ({code})")
                            self._forget(node)
                    if self.nodes and now > stop_deadline:
                        self.say("nodes did not stop in time: killing them")
                        self._forced = True
                        self._stop_all(signal.SIGKILL)
                        stop_deadline = now + 10
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            for node in list(self.nodes.values()):
                if node.process.poll() is None:
                    node.process.kill()
        if self._forced:
            return 2
        return 0 if clean and not self._failed else 1
