"""Typed consume: a consumer that reads every payload through a model, beside the untyped JSON
consumer and a FastStream subscriber whose handler takes the same pydantic model.

Variants, each on its own topic filled with the same 100-byte JSON orders (1 partition): the
bare confluent-kafka batch loop decoding every payload with orjson (the same-run baseline of
every figure), Conveyor's untyped JSON consumer (``self.messages.payloads``: orjson dicts), a
``Consumer[Order]`` with a msgspec Struct, one with a pydantic model (both decode straight from
bytes; each batch is validated before ``consume()`` and the decoded payloads kept for it), and
FastStream 0.7.8 subscribers (aiokafka) whose handler takes the pydantic ``Order``: one message
per call (as the issue asks), and batches of 500 (for reference). FastStream runs in the peers'
environment (``.venv-bench-peers``, made once), each run in its own process. Every side counts
the same way (from 10 % of the messages to the last one). Targets (issue 37): msgspec-typed
consume >= 0.9x the untyped JSON consumer; pydantic-typed consume >= 3x FastStream's pydantic
subscriber.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pydantic
from orjson import loads as bare_loads

from _peers import peers_python
from baselines import bare_batch_consume, fill_topic
from conveyor import App, Consumer
from harness import Bench, Figure, RateMeter

HERE = Path(__file__).resolve().parent
LIKE_FOR_LIKE = {"fetch.queue.backoff.ms": 10}  # what Conveyor's listener sets
PAYLOAD = b'{"order":12345,"customer":"c-0042","items":["widget","gadget"],"total":99.5,"ok":true}'
PAYLOAD += b" " * (100 - len(PAYLOAD))


class StructOrder(msgspec.Struct):
    order: int
    customer: str
    items: list[str]
    total: float
    ok: bool


class ModelOrder(pydantic.BaseModel):
    order: int
    customer: str
    items: list[str]
    total: float
    ok: bool


def conveyor_consume(bootstrap: str, topic: str, count: int, model: Any) -> float:
    meter = RateMeter(count)
    base: Any = Consumer if model is None else Consumer[model]

    class Reading(base):  # type: ignore[misc, valid-type]
        def consume(self) -> None:
            for payload in self.messages.payloads:
                del payload
            meter.add(len(self.messages))

    app = App(
        client_id="bench",
        kafka={"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
               "auto.offset.reset": "earliest"},
        concurrency=4, max_messages=500, max_wait_time=0.5,
    )  # fmt: skip
    app.routes.topic(topic, Reading)
    app.start()
    try:
        if not meter.done.wait(300):
            raise RuntimeError(f"Conveyor consumed {meter.seen} of {count}")
    finally:
        app.stop_and_wait()
    return meter.rate()


def faststream_consume(bench: Bench, python: str, topic: str, count: int, batch: bool) -> float:
    command = [python, str(HERE / "_typed_faststream.py"), "--bootstrap", bench.bootstrap,
               "--topic", topic, "--group", f"bench-fs-{uuid.uuid4().hex[:8]}",
               "--count", str(count), *(["--batch"] if batch else [])]  # fmt: skip
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=900, cwd=HERE, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"FastStream's subscriber failed:\n{done.stderr[-3000:]}")
    rate: float = json.loads(done.stdout.strip().splitlines()[-1])["rate"]
    return rate


def _arguments(parser: Any) -> None:
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument(
        "--peer-messages", type=int, default=200_000, help="messages per FastStream run"
    )
    parser.add_argument(
        "--no-peers", action="store_true", help="leave FastStream out (no peers' environment)"
    )


def main() -> None:
    bench = Bench("typed_consume", __doc__ or "", _arguments)
    count: int = bench.args.messages
    peer_count: int = min(bench.args.peer_messages, count)
    peers = None if bench.args.no_peers else peers_python()
    names = ["bare", "json", "msgspec", "pydantic"]
    if peers is not None:
        names += ["faststream", "faststream-batch"]
    topics = {name: bench.create_topic() for name in names}
    for name, topic in topics.items():
        fill_topic(bench.bootstrap, topic, peer_count if name.startswith("faststream") else count,
                   PAYLOAD)  # fmt: skip
    bench.console.print(f"filled {len(topics)} topics with {count:,} x 100 B JSON orders")
    runs: dict[str, list[float]] = {name: [] for name in names}
    for attempt in range(1, bench.repeats + 1):
        runs["bare"].append(bare_batch_consume(bench.bootstrap, topics["bare"], count,
                                               config=LIKE_FOR_LIKE, decode=bare_loads))  # fmt: skip
        for name, model in (("json", None), ("msgspec", StructOrder), ("pydantic", ModelOrder)):
            runs[name].append(conveyor_consume(bench.bootstrap, topics[name], count, model))
        if peers is not None:
            for name in ("faststream", "faststream-batch"):
                runs[name].append(faststream_consume(
                    bench, peers, topics[name], peer_count, name.endswith("batch")
                ))  # fmt: skip
        bench.console.print(
            f"  run {attempt}/{bench.repeats}: "
            + ", ".join(f"{name} {values[-1]:,.0f}" for name, values in runs.items())
            + " msgs/s"
        )
    note = f"{count:,} x 100 B, 1 partition"
    figures = [
        ("bare batch loop decoding with orjson (baseline)", runs["bare"], None, note),
        ("untyped JSON consumer (orjson dicts)", runs["json"], runs["bare"], note),
        ("msgspec Struct consumer vs the untyped JSON consumer (target >= 0.9x)",
         runs["msgspec"], runs["json"], "Consumer[Order], Order a msgspec.Struct"),
        ("msgspec Struct consumer vs the bare decoding loop", runs["msgspec"], runs["bare"], note),
        ("pydantic model consumer vs the bare decoding loop", runs["pydantic"], runs["bare"], note),
    ]  # fmt: skip
    if peers is not None:
        figures += [
            ("pydantic model consumer vs FastStream's pydantic subscriber (target >= 3x)",
             runs["pydantic"], runs["faststream"],
             f"FastStream 0.7.8, a handler per message, {peer_count:,} messages"),
            ("pydantic model consumer vs FastStream's batch subscriber (reference)",
             runs["pydantic"], runs["faststream-batch"],
             f"FastStream 0.7.8, batch=True (500), {peer_count:,} messages"),
        ]  # fmt: skip
    for name, values, baseline, text in figures:
        bench.record(Figure(bench.name, name, "msgs/s", values, baseline or [], note=text))
    bench.report()


if __name__ == "__main__":
    main()
