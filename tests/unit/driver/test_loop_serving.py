"""Loop serving's checks, without a broker (:mod:`conveyor.driver.loop_serving`): a tested
confluent-kafka on CPython is served; each refusal (the switch, another interpreter, an untested
confluent-kafka, librdkafka not told for certain, a producer whose ``rd_kafka_t`` is not proven)
keeps the poller thread and says why in one log line per process; and nothing reaches
librdkafka before the pointer is proven."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

import confluent_kafka
import pytest

from conveyor.driver import loop_serving as module
from conveyor.driver.clients import create_producer
from conveyor.driver.producers import ProducerClient

TOLD = "Producers' delivery reports are served by their poller threads, not by event loops: "
NO_BROKER = {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}


@pytest.fixture(autouse=True)
def fresh_process(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> Iterator[None]:
    """As in a new process: nothing told yet, the switch unset, librdkafka not looked up."""
    monkeypatch.setattr(module._Told, "done", False)
    monkeypatch.delenv(module.SWITCH, raising=False)
    module._librdkafka.cache_clear()
    caplog.set_level(logging.INFO, "conveyor.driver")
    yield
    module._librdkafka.cache_clear()


@pytest.fixture
def opaque_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pointers handed to librdkafka's ``rd_kafka_opaque`` (the first librdkafka call made
    with a pointer read out of the client), recorded on the way through."""
    library = module._librdkafka()
    assert library is not None
    calls: list[int] = []
    real = library.opaque

    def opaque(rk: int) -> Any:
        calls.append(rk)
        return real(rk)

    monkeypatch.setattr(library, "opaque", opaque)
    return calls


def producer(**callbacks: Any) -> Any:
    """A confluent-kafka producer as Conveyor makes it (an ``error_cb``, Conveyor's logger)."""
    return create_producer(NO_BROKER, on_error=lambda _error: None, **callbacks)


def told(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [
        (r.levelno, r.getMessage()[len(TOLD) :])
        for r in caplog.records
        if r.name == "conveyor.driver" and r.getMessage().startswith(TOLD)
    ]


def refused_twice(caplog: pytest.LogCaptureFixture, make: Callable[[], Any] = producer) -> str:
    """Two producers are refused; the one line told (at INFO), without its fixed start."""
    for _ in range(2):
        assert module.loop_serving(make(), {}, lambda: None) is None
    [(level, reason)] = told(caplog)
    assert level == logging.INFO
    return reason


def test_a_tested_confluent_kafka_on_cpython_is_served_and_nothing_is_told(
    caplog: pytest.LogCaptureFixture, opaque_calls: list[int]
) -> None:
    assert module._confluent_kafka_version() in module.TESTED_CONFLUENT_KAFKA, "the installed one"
    assert module.loop_serving_available()
    client = ProducerClient(
        NO_BROKER, "served", on_error=lambda _error: None, on_fatal=lambda _error: None
    )
    try:
        assert client.loop_serving is not None
        assert len(opaque_calls) == 1
    finally:
        client.close(0.0)

    class Subclassed(confluent_kafka.Producer):
        """A Python subclass: its instance dict and type come first among its referents."""

    kafka = Subclassed({"error_cb": lambda _error: None, "stats_cb": lambda _json: None})
    serving = module.loop_serving(kafka, {}, lambda: None)
    assert serving is not None
    serving.close()
    assert told(caplog) == []


@pytest.mark.parametrize(
    ("version", "named"),
    [("2.99.0", "2.99.0"), ("2.16.0", "2.16.0"), (("2.3.0", 0x2030000), "2.3.0")],
)
def test_an_untested_confluent_kafka_keeps_the_poller_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, version: Any, named: str
) -> None:
    monkeypatch.setattr(confluent_kafka, "version", lambda: version)
    monkeypatch.setattr(module, "_loaded_librdkafka", _never_looked_up)
    assert not module.loop_serving_available()
    reason = refused_twice(caplog)
    assert f"confluent-kafka {named} is not a version" in reason
    assert "(2.16.1)" in reason
    assert "no switch turns it on" in reason


def test_another_interpreter_keeps_the_poller_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clients = [producer(), producer()]  # made before: only the check sees another interpreter
    monkeypatch.setattr(sys.implementation, "name", "pypy")
    monkeypatch.setattr(module, "_loaded_librdkafka", _never_looked_up)
    reason = refused_twice(caplog, clients.pop)
    assert reason.startswith("the interpreter is pypy, not CPython")


def test_the_switch_keeps_the_poller_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CONVEYOR_LOOP_SERVING", "0")
    monkeypatch.setattr(module, "_loaded_librdkafka", _never_looked_up)
    assert not module.loop_serving_available()
    assert refused_twice(caplog).startswith("CONVEYOR_LOOP_SERVING=0 switches it off")


def test_a_librdkafka_not_told_for_certain_keeps_the_poller_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """E.g. two librdkafka copies loaded, or none exporting the queue-event call."""
    monkeypatch.setattr(module, "_loaded_librdkafka", lambda: None)
    assert not module.loop_serving_available()
    assert refused_twice(caplog) == (
        "the librdkafka that confluent-kafka calls could not be told for certain"
    )


@pytest.mark.parametrize(
    ("callback_words", "make"),
    [
        # read as a changed layout would be: one field more before the callbacks (all three set)
        ((2, 3, 4), lambda: producer(on_statistics=lambda _json: None)),
        ((1, 2, 3), lambda: confluent_kafka.Producer(NO_BROKER)),  # no callback to confirm
        ((1, 2, 3), type("Producer", (), {})),  # not confluent-kafka's object (a class of it)
    ],
    ids=["a field more before the callbacks", "no callback to confirm", "not confluent's"],
)
def test_a_producer_whose_pointer_is_not_proven_is_refused_before_librdkafka_sees_it(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    opaque_calls: list[int],
    callback_words: tuple[int, ...],
    make: Callable[[], Any],
) -> None:
    monkeypatch.setattr(module, "_CALLBACK_WORDS", callback_words)
    reason = refused_twice(caplog, make)
    assert reason.startswith("the producer object is not laid out as confluent-kafka 2.16.1")
    assert opaque_calls == [], "no pointer reached librdkafka"


def test_a_pointer_librdkafka_does_not_own_is_refused(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, opaque_calls: list[int]
) -> None:
    """The last step: librdkafka's opaque of the proven pointer must be the client itself."""
    library = module._librdkafka()
    assert library is not None

    def disowned(rk: int) -> int:
        opaque_calls.append(rk)
        return 0

    monkeypatch.setattr(library, "opaque", disowned)
    reason = refused_twice(caplog)
    assert reason.startswith("the producer object is not laid out")
    assert len(opaque_calls) == 2


def test_only_the_first_refusal_of_the_process_is_told(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CONVEYOR_LOOP_SERVING", "0")
    assert module.loop_serving(producer(), {}, lambda: None) is None
    monkeypatch.delenv("CONVEYOR_LOOP_SERVING")
    monkeypatch.setattr(confluent_kafka, "version", lambda: "2.99.0")
    assert module.loop_serving(producer(), {}, lambda: None) is None
    assert [reason.split(" ")[0] for _level, reason in told(caplog)] == ["CONVEYOR_LOOP_SERVING=0"]


def test_a_producer_with_a_token_provider_is_not_served_and_nothing_is_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Not a refusal of the process: that producer's token provider may block the loop."""
    assert module.loop_serving(producer(), {"oauth_cb": print}, lambda: None) is None
    assert told(caplog) == []


def _never_looked_up() -> None:
    raise AssertionError("librdkafka was looked up although an earlier check refused")
