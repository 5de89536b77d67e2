"""What a route declares about state: its stores (``state=``, and one per window its consumer
class holds), and the consumer a route's ``window=`` option runs."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from conveyor.consumer import Consumer
from conveyor.errors import ConfigurationError
from conveyor.state.joins import Join
from conveyor.state.store import DEFAULT_STORE, STORE_NAME, Store
from conveyor.state.windows import Windowed, WindowResult

__all__ = ["route_stores", "window_consumer"]


def route_stores(
    route: str, state: Any, virtual_partitions: Any, consumer_class: type | None
) -> dict[str, Store]:
    """A route's stores by name: its ``state=`` option's and one per window of its consumer
    class; or a :class:`ConfigurationError` naming what is wrong."""
    stores = _declared(route, state)
    for attribute in dir(consumer_class) if consumer_class is not None else ():
        declared = getattr(consumer_class, attribute, None)
        if isinstance(declared, Windowed):
            own = {declared.name: declared.store()}
        elif isinstance(declared, Join):
            own = declared.stores()
        else:
            continue
        for name, store in own.items():
            if name in stores:
                raise ConfigurationError(
                    f"routes.topic({route!r}): the {type(declared).__name__.lower()} "
                    f"{attribute!r} needs a store named {name!r}, and state= has one",
                    "state",
                )
            stores[name] = store
    if stores and virtual_partitions:
        _check_lanes(route, consumer_class)
    return stores


def _check_lanes(route: str, consumer_class: type | None) -> None:
    """Stores with virtual partitions: at least once, each key written by one lane; windows,
    joins and ``async def consume()`` are refused (see the state guide)."""
    for attribute in dir(consumer_class) if consumer_class is not None else ():
        declared = getattr(consumer_class, attribute, None)
        if isinstance(declared, Windowed | Join):
            kind = "window" if isinstance(declared, Windowed) else "join"
            raise ConfigurationError(
                f"routes.topic({route!r}): the {kind} {attribute!r} and virtual_partitions "
                "do not go together: it keeps the "
                "partition's stream time, which its lanes would share. Drop the virtual "
                "partitions, or keep the window's state yourself in a store per key",
                "virtual_partitions",
            )
    if inspect.iscoroutinefunction(getattr(consumer_class, "consume", None)):
        raise ConfigurationError(
            f"routes.topic({route!r}): state stores with virtual_partitions need a "
            "consume() that is not async def (a lane's store writes are flushed on its "
            "worker thread)",
            "virtual_partitions",
        )


def _declared(route: str, state: Any) -> dict[str, Store]:
    if state is None:
        return {}
    if isinstance(state, Store):
        return {DEFAULT_STORE: state}
    if not isinstance(state, Mapping) or not state:
        raise ConfigurationError(
            f"routes.topic({route!r}): state must be a Store() or a dict of them by name, "
            f"got {state!r}",
            "state",
        )
    stores = {}
    for name, store in state.items():
        if not isinstance(name, str) or not STORE_NAME.fullmatch(name):
            raise ConfigurationError(
                f"routes.topic({route!r}): a store's name must be letters, digits, '.', "
                f"'_' or '-' (it names a topic and a folder), got {name!r}",
                "state",
            )
        if not isinstance(store, Store):
            raise ConfigurationError(
                f"routes.topic({route!r}): state[{name!r}] must be a Store(), got {store!r}",
                "state",
            )
        stores[name] = store
    return stores


def window_consumer(route: str, windowed: Any) -> type[Consumer]:
    """The consumer of a route declared with ``window=``: its results go to the window's
    topic, its late messages to ``late_to``; in one transaction with the store's changes and
    the offset when the window says ``exactly_once``."""
    if not isinstance(windowed, Windowed) or windowed.output is None:
        raise ConfigurationError(
            f"routes.topic({route!r}): window must be a window with its output, e.g. "
            f"Tumbling(60).count().to('counts'), got {windowed!r}",
            "window",
        )
    output, late_to = windowed.output, windowed.late_to

    class WindowConsumer(Consumer):
        window = windowed

        def consume(self) -> None:
            if windowed.exactly_once:
                with self.transaction():
                    self._emit(self.window.update(self.messages))
                    self.mark_as_consumed(self.messages.last)
            else:
                self._emit(self.window.update(self.messages))

        def tick(self) -> None:
            if not windowed.exactly_once:  # a transaction needs an offset to commit with it
                self._emit(self.window.tick())

        def _emit(self, results: list[WindowResult]) -> None:
            sent: list[dict[str, Any]] = [
                {"topic": output, "key": result.key, "payload": result.value} for result in results
            ]
            if late_to is not None:
                sent.extend(
                    {
                        "topic": late_to,
                        "key": message.raw_key,
                        "payload": message.raw_payload,
                        "headers": message.raw_headers,
                    }
                    for message in self.window.late
                )
            if sent:
                self.produce_many_sync(sent)

    WindowConsumer.__qualname__ = WindowConsumer.__name__ = f"Window[{route}]"
    return WindowConsumer
