"""Route options are checked when declared; dead letter queue settings decide retries."""

from __future__ import annotations

from typing import Any

import pytest

from conveyor import App, ConfigurationError, Consumer
from conveyor.routing.dead_letter_queue import parse_dead_letter_queue


class Noop(Consumer):
    def consume(self) -> None:
        pass


def routes() -> Any:
    return App(client_id="unit", kafka={"bootstrap.servers": "127.0.0.1:1"}).routes


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"dead_letter_queue": {"max_retries": 1}}, "topic"),
        ({"dead_letter_queue": {"topic": "dlq", "max_retries": -1}}, "max_retries"),
        ({"dead_letter_queue": {"topic": "dlq", "dispatch_method": "fax"}}, "dispatch_method"),
        ({"dead_letter_queue": {"topic": "dlq", "colour": "red"}}, "colour"),
        ({"dead_letter_queue": {"topic": "orders"}}, "topic"),
        ({"pause_timeout": 0}, "pause_timeout"),
        ({"pause_with_exponential_backoff": "yes"}, "pause_with_exponential_backoff"),
        ({"initial_offset": "middle"}, "initial_offset"),
        ({"assign": [-1]}, "assign"),
    ],
)
def test_bad_route_options_are_named(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        routes().topic("orders", Noop, **options)
    assert raised.value.setting == named


def test_retries_then_dispatch_or_skip() -> None:
    dlq = parse_dead_letter_queue("orders", {"topic": "orders_dlq", "max_retries": 2})
    assert dlq is not None
    error = RuntimeError("x")
    assert [dlq.decide(error, attempt) for attempt in (1, 2, 3)] == ["retry", "retry", "dispatch"]
    skipping = parse_dead_letter_queue("orders", {"topic": False, "max_retries": 0})
    assert skipping is not None
    assert skipping.decide(error, 1) == "skip"


def test_a_strategy_decides_per_error() -> None:
    def strategy(error: BaseException, attempt: int) -> str:
        return "dispatch" if isinstance(error, ValueError) else ("retry" if attempt < 5 else "skip")

    dlq = parse_dead_letter_queue("orders", {"topic": "dlq", "strategy": strategy})
    assert dlq is not None
    assert dlq.decide(ValueError("bad json"), 1) == "dispatch"
    assert dlq.decide(TimeoutError(), 4) == "retry"
    assert dlq.decide(TimeoutError(), 5) == "skip"
    broken = parse_dead_letter_queue("orders", {"topic": "dlq", "strategy": lambda e, a: "maybe"})
    assert broken is not None
    with pytest.raises(ConfigurationError, match="maybe"):
        broken.decide(RuntimeError(), 1)
