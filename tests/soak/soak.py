"""A soak under chaos: the whole product on a local 3-broker cluster for a while, faults injected
at random, and its invariants checked by this script, not by eye.

A swarm of 2 nodes runs ``soak_app.py`` (an exactly-once copy, a virtual-partitions relay with
a DLQ, web reporting, tracing at 1 %, metrics); ``feeder.py`` feeds steady load with a poison
message now and then. Every FAULT_EVERY seconds (at random within it) one fault: a swarm node
SIGKILLed (the supervisor replaces it), a broker stopped and started, a broker frozen
(SIGSTOP) for 10 s, the feeder SIGKILLed and started again from its last acknowledged
message. Then the feeder stops, the swarm drains and stops, and the script checks:

* every input exactly once in the transactional output (read_committed);
* every input at least once in the relay, each key's sequence numbers first seen in order;
* every poison message in the DLQ, with its origin;
* the witness node's (swarm node 1, never killed: the kills go to node 2) RSS after its first
  minute grew < 15 %, its threads and descriptors flat (the short form reports, it does not
  judge). The RSS is read once a minute right after the node, when asked, collected all
  garbage and handed its heap's free memory back to the OS (``malloc_trim``): neither garbage
  waiting for Python's next full collection nor memory the allocator keeps for later is a
  leak (the untrimmed RSS is printed too);
* no traceback in any process's output;

and prints the faults with how long each recovery took (from the fault's end to the next
message copied). Exit status 0 when every invariant held.

    make soak                                   # 10 minutes
    python tests/soak/soak.py --minutes 1 --fault-every 3 6   # the form `make test` runs
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from conveyor import Admin
from conveyor.broker.cluster import CONTROLLER_OFFSET, LocalCluster
from conveyor.swarm.supervisor import NODE_ENV

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from helpers import free_ports, freeze_process  # noqa: E402  (tests/ holds the shared test helpers)

RATE = 200  # input messages a second
FAULT_EVERY = (12.0, 20.0)
FREEZE = 10.0
SLOW_RECOVERY = 5.0  # seconds: a recovery slower than this is explained in the report
RSS_GROWTH = 0.15
WITNESS = 1  # the swarm node never killed: its memory is judged
console = Console(stderr=True, width=120)


@dataclass
class Fault:
    kind: str
    target: str
    began: float
    ended: float = 0.0
    recovered: float | None = None  # seconds from its end to the next message copied
    wall: float = field(default_factory=time.time)  # when it began, as the nodes' logs say it


@dataclass
class Kinds:
    """What one process holds, by kind: threads by name, descriptors by kind, objects by type
    (the commonest), bytes allocated by source line (when traced)."""

    threads: Counter[str]
    descriptors: Counter[str]
    objects: Counter[str] = field(default_factory=Counter)
    allocations: Counter[str] = field(default_factory=Counter)
    garbage: Counter[str] = field(default_factory=Counter)
    clients: Counter[str] = field(default_factory=Counter)  # librdkafka handles by holder


@dataclass
class Samples:
    """One node's RSS (bytes), threads and descriptors over time: (seconds alive, rss, thr, fd)."""

    born: float
    node: int | None
    rows: list[tuple[float, int, int, int]] = field(default_factory=list)
    # what the threads and descriptors were, first after the first minute and last: (threads by
    # name, descriptors by kind), so a growth says what grew
    settled: Kinds | None = None
    last: Kinds | None = None
    # (seconds alive, RSS) right after a full collection the node made when asked, each minute
    collected: list[tuple[float, int]] = field(default_factory=list)
    # what else the node said then: Python's blocks, glibc's heap in use and kept free
    heap: list[dict[str, int]] = field(default_factory=list)


