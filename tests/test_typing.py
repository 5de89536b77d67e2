"""The public API is typed: mypy --strict checks users' code against it (the consumer's
produce twins carry the producer's signatures, not ``**Any``)."""

from __future__ import annotations

from pathlib import Path

from mypy import api

USER_CODE = """
from conveyor import Consumer, DeliveryReport

class Orders(Consumer):
    def consume(self) -> None:
        report: DeliveryReport = self.produce_sync(topic="out", payload=b"x", key="k")
        self.produce_async(topic="out", payload=b"x", partition=1, label=report)
        self.produce_sync(topic=1, payload=b"x")
        self.produce_async(topc="out")
        self.produce_many_async([{"topic": "out"}], reports=True).wait(1.0)
        self.pipe_async(topic="out", message=self.messages.first).wait()
"""


def test_consumer_produce_twins_are_checked(tmp_path: Path) -> None:
    module = tmp_path / "user_code.py"
    module.write_text(USER_CODE)
    out, _err, status = api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(module)]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1, out
    assert len(errors) == 2, out
    assert (
        'Argument "topic" to "produce_sync" of "Consumer" has incompatible type "int"' in errors[0]
    )
    assert 'Unexpected keyword argument "topc" for "produce_async" of "Consumer"' in errors[1]


TYPED_CODE = """
import msgspec
from conveyor import Consumer

class Order(msgspec.Struct):
    id: int

class Orders(Consumer[Order]):
    def consume(self) -> None:
        for message in self.messages:
            number: int = message.payload.id
            text: str = message.payload.id
        first: Order = self.messages.payloads[0]
        self.messages.first.payload.missing

class Keyed(Consumer[Order, int]):
    def consume(self) -> None:
        key: str = self.messages.first.key
"""


def test_a_consumers_messages_are_typed_by_its_models(tmp_path: Path) -> None:
    module = tmp_path / "typed_code.py"
    module.write_text(TYPED_CODE)
    out, _err, status = api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(module)]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1, out
    assert len(errors) == 3, out
    assert (
        'Incompatible types in assignment (expression has type "int", variable has type "str")'
        in errors[0]
    )
    assert '"Order" has no attribute "missing"' in errors[1]
    assert (
        'Incompatible types in assignment (expression has type "int", variable has type "str")'
        in errors[2]
    )


ROUTE_CODE = """
from conveyor import App, Consumer
from conveyor.routing import DeadLetterQueueOptions

class C(Consumer):
    def consume(self) -> None: ...

class Sink:
    def open(self) -> None: ...
    def deliver(self, records: object) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...

app = App(client_id="typing", kafka={"bootstrap.servers": "127.0.0.1:9092"})
dlq: DeadLetterQueueOptions = {"topic": "t-dlq", "max_retries": 2}
app.routes.topic("t", C, max_messages=5, initial_offset="latest", partitions=3, config={
    "retention.ms": 86_400_000}, dead_letter_queue=dlq, virtual_partitions={"max_partitions": 4},
    kafka={"fetch.min.bytes": 1}, assign=[0, 1], pause_timeout=1)
app.routes.pattern(r"^t\\\\..+", C, max_messages=5, virtual_partitions=True, filters=[])
app.routes.sink("s", Sink(), lanes=4, ordering="partition", dead_letter_queue="s-dlq", partitions=1)
app.routes.rpc("commands", None, "results", partitions=1, max_wait_time=0.5)
app.routes.topic("t", C, max_mesages=5)
app.routes.topic("t", C, max_messages="5")
app.routes.topic("t", C, initial_offset="newest")
app.routes.topic("t", C, dead_letter_queue={"topc": "t-dlq"})
app.routes.pattern("^t", C, partitions=3)
app.routes.sink("s", Sink(), ordering="any")
app.routes.sink("s", Sink(), max_messages=5)
"""


def test_route_and_sink_options_are_checked(tmp_path: Path) -> None:
    """A misspelt option, a value of the wrong type, a nested dict's unknown key and an
    option that kind of route does not take are mypy errors in users' code; correct options
    of every kind of route are not (at run time they raise ConfigurationError as before)."""
    module = tmp_path / "route_code.py"
    module.write_text(ROUTE_CODE)
    out, _err, status = api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(module)]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    first = ROUTE_CODE.splitlines().index('app.routes.topic("t", C, max_mesages=5)') + 1
    assert status == 1, out
    assert [int(line.split(":")[1]) for line in errors] == list(range(first, first + 7)), out
    assert 'Unexpected keyword argument "max_mesages" for "topic" of "Routes"' in errors[0]
    assert 'Argument "max_messages" to "topic" of "Routes" has incompatible type' in errors[1]
    assert '"initial_offset"' in errors[2]
    assert '"dead_letter_queue"' in errors[3]
    assert 'expected "DeadLetterQueueOptions | None"' in errors[3]
    assert 'Unexpected keyword argument "partitions" for "pattern" of "Routes"' in errors[4]
    assert '"ordering"' in errors[5]
    assert 'Unexpected keyword argument "max_messages" for "sink" of "Routes"' in errors[6]
