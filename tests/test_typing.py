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