class Soak:
    def __init__(
        self, minutes: float, seed: int, workdir: Path, fault_every: tuple[float, float]
    ) -> None:
        self.minutes = minutes
        self.fault_every = fault_every
        self.rng = random.Random(seed)
        self.workdir = workdir
        tag = uuid.uuid4().hex[:6]
        self.topics = {name: f"soak-{name}-{tag}" for name in ("in", "eos", "relay", "dlq")}
        self.web_prefix = f"soak-web-{tag}"
        self.cluster = LocalCluster(workdir / "cluster", nodes=3, port=_free_base(), heap="384m")
        self.bootstrap = ""
        self.faults: list[Fault] = []
        self.samples: dict[int, Samples] = {}
        self.progress: list[tuple[float, int]] = []  # (monotonic, inputs committed)
        self.unread: list[tuple[float, str]] = []  # (monotonic, error) when progress was unread
        self.stopping = threading.Event()
        self.sampling = threading.Event()
        self.sampling.set()
        self.swarm: subprocess.Popen[bytes] | None = None
        self.feeder: subprocess.Popen[bytes] | None = None
        self.feeder_starts = 0

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> bool:
        console.print(
            f"[bold]soak[/]: {self.minutes:g} min, 3 brokers, a swarm of 2, {RATE} msgs/s"
        )
        try:
            self.cluster.start(timeout=180)
            self.bootstrap = self.cluster.shape.bootstrap_servers
            self._create_topics()
            self._start_feeder()
            self.swarm = self._spawn(
                [sys.executable, "-m", "conveyor", "swarm", "--app", "soak_app:app", "--nodes", "2",
                 "--log-level", "WARNING"], "swarm.log",
            )  # fmt: skip
            watchers = [threading.Thread(target=self._watch_progress, daemon=True),
                        threading.Thread(target=self._sample_nodes, daemon=True)]  # fmt: skip
            for watcher in watchers:
                watcher.start()
            if not self._wait(lambda: self._copies() > 0, 120):
                raise RuntimeError("nothing was copied within 2 minutes of the start")
            self._inject_faults(time.monotonic() + self.minutes * 60)
            self.sampling.clear()  # judged up to here: the drain and the stop come next
            self._stop_feeder()
            drained = self._wait(self._drained, 240)
            if not drained:
                self._explain_not_drained()
            self._stop_swarm()
            self.stopping.set()
            return self._check(drained)
        finally:
            self.stopping.set()
            for process in (self.feeder, self.swarm):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait(30)
            self.cluster.stop(wipe=True)

    def _create_topics(self) -> None:
        with Admin({"bootstrap.servers": self.bootstrap}) as admin:
            config = {"min.insync.replicas": "2"}
            admin.create_topic(self.topics["in"], 6, replication_factor=3, config=config)
            for name in ("eos", "relay"):
                admin.create_topic(self.topics[name], 6, replication_factor=3, config=config)
            admin.create_topic(self.topics["dlq"], 1, replication_factor=3, config=config)
        installed = subprocess.run(
            [sys.executable, "-m", "conveyor", "web", "install", "--app", "soak_app:app",
             "--replication-factor", "3"],
            env=self._env(), cwd=HERE, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if installed.returncode != 0:
            raise RuntimeError(f"conveyor web install failed: {installed.stderr[-2000:]}")

    def _env(self) -> dict[str, str]:
        env = dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=self.bootstrap, INPUT=self.topics["in"],
                   OUTPUT=self.topics["eos"], RELAY=self.topics["relay"], DLQ=self.topics["dlq"],
                   WEB_PREFIX=self.web_prefix, SOAK_WORKDIR=str(self.workdir))  # fmt: skip
        env["PYTHONPATH"] = str(HERE) + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def _spawn(self, command: list[str], log: str) -> subprocess.Popen[bytes]:
        with (self.workdir / log).open("ab") as out:
            return subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=self._env(), cwd=HERE, start_new_session=True,
            )  # fmt: skip

    def _start_feeder(self) -> None:
        self.feeder_starts += 1
        self.feeder = self._spawn(
            [sys.executable, str(HERE / "feeder.py"), self.bootstrap, self.topics["in"],
             str(self.workdir / "feeder.json"), str(RATE)], "feeder.log",
        )  # fmt: skip

    def _stop_feeder(self) -> None:
        assert self.feeder is not None
        self.feeder.send_signal(signal.SIGTERM)
        # A feeder just started again may take the signal before it handles SIGTERM: it dies
        # of it, but before it sent anything (its handler comes first), so nothing is lost.
        if self.feeder.wait(60) not in (0, -signal.SIGTERM):
            raise RuntimeError(f"the feeder exited with {self.feeder.returncode}")

    def _explain_not_drained(self) -> None:
        """Not drained: say what holds it up in a form short enough for a CI log's tail — the
        partitions behind, the warnings the nodes logged, and the stacks of their Conveyor
        threads (every node writes all its threads' stacks to the swarm's log on SIGUSR2, see
        soak_app.py)."""
        assert self.swarm is not None
        log = self.workdir / "swarm.log"
        dumped_from = log.stat().st_size if log.exists() else 0
        for pid in _children(self.swarm.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR2)
        threading.Event().wait(3.0)  # a moment to write them
        console.print(f"  not drained: the nodes' stacks are in {log}")
        with contextlib.suppress(Exception), Admin({"bootstrap.servers": self.bootstrap}) as admin:
            short = [
                f"{topic}/{info.partition}: leader {info.leader}, in sync {info.in_sync_replicas}"
                for topic in self.topics.values()
                for info in admin.topic_info(topic).partitions
                if info.leader is None or len(info.in_sync_replicas) < 3
            ]
            console.print(f"  replicas: {'; '.join(short) or 'every partition led, 3 in sync'}")
        for group in ("soak-eos", "soak-vp"):
            with contextlib.suppress(Exception):
                for partition, (committed, end) in sorted(self._behind(group).items()):
                    if committed != end:
                        console.print(
                            f"  behind: {group} {self.topics['in']}/{partition} committed "
                            f"{committed}, end {end}"
                        )
        if not log.exists():
            return
        text = log.read_text(errors="replace")
        for line in _warnings(text[:dumped_from])[-15:]:
            console.print(f"  logged: {escape(line)}")
        for line in _conveyor_stacks(text[dumped_from:]):
            console.print(f"  stack: {escape(line)}")

    def _stop_swarm(self) -> None:
        assert self.swarm is not None
        self.swarm.send_signal(signal.SIGTERM)
        self.swarm.wait(90)

    # -- faults -------------------------------------------------------------------------------

    def _inject_faults(self, deadline: float) -> None:
        kinds = ["kill node", "restart broker", "freeze broker", "kill feeder"]
        pause = threading.Event()
        while True:
            wait = self.rng.uniform(*self.fault_every)
            every_kind_seen = len(self.faults) >= len(kinds)
            # every kind once even when the faults take longer than the run (a broker restart
            # alone can take 15 s of a one-minute form)
            if every_kind_seen and time.monotonic() + wait >= deadline:
                pause.wait(max(0.0, deadline - time.monotonic()))
                return
            pause.wait(wait)
            kind = (
                kinds[len(self.faults) % len(kinds)]
                if len(self.faults) < len(kinds)
                else (self.rng.choice(kinds))
            )  # every kind once first, then at random
            fault = Fault(kind, "", time.monotonic())
            console.print(f"  {time.strftime('%H:%M:%S')} fault: {kind}")
            getattr(self, "_" + kind.replace(" ", "_"))(fault)
            fault.ended = time.monotonic()
            self.faults.append(fault)

    def _kill_node(self, fault: Fault) -> None:
        """SIGKILL swarm node 2; node 1 is the witness that lives through the whole run (its
        memory, threads and descriptors are what the checks judge)."""
        assert self.swarm is not None
        victims = [pid for pid in _children(self.swarm.pid) if _node(pid) != WITNESS]
        if not victims:  # node 2 between two lives: nothing to kill this time
            fault.target = "node 2 (being replaced)"
            return
        victim = self.rng.choice(victims)
        fault.target = f"node 2, pid {victim}"
        os.kill(victim, signal.SIGKILL)

    def _restart_broker(self, fault: Fault) -> None:
        node = self.rng.randint(1, 3)
        fault.target = f"broker {node}"
        self.cluster.stop_node(node)
        self.cluster.start_node(node, timeout=180)

    def _freeze_broker(self, fault: Fault) -> None:
        node = self.rng.randint(1, 3)
        status = self.cluster.node(node).status()
        assert status is not None
        fault.target = f"broker {node}"
        freeze_process(status.pid)  # every thread stopped: the freeze lasts FREEZE
        try:
            threading.Event().wait(FREEZE)
        finally:
            os.kill(status.pid, signal.SIGCONT)

    def _kill_feeder(self, fault: Fault) -> None:
        assert self.feeder is not None
        fault.target = f"pid {self.feeder.pid}"
        self.feeder.kill()
        self.feeder.wait(30)
        self._start_feeder()

    # -- watching -----------------------------------------------------------------------------

    def _copies(self) -> int:
        return self.progress[-1][1] if self.progress else 0

    def _watch_progress(self) -> None:
        """Progress is the exactly-once group's committed input offsets: they move only when a
        transaction commits (an output topic's watermarks move for aborted ones too, and for
        the markers a fence writes)."""
        # a broker going away is the point here: librdkafka's notices of it are noise
        reader = confluent_kafka.Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "soak-eos", "log_level": 3}
        )  # asks for the group's offsets; never subscribes, so never joins it
        try:
            while not self.stopping.wait(0.5):
                try:
                    found = reader.committed(self._inputs(), timeout=2)
                except confluent_kafka.KafkaException as error:
                    # a broker down or frozen, offsets held by a transaction: again
                    self.unread.append((time.monotonic(), str(error.args[0])))
                    continue
                total = sum(max(tp.offset, 0) for tp in found)
                now = time.monotonic()
                if not self.progress or total > self.progress[-1][1]:
                    self.progress.append((now, total))
                    for fault in self.faults:
                        if fault.recovered is None and fault.ended and now > fault.ended:
                            fault.recovered = now - fault.ended
        finally:
            reader.close()

    def _sample_nodes(self) -> None:
        while not self.stopping.wait(5.0):
            if self.swarm is None or not self.sampling.is_set():
                continue
            for pid in _children(self.swarm.pid):
                row = _usage(pid)
                if row is None:
                    continue
                samples = self.samples.get(pid)
                if samples is None:
                    samples = self.samples[pid] = Samples(time.monotonic(), _node(pid))
                samples.rows.append((time.monotonic() - samples.born, *row))
                if samples.node == WITNESS and samples.rows[-1][0] >= 60:
                    kinds = _kinds(pid, self.workdir)
                    if kinds is not None:
                        samples.last = kinds
                        samples.settled = samples.settled or kinds
                    alive = samples.rows[-1][0]
                    if not samples.collected or alive - samples.collected[-1][0] >= 60:
                        answer = _after_collection(pid, self.workdir)
                        if answer is not None:
                            samples.collected.append((alive, int(answer.pop("rss"))))
                            samples.heap.append(answer)

    def _drained(self) -> bool:
        """Both groups committed everything the feeder wrote."""
        return all(
            (committed or 0) == end  # none committed: drained only if nothing came
            for group in ("soak-eos", "soak-vp")
            for committed, end in self._behind(group).values()
        )

    def _behind(self, group: str) -> dict[int, tuple[int | None, int]]:
        """Per input partition, ``group``'s committed offset (``None``: none) and the end.

        Asked with a consumer client of the group (never subscribed), not an admin client:
        librdkafka's admin ListConsumerGroupOffsets crashes the process (SIGSEGV, a NULL
        consumer group, confluentinc/librdkafka#5040) when its answer says the coordinator
        moved, which the faults make likely; a consumer's own OffsetFetch handles it."""
        reader = confluent_kafka.Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": group, "log_level": 3}
        )
        try:
            found = reader.committed(self._inputs(), timeout=10)
            return {
                tp.partition: (
                    tp.offset if tp.offset >= 0 else None,
                    reader.get_watermark_offsets(tp, timeout=10)[1],
                )
                for tp in found
            }
        finally:
            reader.close()

    def _inputs(self) -> list[confluent_kafka.TopicPartition]:
        return [confluent_kafka.TopicPartition(self.topics["in"], p) for p in range(6)]

    def _wait(self, condition: Any, timeout: float) -> bool:
        deadline, pause = time.monotonic() + timeout, threading.Event()
        while time.monotonic() < deadline:
            try:
                if condition():
                    return True
            except Exception as exc:  # a broker still coming back
                console.print(f"  (waiting: {exc})")
            pause.wait(1.0)  # a remote condition, asked again: nothing to be woken by
        return False

    # -- the checks ---------------------------------------------------------------------------

    def _check(self, drained: bool) -> bool:
        inputs = _read(self.bootstrap, self.topics["in"], "read_uncommitted")
        copies = _read(self.bootstrap, self.topics["eos"], "read_committed")
        relayed = _read(self.bootstrap, self.topics["relay"], "read_uncommitted")
        letters = _read(self.bootstrap, self.topics["dlq"], "read_uncommitted")
        poison = {where for where, record in inputs.items() if record["value"] == b"\xffpoison"}
        copied = Counter(record["headers"].get("input") for record in copies.values())
        eos_lost = [where for where in inputs if copied[where] == 0]
        eos_twice = [where for where, count in copied.items() if count > 1]
        relayed_inputs = Counter(record["headers"].get("input") for record in relayed.values())
        relay_lost = [
            where for where in inputs if where not in poison and not relayed_inputs[where]
        ]
        if relay_lost:  # say where each went, and read the relay again: was it the reader?
            self._explain_lost(relay_lost, inputs, letters)
            again = _read(self.bootstrap, self.topics["relay"], "read_uncommitted")
            found = Counter(record["headers"].get("input") for record in again.values())
            console.print(f"  a second read of the relay finds {len(again)} records "
                          f"(the first {len(relayed)}); of the lost: "
                          f"{[where for where in relay_lost if found[where]] or 'none'}")  # fmt: skip
        order_breaks = _order_breaks(relayed.values())
        dead = {
            f"{r['headers'].get('original_partition')}:{r['headers'].get('original_offset')}"
            for r in letters.values()
            if r["headers"].get("original_topic") == self.topics["in"]
        }
        poison_lost = sorted(poison - dead)
        tracebacks = [
            f"{name}: {line}"
            for name in ("swarm.log", "feeder.log")
            for line in _unhandled((self.workdir / name).read_text(errors="replace"))
        ]
        memory = self._memory()
        recoveries = [f.recovered for f in self.faults if f.recovered is not None]
        checks = {
            "drained (both groups committed everything)": drained,
            f"exactly once: {len(inputs)} inputs, 0 lost ({len(eos_lost)})": not eos_lost,
            f"exactly once: 0 twice ({len(eos_twice)})": not eos_twice,
            f"relay: 0 lost ({len(relay_lost)})": not relay_lost,
            f"relay: per-key order ({len(order_breaks)} breaks)": not order_breaks,
            f"DLQ: {len(poison)} poison, 0 missing ({len(poison_lost)})": not poison_lost,
            f"no unhandled exception ({'; '.join(tracebacks)[:300] or 'none'})": not tracebacks,
            "every fault recovered": len(recoveries) == len(self.faults),
            **memory,
        }
        self._print(checks, inputs, recoveries)
        return all(checks.values())

    def _explain_lost(
        self, lost: list[str], inputs: dict[str, Any], letters: dict[str, Any]
    ) -> None:
        """For each input the relay lost (the first 10): its key and sequence number, whether
        the DLQ has it (and the error it was given up on), and the swarm's log lines that name
        its offset on its partition."""
        dead = {
            f"{r['headers'].get('original_partition')}:{r['headers'].get('original_offset')}": r
            for r in letters.values()
        }
        log = (self.workdir / "swarm.log").read_text(errors="replace").splitlines()
        for where in lost[:10]:
            record = inputs[where]
            letter = dead.get(where)
            fate = (
                "not in the DLQ" if letter is None else
                f"in the DLQ: {letter['headers'].get('original_error_class')}: "
                f"{letter['headers'].get('original_error_message', '')[:200]}"
            )  # fmt: skip
            console.print(f"  relay lost input {where} (key {record['key']!r}, "
                          f"{record['value'][:60]!r}): {escape(fate)}")  # fmt: skip
            partition, offset = where.split(":")
            named = re.compile(rf"{re.escape(self.topics['in'])}/{partition}\b.*\b{offset}\b")
            for line in [line for line in log if named.search(line)][-8:]:
                console.print(f"    {escape(line[:300])}")

    def _memory(self) -> dict[str, bool]:
        """The witness node's RSS, threads and descriptors from its first minute to the end
        (it is never killed; what it first creates lazily, producers, lanes, exists by then)."""
        judged: dict[str, bool] = {}
        for pid, samples in self.samples.items():
            settled = [row for row in samples.rows if row[0] >= 60]
            if samples.node != WITNESS or len(settled) < 2 or samples.rows[-1][0] < 180:
                continue  # the short form, or node 2 (killed again and again): reported only
            _, rss0, threads0, fds0 = settled[0]
            _, rss1, threads1, fds1 = settled[-1]
            growth = rss1 / rss0 - 1
            if len(samples.collected) >= 2:  # judged on live memory: garbage is no leak
                (_, live0), (_, live1) = samples.collected[0], samples.collected[-1]
                live = live1 / live0 - 1
                console.print(f"  witness RSS as sampled: {rss0 >> 20} -> {rss1 >> 20} MB "
                              f"({growth:+.0%}); after full collections, minute by minute: "
                              f"{[rss >> 20 for _, rss in samples.collected]} MB")  # fmt: skip
                rss0, rss1, growth = live0, live1, live
                if samples.heap:
                    first, last = samples.heap[0], samples.heap[-1]
                    console.print("  witness heap after full collections, first -> last: " + ", ".join(
                        f"{name} {first.get(name, 0) >> 10} -> {last.get(name, 0) >> 10} K"
                        if name != "python_blocks" else
                        f"{name} {first.get(name, 0)} -> {last.get(name, 0)}"
                        for name in sorted(last)))  # fmt: skip
            judged[f"node {pid}: RSS {rss0 >> 20} -> {rss1 >> 20} MB ({growth:+.0%})"] = (
                growth < RSS_GROWTH
            )
            judged[f"node {pid}: threads {threads0} -> {threads1}, fds {fds0} -> {fds1}"] = (
                threads1 <= threads0 + 2 and fds1 <= fds0 + 8
            )
            if samples.settled and samples.last:
                for what in (
                    "threads",
                    "descriptors",
                    "clients",
                    "objects",
                    "allocations",
                    "garbage",
                ):
                    first, last = getattr(samples.settled, what), getattr(samples.last, what)
                    grew = {name: last[name] - first[name] for name in first | last
                            if last[name] != first[name]}  # fmt: skip
                    largest = dict(sorted(grew.items(), key=lambda kv: -abs(kv[1]))[:12])
                    console.print(  # escaped: a holder's name may look like [markup]
                        f"  witness {what} that changed after minute 1: {escape(str(largest))}"
                    )
        return judged

    def _explain_slow_recoveries(self) -> None:
        """For each recovery slower than SLOW_RECOVERY: when copying last moved before the fault
        ended, how often the progress reader itself failed meanwhile (a slow reader is not a slow
        app), and the warnings the nodes logged from the fault's start to its recovery."""
        log = (self.workdir / "swarm.log").read_text(errors="replace").splitlines()
        stamped = [(stamp, line) for line in log if (stamp := _log_time(line)) is not None]
        for fault in self.faults:
            if fault.recovered is None or fault.recovered <= SLOW_RECOVERY:
                continue
            back = fault.ended + fault.recovered
            moved = [at for at, _ in self.progress if at <= fault.ended]
            stalled = f"{fault.ended - moved[-1]:.1f} s before it ended" if moved else "never"
            unread = [error for at, error in self.unread if fault.ended <= at <= back]
            console.print(
                f"  slow recovery: {fault.kind} {fault.target} ({fault.ended - fault.began:.1f}"
                f" s), back after {fault.recovered:.1f} s; copies last moved {stalled}; the"
                f" progress reader failed {len(unread)} times meanwhile"
                + (f" ({unread[-1][:120]})" if unread else "")
            )
            since = fault.wall
            until = fault.wall + (back - fault.began)
            window = "\n".join(line for stamp, line in stamped if since <= stamp <= until)
            for line in _warnings(window)[-12:]:
                console.print(f"    logged: {escape(line)}")

    def _print(
        self, checks: dict[str, bool], inputs: dict[str, Any], recoveries: list[float]
    ) -> None:
        table = Table(title="faults")
        for column in ("kind", "target", "lasted", "recovered after"):
            table.add_column(column)
        for fault in self.faults:
            table.add_row(
                fault.kind, fault.target, f"{fault.ended - fault.began:.1f} s",
                "-" if fault.recovered is None else f"{fault.recovered:.1f} s",
            )  # fmt: skip
        console.print(table)
        self._explain_slow_recoveries()
        verdicts = Table(title="invariants")
        verdicts.add_column("check")
        verdicts.add_column("held")
        for name, held in checks.items():
            verdicts.add_row(name, "[green]yes" if held else "[red]NO")
        console.print(verdicts)
        summary = {
            "minutes": self.minutes, "faults": len(self.faults),
            "fault_kinds": dict(Counter(f.kind for f in self.faults)),
            "inputs": len(inputs), "violations": [name for name, held in checks.items() if not held],
            "slowest_recovery_s": round(max(recoveries), 1) if recoveries else None,
            "feeder_starts": self.feeder_starts,
            "rss_mb": {
                f"node {rows.node} pid {pid}":
                    [rows.rows[0][1] >> 20, rows.rows[-1][1] >> 20, round(rows.rows[-1][0])]
                for pid, rows in self.samples.items() if rows.rows
            },  # first and last sample, and the seconds between: per node process
        }  # fmt: skip
        print(json.dumps(summary), flush=True)


