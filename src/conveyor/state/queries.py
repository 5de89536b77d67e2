"""Interactive queries: ``app.stores.get(store, key)`` reads a key of a state store wherever
its partition is.

The key's partition is where the app's partitioner puts it (librdkafka's ``partitioner``
setting, ``consistent_random`` by default: produce the store's topic with the same). When this
process has the partition, its local copy answers; otherwise the request goes over the web
UI's command channel (``conveyor_consumers_commands``) to whichever process has the partition,
which answers from its copy. So the processes that own the store's partitions run the web
UI's command handler (``app.web.enable()``), with the same commands key as the asker when
commands are signed.

An answer is what the owner's copy holds: what was flushed (or committed, under exactly-once),
not the writes of a batch still running or kept for the next flush.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from conveyor.errors import ConfigurationError, NotAssignedError
from conveyor.producer.partitioners import partitioner_for
from conveyor.state.errors import StateError

if TYPE_CHECKING:
    from conveyor.routing.topic import Topic
    from conveyor.settings import AppSettings
    from conveyor.state.space import StateSpace
    from conveyor.state.store import Store

__all__ = ["StoreQueries"]


class _Result(Protocol):
    @property
    def status(self) -> str: ...

    @property
    def reason(self) -> str: ...

    @property
    def result(self) -> dict[str, Any]: ...


class _Asker(Protocol):
    def send(
        self,
        command: str,
        *,
        process: str | None = None,
        by: str = ...,
        timeout: float = ...,
        **args: Any,
    ) -> _Result: ...


class _Web(Protocol):
    def commander(self) -> _Asker: ...


class _Admin(Protocol):
    def partition_counts(self) -> dict[str, int]: ...


class QueryHost(Protocol):
    """What the queries need of their app."""

    @property
    def routes(self) -> Iterable[Topic]: ...

    @property
    def settings(self) -> AppSettings: ...

    @property
    def admin(self) -> _Admin: ...

    @property
    def web(self) -> _Web: ...


class StoreQueries:
    """``app.stores`` (see the module)."""

    def __init__(
        self,
        app: QueryHost,
        space: Callable[[], StateSpace | None],
        on_partition: Callable[..., Any] | None = None,
    ) -> None:
        """``space()``: the stores of the app's run, while it runs; ``on_partition(topic,
        partition, action, group)``: ``action(executor, listener)`` on the partition's
        listener thread (the app's)."""
        self._app = app
        self._space = space
        self._on_partition = on_partition
        self._partitions: dict[str, int] = {}  # partition counts, by topic

    def get(
        self,
        store: str,
        key: Any,
        default: Any = None,
        *,
        topic: str | None = None,
        group: str | None = None,
        timeout: float = 5.0,
    ) -> Any:
        """``key``'s value in ``store`` (``default`` when it holds none), from this process's
        copy when it has the key's partition, else from the process that has it.

        Raises:
            ConfigurationError: no route declares ``store`` (or several do: give ``topic``).
            StateError: no process answered within ``timeout`` seconds.
        """
        route, declared = self._route(store, topic, group)
        raw_key = declared.key_codec.encode(key)
        partition = self._partition(route.name, raw_key)
        raw = self._here(route, partition, store, raw_key)
        if raw is None and not self._held_here(route.name, partition, route.consumer_group):
            raw = self._ask(route, partition, store, key, timeout)
        return default if raw is None else declared.codec.decode(raw)

    def answer(
        self, topic: str, partition: int, store: str, key: Any, group: str | None = None
    ) -> dict[str, Any]:
        """On the process that has ``topic``/``partition``: the query's answer (the command
        handler's ``lookup``).

        Raises:
            NotAssignedError: this process does not have the partition's stores open.
        """
        space = self._space()
        found = None if space is None else space.find(topic, partition, group)
        if found is None or store not in found.declared:
            raise NotAssignedError(f"{topic}/{partition}: its stores are not open here")
        raw = found.flushed(store, found.declared[store].key_codec.encode(key))
        return {
            "found": raw is not None,
            "raw": None if raw is None else base64.b64encode(raw).decode(),
        }

    def rebuild(
        self, topic: str, partition: int, *, store: str | None = None, group: str | None = None
    ) -> dict[str, Any]:
        """Delete this process's local copy of ``topic``/``partition``'s stores (``store``:
        that one only) and restore them from their changelogs, while the partition stays
        assigned: its batches wait meanwhile (the Stores page shows the restore's progress).
        Returns at once; the partition's own job does it between two batches. For a copy
        gone wrong on disk, or to take back space a store's deleted keys hold.

        Raises:
            NotAssignedError: this process does not have the partition.
            ConfigurationError: no route of ``topic`` declares ``store`` (or a store).
        """
        routes = [
            route
            for route in self._app.routes
            if route.name == topic
            and route.state
            and (group is None or route.consumer_group == group)
        ]
        if not routes:
            raise ConfigurationError(f"no route of {topic} declares a store", "topic")
        declared = routes[0].state
        if store is not None and store not in declared:
            raise ConfigurationError(
                f"no store {store!r} on {topic} (its stores: {', '.join(declared)})", "store"
            )
        rebuilt = [name for name, found in declared.items() if found.changelog]
        names = (
            [store] if store is not None else [n for n in rebuilt if not declared[n].global_table]
        )
        if self._on_partition is None:
            raise NotAssignedError(f"{topic}/{partition}: the app is not running")
        self._on_partition(
            topic,
            partition,
            lambda executor, _listener: executor.request_rebuild(names),
            routes[0].consumer_group,
        )
        return {"topic": topic, "partition": partition, "stores": names}

    def reports(self) -> list[dict[str, Any]]:
        """This process's store partitions, as the web UI's reports carry them."""
        space = self._space()
        return [] if space is None else space.reports()

    def _route(self, store: str, topic: str | None, group: str | None) -> tuple[Topic, Store]:
        found = [
            (route, route.state[store])
            for route in self._app.routes
            if store in route.state
            and (topic is None or route.name == topic)
            and (group is None or route.consumer_group == group)
        ]
        if not found:
            raise ConfigurationError(f"no route declares a store {store!r}", "store")
        if len(found) > 1:
            topics = ", ".join(route.name for route, _ in found)
            raise ConfigurationError(
                f"store {store!r} is on several routes ({topics}): give topic= (and group=)",
                "topic",
            )
        return found[0]

    def _partition(self, topic: str, raw_key: bytes) -> int:
        count = self._partitions.get(topic)
        if count is None:
            count = self._app.admin.partition_counts().get(topic)
            if count is None:
                raise ConfigurationError(f"the topic {topic} does not exist", "topic")
            self._partitions[topic] = count
        placed_by = str(self._app.settings.kafka.get("partitioner", "consistent_random"))
        return partitioner_for(placed_by)(raw_key, count)

    def _held_here(self, topic: str, partition: int, group: str) -> bool:
        space = self._space()
        return space is not None and space.find(topic, partition, group) is not None

    def _here(self, route: Topic, partition: int, store: str, raw_key: bytes) -> bytes | None:
        space = self._space()
        found = None if space is None else space.find(route.name, partition, route.consumer_group)
        return None if found is None else found.flushed(store, raw_key)

    def _ask(
        self, route: Topic, partition: int, store: str, key: Any, timeout: float
    ) -> bytes | None:
        result = self._app.web.commander().send(
            "lookup",
            topic=route.name,
            partition=partition,
            group=route.consumer_group,
            store=store,
            key=key,
            by="app.stores.get",
            timeout=timeout,
        )
        if result.status != "done":
            raise StateError(
                f"{store}[{key!r}] of {route.name}/{partition}: {result.status}"
                + (f" ({result.reason})" if result.reason else "")
            )
        raw = result.result.get("raw")
        return None if raw is None else base64.b64decode(raw)
