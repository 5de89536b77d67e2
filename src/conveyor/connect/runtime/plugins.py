"""Connector plugins: what a connector class declares (its type, version and fields) and
makes (a sink, or a source task), and how a worker finds one by the ``connector.class`` a
configuration names.

A plugin is a class deriving from :class:`SinkConnector` or :class:`SourceConnector`,
registered under the ``conveyor.connectors`` entry point group of its distribution::

    [project.entry-points."conveyor.connectors"]
    Rows = "shop.connectors:RowsSink"

``connector.class`` may name the entry point (``Rows``), the class (``RowsSink``, or without
its ``Connector`` suffix as Kafka Connect's aliases go) or its import path
(``shop.connectors.RowsSink``).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, ClassVar

from conveyor._version import __version__
from conveyor.connect.runtime.definitions import (
    COMMON_FIELDS,
    SINK_FIELDS,
    SOURCE_FIELDS,
    Field,
    field_errors,
)
from conveyor.errors import ConfigurationError
from conveyor.serialization import canonical_json

__all__ = [
    "ENTRY_POINTS",
    "Connector",
    "Plugins",
    "SinkConnector",
    "SourceConnector",
    "SourceOffsets",
    "SourceRecord",
    "SourceTask",
]

ENTRY_POINTS = "conveyor.connectors"
_log = logging.getLogger("conveyor.connect")


class Connector:
    """What every connector plugin declares: ``type``, ``version`` and its own ``fields``
    (besides the ones every connector of its type has)."""

    type: ClassVar[str] = ""
    version: ClassVar[str] = __version__
    fields: ClassVar[tuple[Field, ...]] = ()
    """The plugin's own settings."""

    @classmethod
    def all_fields(cls) -> tuple[Field, ...]:
        """The common fields, the type's, then the plugin's own."""
        typed = SINK_FIELDS if cls.type == "sink" else SOURCE_FIELDS
        return (*COMMON_FIELDS, *typed, *cls.fields)

    @classmethod
    def check(cls, config: dict[str, Any]) -> Mapping[str, list[str]]:
        """Errors across fields, given the parsed values (``{}``: none). Override to add."""
        return {}

    @classmethod
    def errors(cls, config: Mapping[str, Any]) -> dict[str, list[str]]:
        """Every field's errors for ``config`` (strings, as the REST API takes them)."""
        return field_errors(cls.all_fields(), config, cls.check)

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        """The configurations of the connector's tasks (as given: strings), at most
        ``max_tasks`` (default: the connector's own, ``max_tasks`` times for a sink, once for
        a source)."""
        count = max_tasks if self.type == "sink" else 1
        return [dict(config) for _ in range(count)]


class SinkConnector(Connector):
    """A connector that pushes topics into another system: :meth:`sink` makes the
    :class:`~conveyor.connect.Sink` (or ``AsyncSink``) each task delivers to."""

    type: ClassVar[str] = "sink"

    def sink(self, config: Mapping[str, Any]) -> Any:
        """A sink for one task, given the task's parsed configuration."""
        raise NotImplementedError

    @classmethod
    def check(cls, config: dict[str, Any]) -> Mapping[str, list[str]]:
        if not config.get("topics"):
            return {"topics": ["Must configure one of topics or topics.regex"]}
        return {}


@dataclass(frozen=True)
class SourceRecord:
    """One record a source task read: where it goes and where it came from.

    ``source_partition`` names the part of the source it came from (a file, a table) and
    ``source_offset`` how far into it this record is; both are small JSON objects, and the
    offset of each source partition's last record written is what a restarted task is
    given back."""

    topic: str
    value: bytes | str | None
    key: bytes | str | None = None
    source_partition: Mapping[str, Any] = field(default_factory=dict)
    source_offset: Mapping[str, Any] = field(default_factory=dict)
    headers: Sequence[tuple[str, bytes]] | None = None
    partition: int | None = None
    timestamp: int | None = None


class SourceOffsets:
    """The committed offset of each source partition of a connector, as a restarted task
    reads them: ``offsets.get({"filename": "/var/log/app.log"})`` (``None``: none yet)."""

    def __init__(self, by_partition: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._by_partition = dict(by_partition or {})

    def get(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        found = self._by_partition.get(canonical_json(dict(partition)).decode())
        return None if found is None else dict(found)

    def __len__(self) -> int:
        return len(self._by_partition)

    def __repr__(self) -> str:
        return f"SourceOffsets({self._by_partition!r})"


class SourceTask:
    """Reads records from another system. The worker calls :meth:`start` with the offsets
    committed for the task's source partitions, then :meth:`poll` in a loop (its records are
    written with their offsets, in one transaction under exactly-once), :meth:`stop` once."""

    def start(self, offsets: SourceOffsets) -> None:
        """Begin reading from ``offsets``: the offset committed last for each source
        partition (with its records, under exactly-once)."""

    def poll(self, timeout: float) -> list[SourceRecord]:
        """The records read since the last call (``[]`` when none came within ``timeout``
        seconds)."""
        raise NotImplementedError

    def committed(self) -> None:
        """The records of the last poll were written (with their offsets): a source that
        tells its system how far it was read (a replication slot) does it here."""

    def stop(self) -> None:
        """Stop reading and let go of what :meth:`start` took."""


class SourceConnector(Connector):
    """A connector that reads another system into topics: :meth:`task` makes each task."""

    type: ClassVar[str] = "source"

    def task(self, config: Mapping[str, Any]) -> SourceTask:
        """A source task, given its parsed configuration."""
        raise NotImplementedError


class Plugins:
    """The connector plugins installed: the entry points of the ``conveyor.connectors``
    group (read once), and classes named by their import path."""

    def __init__(self, extra: Mapping[str, type[Connector]] | None = None) -> None:
        self._by_alias: dict[str, type[Connector]] = {}
        for point in entry_points(group=ENTRY_POINTS):
            try:
                loaded = point.load()
            except Exception:
                _log.exception("the connector plugin %s could not be loaded", point.value)
                continue
            if isinstance(loaded, type) and issubclass(loaded, Connector):
                self._by_alias[point.name] = loaded
            else:
                _log.error("the connector plugin %s is no Connector class", point.value)
        self._by_alias.update(extra or {})

    def classes(self) -> list[type[Connector]]:
        """Every plugin, each once, by its import path."""
        unique = {class_path(one): one for one in self._by_alias.values()}
        return [unique[path] for path in sorted(unique)]

    def find(self, name: str) -> type[Connector]:
        """The plugin ``name`` names (an alias, a class name with or without ``Connector``,
        an import path).

        Raises:
            ConfigurationError: no plugin is called so.
        """
        if name in self._by_alias:
            return self._by_alias[name]
        for one in self._by_alias.values():
            simple = one.__name__
            if name in (class_path(one), simple, simple.removesuffix("Connector")):
                return one
        if "." in name:
            module, _, attribute = name.rpartition(".")
            try:
                found = getattr(importlib.import_module(module), attribute)
            except (ImportError, AttributeError):
                found = None
            if isinstance(found, type) and issubclass(found, SinkConnector | SourceConnector):
                return found
        raise ConfigurationError(
            f"Failed to find any class that implements Connector and which name matches "
            f"{name}, available connectors are: "
            + ", ".join(class_path(one) for one in self.classes()),
            "connector.class",
        )


def class_path(plugin: type[Connector]) -> str:
    """A plugin's import path (what ``GET /connector-plugins`` lists as its class)."""
    return f"{plugin.__module__}.{plugin.__qualname__}"