def _log_time(line: str) -> float | None:
    """The wall-clock time a log record of the nodes' says it was written at."""
    if _RECORD.match(line) is None:
        return None
    return time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")) + int(line[20:23]) / 1000


def _order_breaks(relayed: Any) -> list[str]:
    """Keys whose sequence numbers were first seen out of order, read in offset order. A replay
    after a crash repeats numbers seen already (at least once, not a break); a poison message
    leaves its number out (not a break either); a number first seen after a larger one is."""
    seen: dict[bytes, set[int]] = {}
    highest: dict[bytes, int] = {}
    breaks = []
    for record in relayed:
        key, seq = record["key"], json.loads(record["value"])["seq"]
        numbers = seen.setdefault(key, set())
        if seq in numbers:
            continue
        if seq < highest.get(key, -1):
            breaks.append(f"{key!r}: {seq} first seen after {highest[key]}")
        numbers.add(seq)
        highest[key] = max(highest.get(key, -1), seq)
    return breaks


_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (\w+) (\S+)")


_EXITED = re.compile(r"^node \d+ exited with (-?\d+)")


def _warnings(log: str) -> list[str]:
    """The warnings and errors of a process's output, each kind once (digits folded) with
    how often it came, in the order each kind was last seen."""
    last: dict[str, tuple[str, int]] = {}
    for line in log.splitlines():
        record = _RECORD.match(line)
        if record is None or record.group(1) not in ("WARNING", "ERROR", "CRITICAL"):
            continue
        kind = re.sub(r"\d+", "N", line[record.end() :])[:160]
        count = last.pop(kind, ("", 0))[1] + 1
        last[kind] = (line[11:240], count)
    return [f"{line} (x{count})" if count > 1 else line for line, count in last.values()]


