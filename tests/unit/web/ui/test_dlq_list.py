"""The DLQ list stands when one DLQ cannot be counted: Kafka not answering in time for one
topic's watermarks leaves that row's count unknown, with why, and every other row as read
(before, the whole page failed with a 504 and listed nothing)."""

from __future__ import annotations

from typing import Any

from conveyor import App, Consumer
from conveyor.errors import KafkaError
from conveyor.web.ui.explorer_views import ExplorerViews
from conveyor.web.ui.rendering import environment

from .test_action_pages import PAGE


class Noop(Consumer):
    def consume(self) -> None:
        pass


class Topics:
    """The admin's topic listing the page reads first."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def list_topics(self) -> list[str]:
        return self.names


class Counts:
    """Watermarks per topic; one topic's read runs out of time as librdkafka's would."""

    def __init__(self, counts: dict[str, int], slow: str) -> None:
        self.counts, self.slow = counts, slow

    def partitions(self, topic: str) -> list[dict[str, int]]:
        if topic == self.slow:
            raise KafkaError(f"watermarks of {topic}/0: timed out", name="_TIMED_OUT")
        return [
            {"partition": 0, "low": 0, "high": self.counts[topic], "messages": self.counts[topic]}
        ]


def test_one_dlq_that_cannot_be_counted_leaves_the_rest_of_the_list() -> None:
    app = App(client_id="dlq-list", kafka={"bootstrap.servers": "127.0.0.1:1"})
    app.routes.topic("orders", Noop, dead_letter_queue={"topic": "orders_dlq"})
    app.routes.topic("payments", Noop, dead_letter_queue={"topic": "payments_dlq"})
    admin = Topics(["orders", "payments", "orders_dlq", "payments_dlq"])
    explorer: Any = Counts({"orders_dlq": 3}, slow="payments_dlq")
    views = ExplorerViews(app, lambda: admin, explorer)  # type: ignore[arg-type,return-value]

    rows = {row["name"]: row for row in views.dlqs().data["dlqs"]}

    assert rows["orders_dlq"]["messages"] == 3
    assert rows["orders_dlq"]["unread"] is None
    assert rows["payments_dlq"]["exists"] is True, "still listed, with its link"
    assert rows["payments_dlq"]["messages"] is None
    assert "timed out" in rows["payments_dlq"]["unread"]

    html = environment().get_template("dlqs.html").render(**PAGE, dlqs=list(rows.values()))
    assert 'href="/dlq/payments_dlq"' in html
    assert 'title="not counted: watermarks of payments_dlq/0: timed out"' in html
