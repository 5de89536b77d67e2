"""Log lines Conveyor writes from its own threads: a background writer that never blocks the
caller, and a rate limit for warnings that repeat per message."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time

import pytest

from conveyor import App
from conveyor.instrumentation import Monitor, events
from conveyor.instrumentation.background_log import BackgroundLog
from conveyor.instrumentation.json_log import FIELDS, JsonFormatter
from conveyor.instrumentation.logging_listener import LoggingListener
from conveyor.instrumentation.rate_limit import RateLimitedLog


class BlockedHandler(logging.Handler):
    """A handler stuck like a full pipe until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.release.wait(10)
        self.lines.append(record.getMessage())


def test_a_blocked_handler_does_not_block_the_caller() -> None:
    logger = logging.getLogger("conveyor.test.blocked")
    logger.propagate = False
    handler = BlockedHandler()
    logger.addHandler(handler)
    writer = BackgroundLog()
    try:
        started = time.monotonic()
        for n in range(100):
            writer.log(logger, logging.ERROR, "line %d", n)
        assert time.monotonic() - started < 1.0, "the caller went on while the handler hung"
        assert not writer.flush(0.1), "nothing written yet"
        handler.release.set()
        assert writer.flush(10)
        assert handler.lines == [f"line {n}" for n in range(100)]
    finally:
        handler.release.set()
        logger.removeHandler(handler)


def test_records_keep_the_callers_thread_and_exception(caplog: pytest.LogCaptureFixture) -> None:
    writer = BackgroundLog()
    logger = logging.getLogger("conveyor.test.records")
    try:
        raise ValueError("boom")
    except ValueError as error:
        writer.log(logger, logging.ERROR, "failed: %s", "x", exc_info=error)
    assert writer.flush(5)
    [record] = [r for r in caplog.records if r.name == "conveyor.test.records"]
    assert record.threadName == threading.current_thread().name
    assert record.exc_info is not None
    assert "boom" in caplog.text


def test_a_repeated_warning_is_logged_once_per_interval_with_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    limited = RateLimitedLog(logging.getLogger("conveyor.test.limited"), interval=0.2)
    for n in range(20):
        limited.warning("poison", "skipping offset %d", n)
    limited.warning("other", "another kind")
    time.sleep(0.25)
    limited.warning("poison", "skipping offset %d", 99)
    lines = [r.getMessage() for r in caplog.records if r.name == "conveyor.test.limited"]
    assert lines == [
        "skipping offset 0",
        "another kind",
        "skipping offset 99 (19 more like it in the last 0.2 s)",
    ]


def test_batches_and_deliveries_are_listened_to_only_at_debug() -> None:
    """Consumed batches and deliveries cost an event per batch or message while someone
    listens, and a line each is noise at INFO: the logging listener listens only at DEBUG, as
    of attach() or refresh()."""
    logger = logging.getLogger("conveyor.test.levels")
    listener = LoggingListener(logger)
    monitor = Monitor()
    logger.setLevel(logging.WARNING)
    listener.attach(monitor)
    assert events.CONSUMER_CONSUMED not in monitor.subscribed
    assert events.MESSAGE_ACKNOWLEDGED not in monitor.subscribed
    assert events.ERROR_OCCURRED in monitor.subscribed, "errors always"
    logger.setLevel(logging.INFO)
    listener.refresh()
    assert events.CONSUMER_CONSUMED not in monitor.subscribed, "no line per batch at INFO"
    assert events.MESSAGE_ACKNOWLEDGED not in monitor.subscribed
    logger.setLevel(logging.DEBUG)
    listener.refresh()
    assert {events.CONSUMER_CONSUMED, events.MESSAGE_ACKNOWLEDGED} <= monitor.subscribed
    logger.setLevel(logging.WARNING)
    listener.refresh()
    assert events.CONSUMER_CONSUMED not in monitor.subscribed
    logger.setLevel(logging.NOTSET)


def test_an_app_listens_to_batches_if_logging_was_set_up_after_it_was_built() -> None:
    logger = logging.getLogger("conveyor")
    level = logger.level
    try:
        logger.setLevel(logging.WARNING)
        app = App(client_id="levels", kafka={"bootstrap.servers": "127.0.0.1:1"})
        assert events.CONSUMER_CONSUMED not in app.monitor.subscribed
        logger.setLevel(logging.DEBUG)
        assert app._logging is not None
        app._logging.refresh()  # what start() does first
        assert events.CONSUMER_CONSUMED in app.monitor.subscribed
    finally:
        logger.setLevel(level)


def test_json_lines_carry_the_fields_and_survive_what_json_cannot_hold() -> None:
    formatter = JsonFormatter()
    logger = logging.getLogger("conveyor.test.json")
    record = logger.makeRecord(
        logger.name, logging.INFO, "x", 1, "assigned %s", ("t/0",), None,
        extra={FIELDS: {"group": "shop", "partition": 0, "level": "not the record's"}},
    )  # fmt: skip
    line = json.loads(formatter.format(record))
    assert line["message"] == "assigned t/0"
    assert line["level"] == "INFO", "a field does not overwrite the line's own"
    assert (line["group"], line["partition"], line["process"]) == ("shop", 0, os.getpid())
    odd = logger.makeRecord(
        logger.name, logging.ERROR, "x", 1, "odd", (), None,
        extra={FIELDS: {"lag": float("nan"), "by_partition": {0: 1.5}, "who": object()}},
    )  # fmt: skip
    line = json.loads(formatter.format(odd))  # valid JSON, not a lost line
    assert line["lag"] == "nan"
    assert line["by_partition"] == {"0": 1.5}
    try:
        raise ValueError("boom")
    except ValueError:
        failed = logger.makeRecord(logger.name, logging.ERROR, "x", 1, "failed", (), sys.exc_info())
    assert "ValueError: boom" in json.loads(formatter.format(failed))["exception"]