def _conveyor_stacks(dump: str) -> list[str]:
    """faulthandler's stacks, one line per thread that is in Conveyor's code (innermost
    first, Conveyor's frames and the one it called), identical ones once with a count."""
    threads: list[list[str]] = []
    for line in dump.splitlines():
        if line.startswith(("Thread 0x", "Current thread 0x")):
            threads.append([])
        elif threads and line.startswith("  File "):
            frame = _FRAME.match(line)
            if frame is not None:
                threads[-1].append(f"{frame.group(3)}@{Path(frame.group(1)).name}:{frame.group(2)}")
    found: Counter[str] = Counter()
    for frames in threads:
        ours = [i for i, frame in enumerate(frames) if _ours(frame)]
        if ours:
            found[" < ".join(frames[max(0, ours[0] - 1) : ours[0] + 4])] += 1
    return [f"{stack} (x{count})" if count > 1 else stack for stack, count in found.items()]


_FRAME = re.compile(r'  File "([^"]+)", line (\d+) in (\S+)')


def _ours(frame: str) -> bool:
    return any(part in frame for part in ("listener", "executor", "transactions", "positions",
                                          "producer", "hook_runs", "partition_core"))  # fmt: skip


def _unhandled(log: str) -> list[str]:
    """What in a process's output is an exception nobody handled: a traceback that no log
    record of Conveyor's carries (an error Conveyor handled, a poison message's say, is logged
    with its traceback), a crashed thread, listener or app, a swarm node that exited by itself."""
    found: list[str] = []
    logger = ""  # the logger of the record the following lines belong to
    for line in log.splitlines():
        record = _RECORD.match(line)
        if record is not None:
            logger = record.group(2)
            if "crashed" in line:
                found.append(line[:200])
        elif line.startswith("Traceback (most recent call last)"):
            if not logger.startswith("conveyor"):
                found.append(f"a traceback outside Conveyor's log records ({logger or 'first'})")
        elif line.startswith("Exception in thread"):
            found.append(line[:200])
        elif line.startswith("Conveyor "):
            logger = ""  # a process's banner: a new process, no record yet
        else:
            exited = _EXITED.match(line)
            if exited is not None and int(exited.group(1)) not in (0, -signal.SIGKILL):
                found.append(line[:200])  # a node that ended by itself, not by the soak's kill
    return found


