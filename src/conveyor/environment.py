"""Configuration from the environment: the variables Conveyor reads and one precedence.

An ``App`` setting comes from the first of: the argument given in code, its environment
variable, Conveyor's default. librdkafka settings come from ``kafka={...}`` first, then from
``KAFKA_BOOTSTRAP_SERVERS`` (``bootstrap.servers``) and ``CONVEYOR_KAFKA_<NAME>`` (any
librdkafka setting: ``CONVEYOR_KAFKA_SASL_PASSWORD`` is ``sasl.password``). Every value read
here is remembered with where it came from, for ``conveyor config``.

The variables of the command line (``CONVEYOR_APP``, ``CONVEYOR_LOG_LEVEL``, the web UI's
credentials ...) are listed here too, so that one table documents them all.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from conveyor.errors import ConfigurationError

__all__ = [
    "APP_VARIABLES",
    "BOOTSTRAP_ENV",
    "DEFAULT",
    "KAFKA_PREFIX",
    "NODE_ENV",
    "OTHER_VARIABLES",
    "Resolved",
    "Variable",
    "kafka_from_environment",
    "resolve",
]

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"
KAFKA_PREFIX = "CONVEYOR_KAFKA_"
NODE_ENV = "CONVEYOR_SWARM_NODE"
"""Set by ``conveyor swarm`` in each node's environment: the node's number (stable across its
restarts)."""

ARGUMENT = "argument"
DEFAULT_SOURCE = "default"


class _Default:
    """The default of an ``App`` argument not given in code (its environment variable, else
    Conveyor's default, decides)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Any = _Default()
"""What an ``App`` argument is when the code does not give it."""


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, the setting it sets and what it takes."""

    name: str
    setting: str
    takes: str
    """What the value may be, for errors and the docs (``a whole number >= 1``)."""
    parse: Callable[[str], Any] = str
    secret: bool = False


def _whole(text: str) -> int:
    return int(text.strip())


def _seconds(text: str) -> float:
    value = float(text.strip())
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def _flag(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


def _or_none(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def parsed(text: str) -> Any:
        return None if text.strip().lower() in ("none", "off") else parse(text)

    return parsed


APP_VARIABLES: tuple[Variable, ...] = (
    Variable("CONVEYOR_CLIENT_ID", "client_id", "a name (the app's client.id and default group)"),
    Variable("CONVEYOR_INSTANCE_ID", "instance_id",
             "this process's stable name, e.g. a StatefulSet pod's name"),
    Variable("CONVEYOR_CONCURRENCY", "concurrency", "a whole number >= 1", _whole),
    Variable("CONVEYOR_MAX_MESSAGES", "max_messages", "a whole number >= 1", _whole),
    Variable("CONVEYOR_MAX_WAIT_TIME", "max_wait_time", "seconds", _seconds),
    Variable("CONVEYOR_SHUTDOWN_TIMEOUT", "shutdown_timeout", "seconds", _seconds),
    Variable("CONVEYOR_PAUSE_TIMEOUT", "pause_timeout", "seconds", _seconds),
    Variable("CONVEYOR_PAUSE_MAX_TIMEOUT", "pause_max_timeout", "seconds", _seconds),
    Variable("CONVEYOR_PAUSE_WITH_EXPONENTIAL_BACKOFF", "pause_with_exponential_backoff",
             "true or false", _flag),
    Variable("CONVEYOR_MAX_LISTENERS", "max_listeners", "a whole number >= 1", _whole),
    Variable("CONVEYOR_INLINE_QUICK_BATCHES", "inline_quick_batches", "true or false", _flag),
    Variable("CONVEYOR_GC_THRESHOLD", "gc_threshold", "a whole number >= 100, or none",
             _or_none(_whole)),
    Variable("CONVEYOR_EVENT_LOOP_BLOCKED_AFTER", "event_loop_blocked_after",
             "seconds, or none", _or_none(_seconds)),
    Variable("CONVEYOR_STATE_DIR", "state_dir", "a folder (the state stores' files)"),
    Variable("CONVEYOR_STATE_FLUSH_INTERVAL", "state_flush_interval", "seconds", _seconds),
    Variable("CONVEYOR_TRANSACTION_INTERVAL", "transaction_interval", "seconds", _seconds),
)  # fmt: skip
"""The ``App`` settings an environment variable can set (when the code does not)."""

OTHER_VARIABLES: tuple[Variable, ...] = (
    Variable(BOOTSTRAP_ENV, "kafka: bootstrap.servers", "host:port[,host:port...]"),
    Variable(f"{KAFKA_PREFIX}<NAME>", "kafka: <name>",
             "any librdkafka setting, upper case with '_' for '.'"),
    Variable("CONVEYOR_APP", "--app", "module:attribute of the app, for the command line"),
    Variable("CONVEYOR_LOG_LEVEL", "--log-level", "DEBUG, INFO, WARNING or ERROR"),
    Variable("CONVEYOR_LOG_FORMAT", "--log-format", "text or json"),
    Variable("CONVEYOR_COMMANDS_KEY", "app.web commands", "the key that signs and checks "
             "commands to the app's processes", secret=True),
    Variable("CONVEYOR_WEB_PASSWORD_HASH", "conveyor web", "a hash from conveyor web "
             "hash-password", secret=True),
    Variable("CONVEYOR_WEB_SECRET", "conveyor web", "the key that signs session cookies",
             secret=True),
    Variable("CONVEYOR_CONNECT_GROUP", "the web UI's Connectors page",
             "the connect cluster it shows (conveyor connect worker --group)"),
    Variable("CONVEYOR_CONNECT_PASSWORD_HASH", "conveyor connect worker", "a hash from "
             "conveyor web hash-password: the REST API's calls sign in (HTTP Basic)", secret=True),
    Variable("CONVEYOR_SCHEMA_REGISTRY", "--schema-registry", "a Schema Registry URL"),
    Variable("CONVEYOR_LOOP_SERVING", "producer", "0 switches loop serving off"),
    Variable("CONVEYOR_BROKER_DIR", "conveyor broker", "the development broker's data folder"),
    Variable("CONVEYOR_CACHE_DIR", "conveyor broker", "where Kafka's jars are cached"),
)  # fmt: skip
"""The other variables Conveyor reads: librdkafka settings and the command line's."""


@dataclass(frozen=True)
class Resolved:
    """An ``App``'s settings after the precedence, and where each came from."""

    values: dict[str, Any]
    """Each setting given in code or by the environment (the others take their default)."""
    sources: dict[str, str]
    """Setting name (``kafka: <name>`` for librdkafka's) -> ``argument``, ``$VARIABLE`` or
    ``default``."""


def kafka_from_environment(environ: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """librdkafka settings from the environment: name -> (value, variable).

    Raises:
        ConfigurationError: ``KAFKA_BOOTSTRAP_SERVERS`` and
            ``CONVEYOR_KAFKA_BOOTSTRAP_SERVERS`` both set, to different values.
    """
    environ = os.environ if environ is None else environ
    found: dict[str, tuple[str, str]] = {}
    for variable, value in sorted(environ.items()):
        if variable.startswith(KAFKA_PREFIX) and len(variable) > len(KAFKA_PREFIX) and value:
            found[variable[len(KAFKA_PREFIX) :].lower().replace("_", ".")] = (value, variable)
    servers = environ.get(BOOTSTRAP_ENV)
    if servers:
        other = found.get("bootstrap.servers")
        if other is not None and other[0] != servers:
            raise ConfigurationError(
                f"{BOOTSTRAP_ENV} ({servers!r}) and {other[1]} ({other[0]!r}) disagree: set one",
                BOOTSTRAP_ENV,
            )
        found["bootstrap.servers"] = (servers, BOOTSTRAP_ENV)
    return found


def resolve(
    arguments: Mapping[str, Any],
    kafka: Mapping[str, Any] | None,
    environ: Mapping[str, str] | None = None,
) -> Resolved:
    """Apply the one precedence: ``arguments`` (the ``App`` arguments, :data:`DEFAULT` where
    the code gave none) over the environment over the defaults; ``kafka``'s settings over
    the environment's.

    Raises:
        ConfigurationError: a variable whose value cannot be read (naming the variable).
    """
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, value in arguments.items():
        if value is not DEFAULT:
            values[name], sources[name] = value, ARGUMENT
    for variable in APP_VARIABLES:
        if variable.setting in values or variable.setting not in arguments:
            continue
        text = environ.get(variable.name)
        if text is None or not text.strip():
            sources[variable.setting] = DEFAULT_SOURCE
            continue
        try:
            values[variable.setting] = variable.parse(text)
        except ValueError:
            raise ConfigurationError(
                f"{variable.name} must be {variable.takes}, got {text!r}", variable.name
            ) from None
        sources[variable.setting] = f"${variable.name}"
    merged: dict[str, Any] = {}
    if kafka is None or isinstance(kafka, Mapping):
        given = kafka or {}
        from_environment = kafka_from_environment(
            {k: v for k, v in environ.items() if k != BOOTSTRAP_ENV}
            if given.get("bootstrap.servers")
            else environ
        )  # the code's brokers win: the variables' disagreement does not matter then
        for name, (value, variable_name) in from_environment.items():
            merged[name] = value
            sources[f"kafka: {name}"] = f"${variable_name}"
        for name, value in given.items():
            merged[name] = value
            sources[f"kafka: {name}"] = ARGUMENT
        values["kafka"] = merged if (kafka is not None or merged) else None
    else:  # not a mapping: the settings' check names it
        values["kafka"] = kafka
    _per_node(values, sources, environ.get(NODE_ENV))
    return Resolved(values, sources)


def _per_node(values: dict[str, Any], sources: dict[str, str], node: str | None) -> None:
    """In a node of ``conveyor swarm``, the names that must differ between processes (the
    instance id of its transactional producer, librdkafka's ``group.instance.id``) get the
    node's number: the swarm's nodes share one environment, and two processes with one
    transactional id, or one static member id, fence each other."""
    if not node:
        return
    kafka = values.get("kafka")
    instance = values.get("instance_id")
    if isinstance(instance, str) and instance:
        values["instance_id"] = f"{instance}-{node}"
        sources["instance_id"] = f"{sources.get('instance_id', ARGUMENT)} + swarm node {node}"
    if isinstance(kafka, dict) and kafka.get("group.instance.id"):
        kafka["group.instance.id"] = f"{kafka['group.instance.id']}-{node}"
        source = sources.get("kafka: group.instance.id", ARGUMENT)
        sources["kafka: group.instance.id"] = f"{source} + swarm node {node}"
