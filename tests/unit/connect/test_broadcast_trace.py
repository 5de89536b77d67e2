"""What the Broadcast sink pushes with tracing on: each record's JSON with the ``traceparent``
of the span delivering it (``delivery_traceparent``), and the record as before otherwise."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from conveyor.connect import delivery_traceparent
from conveyor.connect.sinks import Broadcast
from conveyor.connect.trace_context import delivering
from conveyor.errors import ConfigurationError
from conveyor.messages import Deserializers, Message
from unit.processing.fakes import FakeRaw

CONTEXTS = [f"00-{'a' * 32}-{n:016x}-01" for n in (1, 2)]


class Loop:
    """Stands for the server's loop: keeps what deliver hands it."""

    def __init__(self) -> None:
        self.pushed: list[tuple[str, Any]] = []

    def call_soon_threadsafe(self, function: Callable[..., Any], outgoing: list[Any]) -> None:
        self.pushed.extend((channel, json.loads(text)) for channel, text in outgoing)


def pushed(sink: Broadcast, traced: bool) -> list[Any]:
    loop = Loop()
    sink._loop = loop  # type: ignore[assignment]
    records = [Message(FakeRaw(n, key=b"k", value=b'{"n": 1}'), Deserializers()) for n in (1, 2)]
    if traced:
        with delivering(records, CONTEXTS):
            assert [delivery_traceparent(record) for record in records] == CONTEXTS
            assert sink.deliver(records) == [None, None]
    else:
        assert sink.deliver(records) == [None, None]
    assert [delivery_traceparent(record) for record in records] == [None, None], "outside"
    return [document for _channel, document in loop.pushed]


def test_each_record_carries_the_context_of_the_span_delivering_it() -> None:
    documents = pushed(Broadcast(port=0), traced=True)
    assert [document["traceparent"] for document in documents] == CONTEXTS
    assert all(document["payload"] == {"n": 1} for document in documents)


def test_without_tracing_or_with_no_trace_field_the_record_is_as_before() -> None:
    for sink, traced in ((Broadcast(port=0), False), (Broadcast(port=0, trace_field=None), True)):
        documents = pushed(sink, traced)
        assert all("traceparent" not in document for document in documents)
        assert all(document["payload"] == {"n": 1} for document in documents)


def test_a_custom_encoding_gets_the_field_when_it_makes_an_object_without_it() -> None:
    named = pushed(Broadcast(port=0, encode=lambda r: {"o": r.offset}, trace_field="tp"), True)
    assert named == [{"o": 1, "tp": CONTEXTS[0]}, {"o": 2, "tp": CONTEXTS[1]}]
    assert pushed(Broadcast(port=0, encode=lambda r: [r.offset]), True) == [[1], [2]]
    own = pushed(Broadcast(port=0, encode=lambda r: {"traceparent": "mine"}), True)
    assert own == [{"traceparent": "mine"}] * 2, "the encoder's own field is kept"


@pytest.mark.parametrize("field", ["", 7])
def test_a_bad_trace_field_is_named(field: Any) -> None:
    with pytest.raises(ConfigurationError) as refused:
        Broadcast(trace_field=field)
    assert refused.value.setting == "trace_field"
