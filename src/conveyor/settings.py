"""The app's settings: defaults (Karafka's where it has one) and the checks that name a bad one."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from typing import Any

from conveyor.driver.clients import check_settings
from conveyor.driver.oauth import oauth_callback
from conveyor.environment import BOOTSTRAP_ENV, resolve
from conveyor.errors import ConfigurationError
from conveyor.masking import mask
from conveyor.validation import check_count, check_kafka_values, check_seconds

__all__ = [
    "DEFAULT_CLIENT_ID",
    "AppSettings",
    "build_app_settings",
    "check_group_protocol",
    "consumer_only",
    "producer_settings",
    "settings_from_environment",
]

# What the new consumer group protocol (KIP-848, group.protocol=consumer) moves to the broker.
_NOT_UNDER_CONSUMER_PROTOCOL = {
    "session.timeout.ms": "the broker sets it (group.consumer.session.timeout.ms, or the "
    "group's consumer.session.timeout.ms)",
    "heartbeat.interval.ms": "the broker sets it (group.consumer.heartbeat.interval.ms, or the "
    "group's consumer.heartbeat.interval.ms)",
    "partition.assignment.strategy": "the broker assigns the partitions: pick its assignor with "
    "group.remote.assignor (uniform or range)",
    "group.protocol.type": "it belongs to the classic protocol",
}


@dataclass(frozen=True, repr=False)
class AppSettings:
    """The app's validated settings (Karafka's defaults where it has them). Its ``repr``
    masks secrets (see :mod:`conveyor.masking`)."""

    client_id: str
    kafka: Mapping[str, Any]
    concurrency: int = 5
    max_messages: int = 100
    max_wait_time: float = 1.0
    shutdown_timeout: float = 60.0
    pause_timeout: float = 1.0
    pause_max_timeout: float = 30.0
    pause_with_exponential_backoff: bool = True
    max_listeners: int = 2
    """The most listeners (threads, each with its own librdkafka consumer) that read the routes
    of one consumer group declared outside any subscription group: their topics are packed
    over them by partition count (see :mod:`conveyor.routing.packing`); 1 reads them all with
    one listener."""
    inline_quick_batches: bool = True
    """Let a listener run a small batch itself when its partition's jobs have been quick (see
    :mod:`conveyor.processing.executor`); ``False`` hands every batch to the worker pool."""
    gc_threshold: int | None = 50_000
    """The garbage collector's first threshold while the app runs (see
    :mod:`conveyor.processing.collector`); ``None`` leaves the collector alone."""
    oauth_token_provider: Callable[[], tuple[Any, ...]] | None = None
    """Gives OAUTHBEARER tokens to every client the app makes (see ``App``)."""
    event_loop_blocked_after: float | None = 0.25
    """Seconds one callback may hold the app's event loop (where the lanes of ``async def
    consume()`` run together) before ``event_loop.blocked`` names it; ``None``: not watched."""
    instance_id: str | None = None
    """This process's stable name among the app's processes (its transactional producer's
    ``transactional.id``); ``None``: the host name and the process's slot on the host."""
    state_dir: str = "state"
    """The folder of the routes' state stores (see :mod:`conveyor.state`): relative to the
    working directory unless absolute; laid out by group and by the process's slot, so that a
    restarted process reopens its predecessor's stores."""
    state_flush_interval: float = 1.0
    """Seconds the store writes of a partition's batches may wait before they are flushed to
    the changelogs and the local stores, and the batches' offsets marked (also when the
    partition has nothing more to run); 0 flushes each batch at its end. A key written by
    many batches in between costs one changelog record."""
    transaction_interval: float = 0.0
    """Seconds one Kafka transaction stays open for the consumers' ``with self.transaction():``
    blocks to join (see :mod:`conveyor.processing.joint_transaction`): their outputs, offsets
    and store writes commit together when it is over; 0 commits each block at its end."""
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)
    """Where each setting came from: ``argument``, ``$VARIABLE`` (the environment) or
    ``default``; librdkafka's as ``kafka: <name>`` (see :mod:`conveyor.environment`)."""

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{f.name}={mask(value) if f.name == 'kafka' else value!r}"
            for f in dataclass_fields(self)
            if f.name != "sources"
            for value in (getattr(self, f.name),)
        )
        return f"AppSettings({fields})"


DEFAULT_CLIENT_ID = "conveyor"
_DEFAULTS = {
    name: getattr(AppSettings, name)
    for name in (
        "concurrency",
        "max_messages",
        "max_wait_time",
        "shutdown_timeout",
        "pause_timeout",
        "pause_max_timeout",
        "pause_with_exponential_backoff",
        "gc_threshold",
        "inline_quick_batches",
        "max_listeners",
        "instance_id",
        "event_loop_blocked_after",
        "state_dir",
        "state_flush_interval",
        "transaction_interval",
    )
}


