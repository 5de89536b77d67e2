"""Route options are checked when declared, and a bad one is named."""

from __future__ import annotations

from typing import Any

import pytest

from conveyor import App, ConfigurationError, Consumer


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
