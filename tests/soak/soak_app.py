"""The app the soak runs under `conveyor swarm`: the whole product at once.

* ``soak-eos``: every input copied to OUTPUT in a Kafka transaction with its offset (each
  copy carries the input's ``partition:offset`` in its ``input`` header);
* ``soak-vp``: virtual partitions by key relay every input to RELAY at least once, a payload
  that is not JSON (the feeder's poison) to the DLQ with its origin;
* the web UI's reporting, tracing sampled at 1 % (spans to no exporter) and metrics.

Configured by the environment: KAFKA_BOOTSTRAP_SERVERS, INPUT, OUTPUT, RELAY, DLQ, WEB_PREFIX.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import gc
import itertools
import json
import os
import re
import signal
import sys
import threading
import tracemalloc
import types
from collections import Counter

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from conveyor import App
from conveyor import Consumer as ConveyorConsumer
from conveyor.errors import DeserializationError
from conveyor.web import WebTopics

INPUT, OUTPUT, RELAY, DLQ = (os.environ[name] for name in ("INPUT", "OUTPUT", "RELAY", "DLQ"))


class Copy(ConveyorConsumer):
    """Exactly once: the batch's copies and its offset in one transaction."""

    def consume(self) -> None:
        with self.transaction():
            for message in self.messages:
                where = f"{message.partition}:{message.offset}".encode()
                self.produce_async(topic=OUTPUT, key=message.raw_key, payload=message.raw_payload,
                                   headers=[("input", where)])  # fmt: skip
            self.mark_as_consumed(self.messages.last)


class Relay(ConveyorConsumer):
    """At least once, in order per key: each input's key and sequence number relayed. A payload
    that cannot be read fails the batch right there, after what came before it was relayed and
    marked: it is the first unmarked message, the one the DLQ gets."""

    def consume(self) -> None:
        relayed: list[dict[str, object]] = []
        try:
            for message in self.messages:
                relayed.append(
                    {"topic": RELAY, "key": message.raw_key,
                     "payload": {"seq": message.payload["seq"]},
                     "headers": [("input", f"{message.partition}:{message.offset}".encode())]}
                )  # fmt: skip
        except DeserializationError:
            if relayed:
                self.produce_many_sync(relayed)
                self.mark_as_consumed(self.messages[len(relayed) - 1])
            raise
        self.produce_many_sync(relayed)