def _read(bootstrap: str, topic: str, isolation: str) -> dict[str, dict[str, Any]]:
    """Every record of ``topic`` by ``partition:offset``, in partition and offset order."""
    reader = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"soak-read-{uuid.uuid4().hex}",
        "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True,
        "log_level": 3,
    })  # fmt: skip
    try:
        partitions = sorted(reader.list_topics(topic, timeout=30).topics[topic].partitions)
        reader.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in partitions])
        found: dict[str, dict[str, Any]] = {}
        ended: set[int] = set()
        deadline = time.monotonic() + 120
        while len(ended) < len(partitions) and time.monotonic() < deadline:
            for message in reader.consume(1000, 1.0):
                error = message.error()
                if error is not None:
                    if error.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        ended.add(message.partition())
                    continue
                headers = {k: v.decode() for k, v in (message.headers() or []) if v is not None}
                found[f"{message.partition()}:{message.offset()}"] = {
                    "key": message.key(),
                    "value": message.value(),
                    "headers": headers,
                }
        if len(ended) < len(partitions):
            raise RuntimeError(f"could not read {topic} to its end")
        return dict(sorted(found.items(), key=lambda item: tuple(map(int, item[0].split(":")))))
    finally:
        reader.close()


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def _node(pid: int) -> int | None:
    """The swarm node number a process runs as (from its environment), if it says."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    prefix = f"{NODE_ENV}=".encode()
    for entry in environ:
        if entry.startswith(prefix):
            return int(entry[len(prefix) :])
    return None


def _usage(pid: int) -> tuple[int, int, int] | None:
    """(RSS bytes, threads, open descriptors) of ``pid``, or None when it is gone."""
    try:
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        )
        rss = int(status["VmRSS"].split()[0]) * 1024
        return rss, int(status["Threads"]), len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, KeyError, ValueError):
        return None


def _after_collection(pid: int, workdir: Path) -> dict[str, int] | None:
    """Ask node ``pid`` (the soak app) for a full collection and its RSS (and heap) right
    after; None when it did not answer within 10 s."""
    answer = workdir / f"collected-{pid}.json"
    answer.unlink(missing_ok=True)
    (workdir / f"collect-{pid}").touch()
    pause = threading.Event()
    for _ in range(50):  # the app looks for the request every second
        with contextlib.suppress(OSError, ValueError):
            return dict(json.loads(answer.read_text()))
        pause.wait(0.2)
    return None


def _kinds(pid: int, workdir: Path) -> Kinds | None:
    """What ``pid`` holds now: its threads by name (librdkafka's native names, and the Python
    names the app writes to ``diagnostics-<pid>.json``), its descriptors by kind (socket,
    pipe, file...) and the app's own counts of objects by type and of allocations by line."""
    try:
        threads = Counter(
            (task / "comm").read_text().strip() for task in Path(f"/proc/{pid}/task").iterdir()
        )
        descriptors: Counter[str] = Counter()
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            target = os.readlink(fd)
            descriptors[target.split(":")[0] if ":" in target else re.sub(r"\d+", "N", target)] += 1
    except OSError:
        return None
    kinds = Kinds(threads, descriptors)
    written = workdir / f"diagnostics-{pid}.json"
    with contextlib.suppress(OSError, ValueError):  # not written yet: the next sample reads it
        diagnostics = json.loads(written.read_text())
        kinds.threads.update(f"py:{name}" for name in diagnostics["threads"])
        kinds.objects.update(dict(diagnostics["objects"]))
        kinds.allocations.update(dict(diagnostics["allocations"]))
        kinds.garbage.update(dict(diagnostics["garbage"]))
        kinds.clients.update(dict(diagnostics.get("clients", [])))
    return kinds


def _free_base() -> int:
    return free_ports([*range(3), *(CONTROLLER_OFFSET + n for n in range(3))])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long faults are injected")
    parser.add_argument("--seed", type=int, default=None, help="the faults' random seed")
    parser.add_argument(
        "--fault-every",
        type=float,
        nargs=2,
        default=FAULT_EVERY,
        metavar=("MIN", "MAX"),
        help="seconds between faults, drawn at random between the two",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    parser.add_argument(
        "--workdir", type=Path, default=None,
        help="the folder for the cluster and the logs (default: a new temporary one)",
    )  # fmt: skip
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="conveyor-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    console.print(f"seed {seed}; logs in {workdir}")
    try:
        held = Soak(args.minutes, seed, workdir, tuple(args.fault_every)).run()
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if held else 1


if __name__ == "__main__":
    raise SystemExit(main())