def settings_from_environment(
    arguments: Mapping[str, Any],
    kafka: Any,
    *,
    oauth_token_provider: Any = None,
    unknown: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> AppSettings:
    """The app's settings by the one precedence (see :mod:`conveyor.environment`): each of
    ``arguments`` given in code, else its environment variable, else its default; ``kafka``'s
    settings over the environment's. Each setting's source is kept in ``sources``.

    Raises:
        ConfigurationError: as :func:`build_app_settings`; a bad value read from the
            environment names its variable.
    """
    resolved = resolve(arguments, kafka, environ)
    values = {
        name: value for name, value in resolved.values.items() if name not in ("client_id", "kafka")
    }
    try:
        settings = build_app_settings(
            resolved.values.get("client_id", DEFAULT_CLIENT_ID),
            resolved.values["kafka"],
            oauth_token_provider=oauth_token_provider,
            unknown=unknown,
            **{**_DEFAULTS, **values},
        )
    except ConfigurationError as exc:
        source = resolved.sources.get(exc.setting or "") or resolved.sources.get(
            f"kafka: {exc.setting}"
        )
        if source is None or not source.startswith("$"):
            raise
        raise ConfigurationError(f"{exc} (from {source})", exc.setting) from None
    return replace(settings, sources=resolved.sources)


def _folder(name: str, value: Any) -> str:
    """``value`` as a folder's path (a ``Path`` or a string), or a clear error."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{name} must be a folder's path, got {value!r}", name)
    return value


def build_app_settings(
    client_id: Any,
    kafka: Any,
    *,
    concurrency: Any,
    max_messages: Any,
    max_wait_time: Any,
    shutdown_timeout: Any,
    pause_timeout: Any,
    pause_max_timeout: Any,
    pause_with_exponential_backoff: Any,
    gc_threshold: Any,
    inline_quick_batches: Any = AppSettings.inline_quick_batches,
    max_listeners: Any = AppSettings.max_listeners,
    oauth_token_provider: Any = None,
    instance_id: Any = None,
    event_loop_blocked_after: Any = AppSettings.event_loop_blocked_after,
    state_dir: Any = AppSettings.state_dir,
    state_flush_interval: Any = AppSettings.state_flush_interval,
    transaction_interval: Any = AppSettings.transaction_interval,
    unknown: Mapping[str, Any] | None = None,
) -> AppSettings:
    """Check every setting and return them frozen (the defaults are :class:`AppSettings`'s,
    which ``App``'s signature names).

    Raises:
        ConfigurationError: an unknown setting, a wrong type or an impossible value (named).
    """
    if unknown:
        name = sorted(unknown)[0]
        hint = " (librdkafka settings go in kafka={...})" if "." in name or "_" not in name else ""
        raise ConfigurationError(f"App got an unknown setting {name!r}{hint}", name)
    if not isinstance(client_id, str) or not client_id:
        raise ConfigurationError(
            f"client_id must be a non-empty string, got {client_id!r}", "client_id"
        )
    _check_kafka(kafka)
    check_count("concurrency", concurrency)
    check_count("max_messages", max_messages)
    check_count("max_listeners", max_listeners)
    for name, value in (
        ("max_wait_time", max_wait_time),
        ("shutdown_timeout", shutdown_timeout),
        ("pause_timeout", pause_timeout),
        ("pause_max_timeout", pause_max_timeout),
    ):
        check_seconds(name, value)
    if pause_max_timeout < pause_timeout:
        raise ConfigurationError(
            f"pause_max_timeout ({pause_max_timeout}) must not be below pause_timeout ({pause_timeout})",
            "pause_max_timeout",
        )
    if not isinstance(pause_with_exponential_backoff, bool):
        raise ConfigurationError(
            "pause_with_exponential_backoff must be True or False",
            "pause_with_exponential_backoff",
        )
    if not isinstance(inline_quick_batches, bool):
        raise ConfigurationError(
            "inline_quick_batches must be True or False", "inline_quick_batches"
        )
    if gc_threshold is not None:
        check_count("gc_threshold", gc_threshold, minimum=100)
    if event_loop_blocked_after is not None:
        check_seconds("event_loop_blocked_after", event_loop_blocked_after)
    _check_instance_id(instance_id)
    state_dir, state_flush_interval = _state_settings(state_dir, state_flush_interval)
    _check_transaction_interval(transaction_interval, kafka)
    kafka = dict(kafka)
    check_group_protocol(kafka)
    if oauth_token_provider is not None:
        kafka["oauth_cb"] = oauth_callback(oauth_token_provider, kafka)
    # librdkafka checks the settings now, as each client will see them, so that a misspelled
    # name or a bad value fails here and not in a listener thread at start.
    check_settings({**kafka, "enable.auto.commit": False}, "consumer")
    check_settings(producer_settings(kafka), "producer")
    return AppSettings(
        client_id=client_id,
        kafka=kafka,
        concurrency=concurrency,
        max_messages=max_messages,
        max_wait_time=float(max_wait_time),
        shutdown_timeout=float(shutdown_timeout),
        pause_timeout=float(pause_timeout),
        pause_max_timeout=float(pause_max_timeout),
        pause_with_exponential_backoff=pause_with_exponential_backoff,
        gc_threshold=gc_threshold,
        inline_quick_batches=inline_quick_batches,
        max_listeners=max_listeners,
        oauth_token_provider=oauth_token_provider,
        instance_id=instance_id,
        event_loop_blocked_after=(
            None if event_loop_blocked_after is None else float(event_loop_blocked_after)
        ),
        state_dir=state_dir,
        state_flush_interval=state_flush_interval,
        transaction_interval=float(transaction_interval),
    )


def _check_instance_id(instance_id: Any) -> None:
    if instance_id is not None and (
        not isinstance(instance_id, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,200}", instance_id)
    ):
        raise ConfigurationError(
            "instance_id must be None or a string of 1-200 letters, digits, '.', '_' or '-' "
            f"(a pod's name, say), got {instance_id!r}",
            "instance_id",
        )


def _check_transaction_interval(interval: Any, kafka: Any) -> None:
    """Seconds (0: a transaction per block), under half the transaction timeout."""
    if not isinstance(interval, bool) and interval == 0:
        return
    check_seconds("transaction_interval", interval)
    timeout = float(dict(kafka or {}).get("transaction.timeout.ms", 60_000)) / 1000
    if interval >= timeout / 2:
        raise ConfigurationError(
            f"transaction_interval ({interval} s) must be well under the transaction timeout "
            f"(transaction.timeout.ms, {timeout:g} s): under half of it",
            "transaction_interval",
        )


def _state_settings(state_dir: Any, state_flush_interval: Any) -> tuple[str, float]:
    """The state stores' settings, checked: their folder, and the flush interval (0: each
    batch's writes at its end)."""
    if isinstance(state_flush_interval, bool) or state_flush_interval != 0:
        check_seconds("state_flush_interval", state_flush_interval)
    return _folder("state_dir", state_dir), float(state_flush_interval)


def _check_kafka(kafka: Any) -> None:
    """The ``kafka`` dict: a mapping of names to values librdkafka takes, with the brokers."""
    if kafka is None:
        raise ConfigurationError(
            f'no Kafka to connect to: give kafka={{"bootstrap.servers": ...}} or set {BOOTSTRAP_ENV}',
            "bootstrap.servers",
        )
    if not isinstance(kafka, Mapping):
        raise ConfigurationError(
            'kafka must be a dict of librdkafka settings with "bootstrap.servers"', "kafka"
        )
    for key in kafka:
        if not isinstance(key, str):
            raise ConfigurationError(f"kafka setting names must be strings, got {key!r}", "kafka")
    check_kafka_values(kafka)
    if not kafka.get("bootstrap.servers"):
        raise ConfigurationError(
            f'kafka["bootstrap.servers"] is required (or set {BOOTSTRAP_ENV})', "bootstrap.servers"
        )


_CONSUMER_ONLY_PREFIXES = (
    "group.",
    "auto.offset.reset",
    "enable.auto.",
    "auto.commit.",
    "session.timeout",
    "heartbeat.",
    "max.poll.",
    "partition.assignment",
    "fetch.",
    "isolation.level",
    "enable.partition.eof",
    "queued.",
    "check.crcs",
)


def consumer_only(name: str) -> bool:
    """Whether librdkafka setting ``name`` means something to consumers only."""
    return name.startswith(_CONSUMER_ONLY_PREFIXES)


def producer_settings(kafka: Mapping[str, Any]) -> dict[str, Any]:
    """The app's kafka settings as a producer (or an admin client) takes them."""
    return {key: value for key, value in kafka.items() if not consumer_only(key)}


def check_group_protocol(kafka: Mapping[str, Any], where: str = "kafka") -> None:
    """Refuse a ``group.protocol`` other than classic or consumer, and under the new consumer
    group protocol (KIP-848) the settings it moves to the broker, each with what to do instead.

    Raises:
        ConfigurationError: names the setting.
    """
    protocol = kafka.get("group.protocol", "classic")
    if protocol not in ("classic", "consumer"):
        raise ConfigurationError(
            f"{where}: group.protocol must be 'classic' or 'consumer' (KIP-848), got {protocol!r}",
            "group.protocol",
        )
    if protocol != "consumer":
        return
    for name, why in _NOT_UNDER_CONSUMER_PROTOCOL.items():
        if name in kafka:
            raise ConfigurationError(
                f"{where}: {name} is not a client setting under group.protocol=consumer: {why}",
                name,
            )