app = App(
    client_id="soak",
    kafka={"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "session.timeout.ms": 6000},
    concurrency=4,
    max_messages=200,
    max_wait_time=0.2,
    shutdown_timeout=30,
)
with app.routes.consumer_group("soak-eos"):
    app.routes.topic(INPUT, Copy)
with app.routes.consumer_group("soak-vp"):
    app.routes.topic(
        INPUT,
        Relay,
        virtual_partitions={"partitioner": lambda message: message.raw_key, "max_partitions": 8},
        dead_letter_queue={"topic": DLQ, "max_retries": 0},
    )
app.tracing.enable(TracerProvider(sampler=TraceIdRatioBased(0.01)))
app.metrics.enable()
app.web.enable(topics=WebTopics.prefixed(os.environ["WEB_PREFIX"]), tracking_interval=2.0)


def _write_diagnostics(folder: str) -> None:
    """Every 5 s, this process's Python threads by name (digits folded) and, every 30 s, its
    objects by type (the 40 commonest) to ``diagnostics-<pid>.json`` in ``folder``: the soak
    says which ones grew. With SOAK_DIAGNOSE=1 each count follows a full collection (what is
    alive, not what waits for the collector: that is counted apart, as garbage) and comes
    with the 15 source lines that hold the most memory (tracemalloc)."""
    target = os.path.join(folder, f"diagnostics-{os.getpid()}.json")
    diagnose = os.environ.get("SOAK_DIAGNOSE") == "1"
    if diagnose:
        tracemalloc.start(1)
    found: dict[str, list[tuple[str, int]]] = {"objects": [], "garbage": [], "allocations": []}
    for second in itertools.count():
        if _stopped.wait(1.0):
            return
        _answer_collection(folder)
        if second % 5:
            continue
        tick = second // 5
        if tick % 6 == 0:
            objects = Counter(type(o).__name__ for o in gc.get_objects())
            if diagnose:
                gc.collect()
                alive = Counter(type(o).__name__ for o in gc.get_objects())
                found["garbage"] = (objects - alive).most_common(20)
                objects = alive
                top = tracemalloc.take_snapshot().statistics("lineno")[:15]
                found["allocations"] = [(str(stat.traceback), stat.size) for stat in top]
            found["objects"] = objects.most_common(40)
            found["clients"] = sorted(Counter(_librdkafka_clients()).items())
        names = [re.sub(r"\d+", "N", thread.name) for thread in threading.enumerate()]
        with open(target + ".tmp", "w") as out:
            json.dump({"threads": names, **found}, out)
        os.replace(target + ".tmp", target)


def _answer_collection(folder: str) -> None:
    """When the soak asks (``collect-<pid>`` in ``folder``), collect all garbage, hand the
    heap's free memory back to the OS (``malloc_trim``) and answer with the RSS right after
    (``collected-<pid>.json``): the soak judges memory so, since neither garbage that waits
    for Python's next full collection (rare under Conveyor's raised ``gc_threshold``) nor
    freed memory the allocator keeps for later (librdkafka's fetch buffers after a backlog,
    say) is a leak."""
    asked = os.path.join(folder, f"collect-{os.getpid()}")
    if not os.path.exists(asked):
        return
    gc.collect()
    untrimmed, heap = _rss(), _malloc()
    with contextlib.suppress(OSError, AttributeError):  # glibc only
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # hand what the heap keeps free back to the OS
    answer = os.path.join(folder, f"collected-{os.getpid()}.json")
    with open(answer + ".tmp", "w") as out:
        json.dump({"rss": _rss(), "rss_untrimmed": untrimmed,
                   "python_blocks": sys.getallocatedblocks(), **heap}, out)  # fmt: skip
    os.replace(answer + ".tmp", answer)
    os.remove(asked)


def _rss() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def _malloc() -> dict[str, int]:
    """glibc's heap: bytes in use (Python's large objects, librdkafka's buffers) and bytes
    freed but kept by the allocator (what a fragmented heap holds on to)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return {}

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
            "fordblks", "keepcost")]  # fmt: skip

    if not hasattr(libc, "mallinfo2"):
        return {}
    libc.mallinfo2.restype = MallInfo2
    info = libc.mallinfo2()
    return {"malloc_in_use": info.uordblks + info.hblkhd, "malloc_free": info.fordblks}


def _holder(thing: object) -> object | None:
    """The object that holds ``thing`` in an attribute (through its ``__dict__`` or a slot)."""
    for holder in gc.get_referrers(thing):
        if isinstance(holder, dict):
            for instance in gc.get_referrers(holder):
                if getattr(instance, "__dict__", None) is holder:
                    return instance
        elif type(holder).__module__ not in ("builtins", "cimpl"):  # not a list, frame, method
            return holder
    return None


def _anonymous_holders(thing: object) -> str:
    """What holds ``thing`` when no object does in an attribute: frames (by function), bound
    methods, cells, lists... (``frame:send+method:produce``)."""
    kinds = []
    for holder in gc.get_referrers(thing):
        if isinstance(holder, types.FrameType):
            kinds.append(f"frame:{holder.f_code.co_name}")
        elif isinstance(holder, types.BuiltinMethodType | types.MethodType):
            kinds.append(f"method:{holder.__name__}")
        elif type(holder).__name__ != "list" or holder is not _scanning:
            kinds.append(type(holder).__name__)
    return "+".join(sorted(set(kinds))) or "nothing"


_scanning: list[object] = []


def _librdkafka_clients() -> list[str]:
    """Every librdkafka handle alive, named by its kind and the two objects that hold it
    (``Producer<ProducerClient<Producer``), or by what refers to it when no object holds it
    (``Producer<[frame:send]``): the soak says which kind of client grew."""
    named = []
    _scanning[:] = [o for o in gc.get_objects() if isinstance(o, (Producer, Consumer, AdminClient))]
    try:
        for handle in _scanning:
            holder = _holder(handle)
            if holder is None:
                named.append(f"{type(handle).__name__}<[{_anonymous_holders(handle)}]")
                continue
            owner = _holder(holder)
            named.append(
                f"{type(handle).__name__}<{type(holder).__name__}<"
                f"{type(owner).__name__ if owner is not None else '?'}"
            )
    finally:
        _scanning.clear()
    return named


faulthandler.register(signal.SIGUSR2, all_threads=True)  # the soak asks when not drained
_stopped = threading.Event()
if os.environ.get("SOAK_WORKDIR"):
    threading.Thread(
        target=_write_diagnostics, args=(os.environ["SOAK_WORKDIR"],), daemon=True
    ).start()
