"""Build librdkafka clients (through confluent-kafka) and map their set-up errors."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import confluent_kafka
import confluent_kafka.admin
from confluent_kafka import KafkaException

from conveyor.driver.errors import configuration_error
from conveyor.driver.oauth import prime_token
from conveyor.instrumentation.background_log import BACKGROUND_LOG

__all__ = [
    "LIBRDKAFKA_LOG",
    "LIBRDKAFKA_LOGGER",
    "LibrdkafkaLog",
    "check_settings",
    "client_versions",
    "create_admin",
    "create_producer",
]

LIBRDKAFKA_LOGGER = logging.getLogger("conveyor.librdkafka")
"""Where librdkafka's own log lines go."""

# Lost connections: every failed reconnect is a line (hundreds per outage). The clients'
# connection watch says it once instead, so these stay at DEBUG.
_CONNECTION_FACILITIES = frozenset({"FAIL", "BROKERFAIL", "CONNECT", "REQTMOUT"})
_RETRYING = re.compile(r"retry|in progress|not available|not yet", re.IGNORECASE)
_SHAPE = re.compile(r"\d+")


class LibrdkafkaLog:
    """librdkafka's ``logger``: maps its lines onto ``conveyor.librdkafka`` without ever
    blocking the thread librdkafka logs from (the listener's, while it polls).

    - lost connections (facilities ``FAIL``, ``BROKERFAIL`` ...) go to DEBUG: the clients'
      connection watch reports an outage once, with reminders, and its end;
    - conditions librdkafka retries by itself ("Coordinator load in progress: retrying") go to
      INFO, and to WARNING only when the same one persists for ``persist`` seconds;
    - everything else keeps its level, each kind of line at most once per ``interval`` seconds
      (the next one says how many were held back).
    """

    def __init__(
        self,
        logger: logging.Logger = LIBRDKAFKA_LOGGER,
        interval: float = 10.0,
        persist: float = 30.0,
    ) -> None:
        self.logger = logger
        self.interval = interval
        self.persist = persist
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], list[float]] = {}  # first seen, last written, held

    def log(self, level: int, _format: str, facility: str, name: str, text: str) -> None:
        """Called by librdkafka (through confluent-kafka) for each line."""
        if facility in _CONNECTION_FACILITIES:
            self._write(logging.DEBUG, facility, name, text, 0)
            return
        key = (facility, _SHAPE.sub("N", text))
        now = time.monotonic()
        transient = level >= logging.WARNING and _RETRYING.search(text) is not None
        with self._lock:
            state = self._seen.get(key)
            if state is None:
                if len(self._seen) > 1000:  # bounded: old kinds of line are forgotten
                    self._seen.clear()
                state = self._seen[key] = [now, now, 0.0]
                held = 0
            elif now - state[1] >= (self.persist if transient else self.interval):
                state[1] = now
                held, state[2] = int(state[2]), 0.0
            else:
                state[2] += 1
                return
            persisting = now - state[0] >= self.persist
        if transient:
            level = logging.WARNING if persisting else logging.INFO
        self._write(level, facility, name, text, held)

    def _write(self, level: int, facility: str, name: str, text: str, held: int) -> None:
        more = f" ({held} more like it)" if held else ""
        BACKGROUND_LOG.log(self.logger, level, "%s [%s] %s%s", facility, name, text, more)


LIBRDKAFKA_LOG = LibrdkafkaLog()
"""The ``logger`` every librdkafka client Conveyor builds is given."""


class _Discard:
    """A logger for the throwaway clients that check settings: they have nothing to say worth
    hearing (a consumer warns about producer settings and the other way round)."""

    def log(self, *_args: Any, **_kwargs: Any) -> None:
        return None


_SILENT = _Discard()


def client_versions() -> dict[str, str]:
    """The confluent-kafka and librdkafka versions in use."""
    return {
        "confluent-kafka": str(confluent_kafka.version()),
        "librdkafka": confluent_kafka.libversion()[0],
    }


def create_producer(
    config: Mapping[str, Any],
    *,
    on_error: Callable[[Any], None] | None = None,
    on_statistics: Callable[[str], None] | None = None,
) -> Any:
    """A librdkafka producer for ``config`` (librdkafka names), its logs routed to ``logging``.

    Raises:
        ConfigurationError: librdkafka refused a setting; the error names it.
    """
    settings = dict(config)
    settings.setdefault("logger", LIBRDKAFKA_LOG)
    if on_error is not None:
        settings["error_cb"] = on_error
    if on_statistics is not None:
        settings["stats_cb"] = on_statistics
    prime_token(settings)
    try:
        return confluent_kafka.Producer(settings)
    except (KafkaException, ValueError, TypeError) as exc:
        raise configuration_error(exc, "producer", config) from exc


def create_admin(config: Mapping[str, Any]) -> Any:
    """A librdkafka admin client for ``config``.

    Raises:
        ConfigurationError: librdkafka refused a setting; the error names it.
    """
    settings = dict(config)
    settings.setdefault("logger", LIBRDKAFKA_LOG)
    prime_token(settings)
    try:
        return confluent_kafka.admin.AdminClient(settings)
    except (KafkaException, ValueError, TypeError) as exc:
        raise configuration_error(exc, "admin client", config) from exc


def check_settings(config: Mapping[str, Any], kind: str) -> None:
    """Let librdkafka check ``config`` for a ``"consumer"`` or a ``"producer"`` without
    connecting anywhere (a client without brokers, closed at once): a misspelled name, a value
    of the wrong type or out of range, a missing companion setting.

    Raises:
        ConfigurationError: librdkafka refused a setting; the error names it.
    """
    # without an oauth_cb: a throwaway client would ask the user's token provider for a token
    settings = {k: v for k, v in config.items() if k not in ("bootstrap.servers", "oauth_cb")}
    settings["logger"] = _SILENT
    try:
        if kind == "consumer":
            settings.setdefault("group.id", "conveyor-settings-check")
            confluent_kafka.Consumer(settings).close()
        else:
            confluent_kafka.Producer(settings).flush(0)
    except (KafkaException, ValueError, TypeError) as exc:
        raise configuration_error(exc, kind, config) from exc
